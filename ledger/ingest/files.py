"""Finding ledger files and reading them safely: identity, dialect sniffing, bounded lines.

Only regular files are read: anything else found under a folder or given (a FIFO, a device,
a link loop or to nothing) is told to the caller with why, and never opened in a way that
could block. A file is identified by a fingerprint of its first complete line (a JSONL
ledger) or of the whole document (a trace), as log shippers do, so the identity survives a
rename and does not change while the file grows. Lines are read with a length limit, so one
enormous line cannot exhaust memory, and a last line without its newline is never consumed:
the agent may still be writing it, unless it is a complete JSON object: no longer line can
begin with a whole object, so the record is read, and the newline that follows later is taken
as its end (see :func:`read_lines`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from stat import S_ISBLK, S_ISCHR, S_ISDIR, S_ISFIFO, S_ISREG, S_ISSOCK
from typing import BinaryIO

import msgspec

from ledger.formats.detect import DOCUMENTS, detect_any, document_dialect
from ledger.formats.seed_dialects import RecordError, parse_json
from ledger.ingest.unchanged import suffix

SUFFIXES = (".jsonl", ".json")
DEFAULT_MAX_LINE = 8 * 1024 * 1024
SNIFF_LINES = 50
RAW_KEEP = 2048
BATCH_BYTES = 32 * 1024 * 1024
BLOCK = 1 << 20  # bytes read at a time by read_lines
BINARY = "binary file"
BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark, read past at the start of a file
#: Byte order marks of the other Unicode encodings (UTF-32 first: its LE mark begins with
#: UTF-16's): such a file is refused with its encoding named, not read as binary.
WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32 LE", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32 BE", "UTF-32"),
    (b"\xff\xfe", "UTF-16 LE", "UTF-16"),
    (b"\xfe\xff", "UTF-16 BE", "UTF-16"),
)
#: Flags for opening a ledger: a FIFO put in a file's place is opened at once, not waited on
#: (a regular file reads the same with or without O_NONBLOCK).
_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_PARTIAL = ("true", "false", "null", "-")  # a value the writer has only begun


class LedgerPathError(Exception):
    """A path given by the user that cannot be read."""


class NotRegular(OSError):
    """A path that is not a regular file when it is opened (a FIFO put in a ledger's place)."""


#: Told a path and why: a file skipped, or a folder named like a ledger file.
Tell = Callable[[Path, str], None]


def _quiet(_path: Path, _why: str) -> None:
    pass


def check_paths(paths: Iterable[str | Path]) -> None:
    """A path given that does not exist (a typo, most likely) is an error, told before any
    database is made; everything else wrong with a path is a file skipped with a note."""
    for given in paths:
        try:
            os.stat(given)
        except FileNotFoundError:
            path = Path(given)
            raise LedgerPathError(f"{path}: {_missing(path)}") from None
        except OSError:
            pass  # a link loop, say: skipped with a note by discover


def discover(
    paths: Iterable[str | Path], missing_ok: bool = False, skip: Tell = _quiet,
    folder: Tell = _quiet,
) -> list[Path]:
    """Regular files as given, and ``*.jsonl``/``*.json`` under folders (recursively; links
    to folders under them are not followed, as ``rglob`` does not), sorted, unique.

    Anything else is passed to ``skip`` with why: a FIFO, a device or a socket, a link loop
    or a link to nothing, a folder that cannot be listed, a link to a folder named like a
    ledger file. A folder named like a ledger file is searched like any, and told to
    ``folder``. A path given that does not exist is a :class:`LedgerPathError`, unless
    ``missing_ok`` (follow mode, after the first pass: a file rotated away, for now).
    """
    return [Path(name) for name, _ in listing(paths, missing_ok, skip, folder)]


#: A file :func:`listing` found: its absolute name and the stat it was found with.
Listed = tuple[str, os.stat_result]


def listing(
    paths: Iterable[str | Path], missing_ok: bool = False, skip: Tell = _quiet,
    folder: Tell = _quiet,
) -> list[Listed]:
    """The files :func:`discover` finds, in its order, as names with their stats: an ingest
    tells the files it has nothing to read in from these (:mod:`ledger.ingest.unchanged`),
    with no second stat and no path made for them."""
    found: dict[tuple[int, int], Listed] = {}  # by (device, inode): links are one file
    _LISTINGS[0] += 1
    for given in paths:  # (a Path made only where one is told: 500 files named cost 2 ms)
        try:
            info = os.stat(given)
        except FileNotFoundError:
            if not missing_ok:
                path = Path(given)
                raise LedgerPathError(f"{path}: {_missing(path)}") from None
            continue
        except OSError as exc:
            skip(Path(given), why(exc))
            continue
        if S_ISDIR(info.st_mode):
            top = os.fspath(given)
            # Under a folder named by its absolute, normal path, every name found is one too
            # (a folder's entries are plain names): no abspath of each (500 files: 0.3 ms).
            absolute = os.path.abspath(top) == top
            for child in _walk(Path(given), skip, folder):
                _add(found, child, skip, absolute=absolute)
        else:
            _add(found, given, skip, info)
    return list(found.values())


def _walk(top: Path, skip: Tell, folder: Tell) -> list[str]:
    """The names under ``top`` that end like a ledger file, sorted; folders that cannot be
    listed are skipped. As ``os.walk`` goes (a folder's entries, then each of its folders in
    turn; a link, a FIFO or a device is among the files, a link to a folder among the folders
    and not gone into), but with ``os.scandir`` and names as strings: 500 files are found in
    a few milliseconds, a tenth of a no-op re-ingest's work, not thirteen."""
    names: list[str] = []
    _visit(os.fspath(top), names, skip, folder)
    return sorted(names, key=_by_parts)


def _by_parts(name: str) -> str:
    """A key that sorts names as paths sort, by their parts (``a/b`` before ``a-b``): each
    separator made the one character below any a name can hold, so comparing two keys
    compares their parts in turn (a part that ends first sorts first), as the lists of parts
    compare (500 names sorted in 0.1 ms, against 0.8 split into lists)."""
    return name.replace(os.sep, "\0")


#: Folders a process has listed, by name: the identity and times of their stat when listed
#: (device, inode, modification and change times in ns), their ledger-like files and their
#: folders. A folder whose stat is still that is listed from here, with no ``scandir``: its
#: entries can have changed only by changing its modification time (an entry added, removed
#: or renamed) and its change time. Only a process that lists again keeps them (the second
#: :func:`listing` on: a resident server, ``--follow``; a one-shot ingest pays no stat a
#: folder), and only plain folders (no link, no entry that cannot be told, nothing to tell)
#: last changed :data:`SETTLED_NS` before they were listed, so that a change in the same
#: tick of the file system's clock as the listing cannot be missed.
_FOLDERS: dict[str, tuple[tuple[int, int, int, int], list[str], list[str]]] = {}
FOLDERS_MAX = 1 << 16
SETTLED_NS = 5 * 10**9  # longer than the coarsest file system clock's tick (FAT: 2 s)
_LISTINGS = [0]  # listings begun by this process


def _visit(parent: str, names: list[str], skip: Tell, folder: Tell) -> None:
    key = None
    if _LISTINGS[0] > 1:
        now = time.time_ns()
        try:
            info = os.stat(parent)
        except OSError:
            info = None
        if info is not None:
            key = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
            known = _FOLDERS.get(parent)
            if known is not None and known[0] == key:
                names.extend(known[1])
                for child in known[2]:
                    _visit(child, names, skip, folder)
                return
            if max(info.st_mtime_ns, info.st_ctime_ns) > now - SETTLED_NS:
                key = None  # changed too lately to be remembered
    try:
        with os.scandir(parent) as listing:
            entries = list(listing)
    except OSError as exc:
        skip(Path(exc.filename or parent), f"a folder that cannot be listed ({exc.strerror})")
        return
    files, folders = [], []
    plain = True  # (no link, no entry that cannot be told, nothing told)
    for entry in entries:
        name = entry.name  # (most entries end in no ledger suffix: told apart by endswith)
        ledger_like = name.endswith(SUFFIXES) and suffix(name) in SUFFIXES
        try:
            is_dir = entry.is_dir()
            plain = plain and not entry.is_symlink()
        except OSError:
            is_dir = plain = False
        if not is_dir:
            if ledger_like:
                files.append(entry.path)
        elif entry.is_symlink():
            if ledger_like:
                child = Path(entry.path)
                skip(child, f"a link to the folder {_target(child)} (links to folders "
                            "under a folder are not followed)")
        else:
            if ledger_like:
                plain = False
                folder(Path(entry.path), "a folder named like a ledger file: searched as a folder")
            folders.append(entry.path)
    names.extend(files)
    if key is not None and plain:
        if len(_FOLDERS) >= FOLDERS_MAX:
            _FOLDERS.clear()
        _FOLDERS[parent] = (key, files, folders)
    for child in folders:
        _visit(child, names, skip, folder)


def why(exc: OSError) -> str:
    """Why a file could not be opened or read, for its note."""
    if isinstance(exc, NotRegular):
        return str(exc.strerror)
    if exc.errno == errno.ELOOP:
        return "a loop of symbolic links"
    return f"could not be read ({exc.strerror or exc})"


def _kind(mode: int) -> str:
    """What a path that is not a regular file is, for its note."""
    for test, name in (
        (S_ISFIFO, "a named pipe (FIFO)"), (S_ISCHR, "a character device"),
        (S_ISBLK, "a block device"), (S_ISSOCK, "a socket"), (S_ISDIR, "a folder"),
    ):
        if test(mode):
            return f"{name}, not a regular file"
    return "not a regular file"


def _missing(path: Path) -> str:
    if path.is_symlink():
        return f"no such file or folder (a link to {_target(path)}, which does not exist)"
    return "no such file or folder"


def _link(path: Path) -> str:
    """`` (a link to TARGET)`` for a symbolic link, else nothing."""
    return f" (a link to {_target(path)})" if path.is_symlink() else ""


def _target(path: Path) -> str:
    try:
        return shown(Path(os.readlink(path)))
    except OSError:  # gone meanwhile
        return "a path that is gone"


def open_file(path: Path) -> BinaryIO:
    """``path`` opened to read, refused if it is not a regular file, and never blocking (a
    FIFO or a device put where a ledger was is refused once open, not waited on)."""
    fd = open_regular(path, _READ)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_regular(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """A descriptor of ``path`` opened with ``flags`` (plus ``O_NONBLOCK``: a FIFO is never
    waited on), :class:`NotRegular` if it is not a regular file."""
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), mode)
    try:
        kind = os.fstat(fd).st_mode
        if not S_ISREG(kind):
            raise NotRegular(errno.EINVAL, _kind(kind), str(path))
        return fd
    except BaseException:
        os.close(fd)
        raise


def storable(text: str | Path) -> bool:
    """Whether the database can keep ``text`` (a path, or a name given on the command line).
    Bytes that are not valid UTF-8 come to Python as lone surrogates, which SQLite refuses."""
    try:
        str(text).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(path: Path) -> str:
    """``path`` for a message: bytes that are not UTF-8 as ``\\xNN`` escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _add(
    found: dict[tuple[int, int], Listed], name: str | Path, skip: Tell,
    info: os.stat_result | None = None, absolute: bool = False,
) -> None:
    """Add the regular file ``name`` (its ``info`` if it was just stat'ed; ``absolute``: the
    name is absolute and normal already), once per file."""
    try:
        info = os.stat(name) if info is None else info
    except FileNotFoundError:
        if os.path.islink(name):
            skip(Path(name), f"a link to {_target(Path(name))}, which does not exist")
        return  # or gone since it was listed (rotated away): nothing to read
    except OSError as exc:
        skip(Path(name), why(exc))
        return
    if not S_ISREG(info.st_mode):
        skip(Path(name), _kind(info.st_mode) + _link(Path(name)))
        return
    # Absolute: the sources table knows a file by its path, whatever folder ingest runs from.
    key = (info.st_dev, info.st_ino)
    if key not in found:
        found[key] = (os.fspath(name) if absolute else os.path.abspath(name), info)


class FileInfo(msgspec.Struct, frozen=True):
    """What :func:`sniff` tells of a file. (The ingest's records are msgspec structs: a
    dataclass costs every ingest's start 0.5 to 0.9 ms to make, a struct 0.02.)"""

    path: Path
    size: int
    mtime: float
    dialect: str | None
    fingerprint: str | None  # None: no complete first line yet
    problem: str | None = None  # why the dialect is unknown


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sniff(path: Path, max_line: int = DEFAULT_MAX_LINE, forced: str | None = None) -> FileInfo:
    """Identify a file and tell its dialect from its first usable record."""
    with open_file(path) as f:
        stat = os.fstat(f.fileno())
        first = f.readline(max_line + 1)
        encoding = _wide_encoding(first)
        if encoding is not None:
            return FileInfo(path, stat.st_size, stat.st_mtime, None, sha(first), encoding)
        complete = first.endswith(b"\n")
        if not complete and not forced and b"\x00" in first:
            # No newline yet, and a NUL: a compressed or other binary file, not a line.
            return FileInfo(path, stat.st_size, stat.st_mtime, None, sha(first), BINARY)
        if forced in DOCUMENTS or (not complete and len(first) <= max_line and first.strip()):
            # A trace is one document, whatever its lines. A single record with no newline
            # is a whole-document trace, or a line still being written.
            return _sniff_document(path, stat, forced, f, first, max_line)
        if not complete and not first.strip():
            return FileInfo(path, stat.st_size, stat.st_mtime, None, None)
        fingerprint = sha(first)
        if forced:
            return FileInfo(path, stat.st_size, stat.st_mtime, forced, fingerprint)
        dialect, problem, jsonl = _sniff_lines(first, f, max_line)
        if dialect is None and problem != BINARY:
            # Perhaps one document over several lines: a trace, maybe still being written.
            document = _sniff_document(path, stat, None, f, first, max_line)
            if document.dialect in DOCUMENTS or document.fingerprint is None:
                return document
            if not jsonl:  # its first line is no JSON value: say what is wrong with it
                problem = document.problem
        elif dialect in DOCUMENTS and stat.st_size > max_line:  # a document is read whole
            dialect, problem = None, _too_large(stat.st_size, max_line)
        return FileInfo(path, stat.st_size, stat.st_mtime, dialect, fingerprint, problem)


def _wide_encoding(first: bytes) -> str | None:
    """Why a file that starts with a UTF-16 or UTF-32 byte order mark is not read."""
    for mark, name, family in WIDE_BOMS:
        if first.startswith(mark):
            return (f"{name} with a byte order mark, not UTF-8: convert it first, "
                    f"e.g. iconv -f {family} -t UTF-8")
    return None


def _too_large(size: int, max_line: int) -> str:
    return (
        f"too large to read as one JSON document ({size} bytes; the limit is {max_line}, "
        "--max-line-bytes)"
    )


def _sniff_lines(
    first: bytes, f: BinaryIO, max_line: int
) -> tuple[str | None, str | None, bool]:
    """The dialect of the first usable line, else why not; and whether the first line is JSON.

    A NUL byte makes the file binary only if no line of it is usable, so one corrupt line
    does not cost the good ones.
    """
    line, jsonl, binary = first, False, False
    for _ in range(SNIFF_LINES):
        binary = binary or b"\x00" in line
        body = line.removeprefix(BOM).rstrip(b"\r\n")
        if body.strip() and line.endswith(b"\n"):
            try:
                value = parse_json(body)
            except RecordError:
                pass
            else:
                jsonl = jsonl or line is first
                dialect = detect_any(value)
                if dialect is not None:
                    return dialect, None, True
        line = f.readline(max_line + 1)
        if not line:
            break
    if binary:
        return None, BINARY, jsonl
    return None, (
        "cannot tell the dialect: no line in the first "
        f"{SNIFF_LINES} is a trace, a gate ledger line, a native event or an agent log "
        "(Claude Code, Codex, Langfuse)"
    ), jsonl


def _sniff_document(
    path: Path, stat: os.stat_result, forced: str | None, f: BinaryIO, first: bytes,
    max_line: int,
) -> FileInfo:
    if stat.st_size > max_line:
        problem = _too_large(stat.st_size, max_line)
        return FileInfo(path, stat.st_size, stat.st_mtime, None, sha(first), problem)
    f.seek(0)
    data = f.read()
    try:
        body = data.removeprefix(BOM)
        dialect = forced or document_dialect(detect_any(parse_json(body)), body)
        problem = None if dialect else "cannot tell the dialect of this JSON document"
    except RecordError as exc:
        if _unfinished(data):
            return FileInfo(path, stat.st_size, stat.st_mtime, None, None)  # wait for it
        dialect, problem = None, f"not a ledger: {exc}"
    if dialect is not None and dialect not in DOCUMENTS:
        # One complete JSONL record without its newline yet: wait for it.
        return FileInfo(path, stat.st_size, stat.st_mtime, None, None)
    return FileInfo(path, stat.st_size, stat.st_mtime, dialect, sha(data), problem)


def _unfinished(data: bytes) -> bool:
    """Whether a document that does not parse is merely cut short (its writer is not done):
    a first line without its newline yet, or JSON over several lines that runs out of text
    mid-value. One complete line that does not parse is a bad record, not a document."""
    body = data.removeprefix(BOM).rstrip()
    if b"\n" not in data or not body:
        return True
    if b"\n" not in body and body not in (b"{", b"["):
        return False
    try:
        json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return exc.reason == "unexpected end of data"
    except json.JSONDecodeError as exc:
        rest = exc.doc[exc.pos :]
        return (
            not rest
            or exc.msg.startswith("Unterminated string")
            or (exc.msg == "Expecting value" and any(w.startswith(rest) for w in _PARTIAL))
        )
    except (ValueError, RecursionError):
        return False
    return False


class Line(msgspec.Struct, gc=False):
    """A line of a ledger file (a ``Struct``: made for every line, in a third of a
    dataclass's time)."""

    offset: int
    raw: bytes
    oversize: int = 0  # the full length when the line was longer than the limit


def read_lines(
    f: BinaryIO, start: int, count: int, max_line: int = DEFAULT_MAX_LINE,
    max_bytes: int = BATCH_BYTES,
) -> tuple[list[Line], int]:
    """Up to ``count`` complete lines from byte ``start``; returns them and the next offset.

    A last line without a newline is left for later, unless it is a whole JSON object (a
    finished file whose writer did not end it with a newline): then it is read, and the
    offset after it is where its newline will be, which the next read steps over (``start``
    right after a line that had no newline, see :func:`_after_unended`). A line longer than
    ``max_line`` is returned as its first bytes with ``oversize`` set, never held whole (at
    most a block of it). Lines stop once they hold ``max_bytes`` (so a batch of long lines
    stays bounded too).

    Lines are cut from blocks of ``BLOCK`` bytes with one ``split`` instead of a ``readline``
    per line; a line that does not fit in a block is read on its own.
    """
    pos = first = _after_unended(f, start)  # the bytes the lines hold count from here
    out: list[Line] = []
    while len(out) < count and pos - first < max_bytes:
        f.seek(pos)
        block = f.read(BLOCK)
        last = block.rfind(b"\n")
        if last < 0:  # no newline in a whole block: one long line, or the unfinished end
            line, pos = _long_line(f, pos, max_line)
            if line is None:
                break
            out.append(line)
            continue
        # Cut no more lines than wanted: the last piece is the rest of the block (or the
        # unfinished line after its last newline), left whole and dropped.
        for raw in block.split(b"\n", count - len(out))[:-1]:
            if pos - first >= max_bytes:
                break
            size = len(raw)
            out.append(Line(pos, raw) if size <= max_line else
                       Line(pos, raw[:min(RAW_KEEP, max_line + 1)], oversize=size))
            pos += size + 1
    return out, pos


def _long_line(f: BinaryIO, pos: int, max_line: int) -> tuple[Line | None, int]:
    """The line at ``pos`` read on its own (None if it has no newline yet), and the offset
    after it; a line over ``max_line`` is kept as its head, never held whole."""
    f.seek(pos)
    chunk = f.readline(max_line + 1)
    if chunk.endswith(b"\n"):
        return Line(pos, chunk[:-1]), pos + len(chunk)
    if len(chunk) <= max_line:
        if _whole_object(chunk):  # a finished last line, without its newline
            return Line(pos, chunk), pos + len(chunk)
        return None, pos  # end of file, possibly inside a line that is still being written
    head, length = chunk[:RAW_KEEP], len(chunk)
    while True:
        more = f.readline(1 << 20)
        if not more:
            return None, pos
        length += len(more)
        if more.endswith(b"\n"):
            return Line(pos, head, oversize=length - 1), pos + length


def _whole_object(chunk: bytes) -> bool:
    """Whether the end of a file is one complete JSON object (then no byte the writer may
    add can make it part of a longer record)."""
    body = chunk.removeprefix(BOM).rstrip(b"\r")
    if not body.startswith(b"{") or not body.endswith(b"}"):
        return False
    try:
        return isinstance(parse_json(body), dict)
    except RecordError:
        return False


def _after_unended(f: BinaryIO, start: int) -> int:
    """``start``, or past the newline that has come since a last line was read without one.

    Offsets come from :func:`read_lines`: each is just past a newline, or just past a line
    read without its newline, which is the only way a byte other than a newline ends up
    before one."""
    if not start:
        return start
    f.seek(start - 1)
    around = f.read(3)
    if around[:1] == b"\n":
        return start
    if around[1:2] == b"\n":
        return start + 1
    if around[1:3] == b"\r\n":
        return start + 2
    return start


def unread(path: Path, offset: int) -> int:
    """Bytes of ``path`` after ``offset`` that are not a line read yet: an unfinished last
    line (none once the file is read to its end, or to the newline of a line read without
    one)."""
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        return max(0, size - _after_unended(f, offset)) if offset < size else 0


def tail_hash(f: BinaryIO, offset: int, span: int = 256) -> str:
    """A hash of the bytes just before ``offset``: catches a file rewritten behind our back."""
    start = max(0, offset - span)
    f.seek(start)
    return sha(f.read(offset - start))
