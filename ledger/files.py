"""Finding ledger files and reading them safely: identity, dialect sniffing, bounded lines.

A file is identified by a fingerprint of its first complete line (a JSONL ledger) or of the
whole document (a trace), as log shippers do, so the identity survives a rename and does not
change while the file grows. Lines are read with a length limit, so one enormous line cannot
exhaust memory, and a last line without its newline is never consumed: the agent may still be
writing it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .dialects import RecordError, parse_json
from .importers import DOCUMENTS, detect_any

SUFFIXES = (".jsonl", ".json")
DEFAULT_MAX_LINE = 8 * 1024 * 1024
SNIFF_LINES = 50
RAW_KEEP = 2048


class LedgerPathError(Exception):
    """A path given by the user that cannot be read."""


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given, and ``*.jsonl``/``*.json`` under folders (recursively), sorted, unique."""
    found: dict[str, Path] = {}
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.suffix in SUFFIXES and child.is_file():
                    found.setdefault(str(child.resolve()), child)
        elif path.is_file():
            found.setdefault(str(path.resolve()), path)
        elif path.exists():
            raise LedgerPathError(f"{path}: not a regular file or folder")
        else:
            raise LedgerPathError(f"{path}: no such file or folder")
    for path in found.values():
        if not os.access(path, os.R_OK):
            raise LedgerPathError(f"{path}: permission denied")
    return list(found.values())


@dataclass(frozen=True)
class FileInfo:
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
    stat = path.stat()
    with path.open("rb") as f:
        first = f.readline(max_line + 1)
        if not first.endswith(b"\n") and len(first) <= max_line and first.strip():
            # A single record with no newline: a whole-document trace, or a line still being
            # written. Only a complete JSON document is taken now.
            return _sniff_document(path, stat, forced, f)
        if not first.endswith(b"\n") and not first.strip():
            return FileInfo(path, stat.st_size, stat.st_mtime, None, None)
        fingerprint = sha(first)
        if forced in DOCUMENTS:
            return _sniff_document(path, stat, forced, f)
        if forced:
            return FileInfo(path, stat.st_size, stat.st_mtime, forced, fingerprint)
        dialect, problem = _sniff_lines(first, f, max_line)
        if dialect is None and problem != "binary file":
            document = _sniff_document(path, stat, forced, f)
            if document.dialect in DOCUMENTS:
                return document
        return FileInfo(path, stat.st_size, stat.st_mtime, dialect, fingerprint, problem)


def _sniff_lines(first: bytes, f: BinaryIO, max_line: int) -> tuple[str | None, str | None]:
    line = first
    for _ in range(SNIFF_LINES):
        if b"\x00" in line:
            return None, "binary file"
        body = line.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n")
        if body.strip() and line.endswith(b"\n"):
            try:
                dialect = detect_any(parse_json(body))
            except RecordError:
                dialect = None
            if dialect is not None:
                return dialect, None
        line = f.readline(max_line + 1)
        if not line:
            break
    return None, (
        "cannot tell the dialect: no line in the first "
        f"{SNIFF_LINES} is a trace, a gate ledger line, a native event or an agent log "
        "(Claude Code, Codex, Langfuse)"
    )


def _sniff_document(path: Path, stat: os.stat_result, forced: str | None, f: BinaryIO) -> FileInfo:
    f.seek(0)
    data = f.read()
    try:
        dialect = forced or detect_any(parse_json(data.removeprefix(b"\xef\xbb\xbf")))
        problem = None if dialect else "cannot tell the dialect of this JSON document"
    except RecordError as exc:
        if not data.rstrip().endswith(b"}") and b"\n" not in data.rstrip():
            # One unfinished line: wait for the writer.
            return FileInfo(path, stat.st_size, stat.st_mtime, None, None)
        dialect, problem = None, f"not a ledger: {exc}"
    if dialect is not None and dialect not in DOCUMENTS:
        # One complete JSONL record without its newline yet: wait for it.
        return FileInfo(path, stat.st_size, stat.st_mtime, None, None)
    return FileInfo(path, stat.st_size, stat.st_mtime, dialect, sha(data), problem)


@dataclass(frozen=True)
class Line:
    offset: int
    raw: bytes
    oversize: int = 0  # the full length when the line was longer than the limit


def read_lines(
    f: BinaryIO, start: int, count: int, max_line: int = DEFAULT_MAX_LINE
) -> tuple[list[Line], int]:
    """Up to ``count`` complete lines from byte ``start``; returns them and the next offset.

    A last line without a newline is left for later. A line longer than ``max_line`` is
    returned as its first bytes with ``oversize`` set, without ever holding it in memory.
    """
    f.seek(start)
    pos = start
    out: list[Line] = []
    while len(out) < count:
        chunk = f.readline(max_line + 1)
        if chunk.endswith(b"\n"):
            out.append(Line(pos, chunk[:-1]))
            pos += len(chunk)
            continue
        if len(chunk) <= max_line:
            break  # end of file, possibly inside a line that is still being written
        head, length = chunk[:RAW_KEEP], len(chunk)
        while True:
            more = f.readline(1 << 20)
            if not more:
                return out, pos
            length += len(more)
            if more.endswith(b"\n"):
                break
        out.append(Line(pos, head, oversize=length - 1))
        pos += length
    return out, pos


def tail_hash(f: BinaryIO, offset: int, span: int = 256) -> str:
    """A hash of the bytes just before ``offset``: catches a file rewritten behind our back."""
    start = max(0, offset - span)
    f.seek(start)
    return sha(f.read(offset - start))
