"""Appending whole lines to a ledger file that other processes and threads append to as well.

A line is written with one ``write()`` on a descriptor opened with ``O_APPEND``: the kernel
moves to the end of the file and writes the bytes in one step, so two appenders never
interleave inside a line, whatever its length (PIPE_BUF is a limit for pipes, not for regular
files). The write is also done under an exclusive ``flock``, which every appender here takes:
it covers the one case ``O_APPEND`` alone does not, a short write (a full disk, a file size
limit), whose remainder must follow at once or be taken back. A line is thus either whole in
the file or absent, never torn. And a line is never glued to a last line another writer left
without its newline (one that died mid-line): a newline is written before it, under the lock.
"""

from __future__ import annotations

import fcntl
import os

from ledger.ingest.files import open_regular

#: Read too: the last byte is looked at before a line is added (see the module).
FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC


def append_line(path: str | os.PathLike[str], data: bytes, fsync: bool = False) -> tuple[int, int]:
    """Append ``data`` (one or more whole lines, ending in a newline) to ``path``.

    Returns the byte offsets where the data starts and ends in the file. With ``fsync`` the
    data is on disk before this returns. On an error nothing of ``data`` stays in the file.
    A FIFO or a device in the file's place is refused (``files.NotRegular``), not waited on.
    """
    if not data.endswith(b"\n"):
        raise ValueError("a ledger line must end with a newline")
    fd = open_regular(path, FLAGS)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        start = os.fstat(fd).st_size
        glued = start and os.pread(fd, 1, start - 1) != b"\n"
        out = b"\n" + data if glued else data  # (``data`` starts after that newline)
        written = 0
        try:
            while written < len(out):
                written += os.write(fd, out[written:])
            if fsync:
                os.fsync(fd)
        except BaseException:
            _take_back(fd, start, written)
            raise
        end = os.lseek(fd, 0, os.SEEK_CUR)  # an O_APPEND write leaves the offset at its end
        return end - len(data), end
    finally:
        os.close(fd)


def _take_back(fd: int, start: int, written: int) -> None:
    """Remove a partly written line, unless someone else has written after it meanwhile."""
    if written and os.fstat(fd).st_size == start + written:
        os.ftruncate(fd, start)
