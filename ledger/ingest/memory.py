"""Memory an ingest hands back before it forks its workers.

A forked worker shares its parent's pages until one of them writes a page, and what the
ingest holds is counted as the proportional set size of the three (PSS: a shared page split
between its sharers). So pages the parent holds and no process will use again count in full;
:func:`give_back` hands them back. Linux and glibc only; elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path

#: madvise(2)'s advice to drop a range's pages from the process (a file's page is mapped
#: again from the page cache if it is touched again).
MADV_DONTNEED = 4
#: A mapping's first line in /proc/PID/smaps: its range, permissions, offset, device, inode,
#: then its file (none for anonymous memory).
_MAPPING = re.compile(r"([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+ *(.*)")


def give_back(library: str) -> int:
    """Hand back memory this process holds and will not use again; the bytes of
    ``library``'s pages dropped.

    * The C heap's free pages (``malloc_trim``): loading the secret rule set leaves 2 MB of
      freed temporaries there.
    * The pages of ``library``'s mappings that were only read: the rule engine (Kingfisher's
      36 MB native library) reads 10 MB of its own code and embedded rule texts to build the
      rule set, and a scan uses 3.6 MB of it. A mapping written to (relocations, data) is
      kept whole; the others' pages stay in the page cache, and any that is touched again is
      mapped back (a minor fault), so nothing changes but the memory that is the process's.
      Loading the rule set took the ingest's RSS from 35 to 77 MB; this takes it to 66.
    """
    libc = _libc()
    if libc is None:
        return 0
    libc.malloc_trim(0)
    try:
        smaps = Path("/proc/self/smaps").read_text()
    except OSError:
        return 0
    dropped = 0
    for start, end, resident in read_only_mappings(smaps, os.path.realpath(library)):
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start),
                        MADV_DONTNEED) == 0:
            dropped += resident
    return dropped


def read_only_mappings(smaps: str, path: str) -> list[tuple[int, int, int]]:
    """The mappings of file ``path`` in ``smaps`` (a /proc/PID/smaps text) that were never
    written (not writable, no private dirty or anonymous page): (start, end, resident bytes)."""
    found: list[tuple[int, int, int]] = []
    mapping: dict[str, int] | None = None
    for line in [*smaps.splitlines(), "0-0 ---p 0 0:0 0"]:  # a last line closes the last one
        head = _MAPPING.fullmatch(line)
        if head is None:
            field, _, value = line.partition(":")
            if mapping is not None and field in mapping:
                mapping[field] = int(value.split()[0])
            continue
        if mapping is not None and mapping["Private_Dirty"] == mapping["Anonymous"] == 0:
            found.append((mapping["start"], mapping["end"], mapping["Rss"] * 1024))
        start, end, perms, name = head.groups()
        mapping = None
        if name == path and "w" not in perms:
            mapping = {"start": int(start, 16), "end": int(end, 16), "Rss": 0,
                       "Private_Dirty": -1, "Anonymous": -1}
    return found


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "madvise") else None
