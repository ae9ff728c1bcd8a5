"""Walk a code base for leftovers, and store what was found: the shell around
:mod:`ledger.analysis.leftovers`.

The walk skips ``.git`` and ``node_modules`` (always) and any other folder names given, does not
follow symbolic links, reads at most ``max_bytes`` of a file (larger files are counted, not
read) and skips binary files (a NUL byte in the first 8 KiB). Text is decoded as UTF-8, with
undecodable bytes replaced, so a Latin-1 file is still searched.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG

from ledger.analysis.leftovers import Category, Finding, Patterns, Tally, is_checklist, scan_text
from ledger.db import connection, writes

ALWAYS_SKIPPED = (".git", "node_modules")
DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
SNIFF_BYTES = 8192


@dataclass
class Scan:
    repo: str
    categories: tuple[Category, ...]
    findings: list[Finding] = field(default_factory=list)
    tally: Tally = field(default_factory=Tally)
    #: What could not be searched, each "PATH: why" (the tally counts them as unreadable).
    unreadable: list[str] = field(default_factory=list)


def text_files(
    root: Path, skip_dirs: Iterable[str], max_bytes: int, result: Scan,
    exclude: Path | None = None,
) -> Iterator[tuple[str, str]]:
    """``(relative POSIX path, text)`` of every text file under ``root``, in a stable order;
    what cannot be read is counted and named in ``result``."""
    skip = {*ALWAYS_SKIPPED, *skip_dirs}
    tally = result.tally

    def unreadable(error: OSError) -> None:
        tally.unreadable += 1
        result.unreadable.append(f"{error.filename}: {error.strerror or error}")

    for folder, dirs, files in os.walk(root, onerror=unreadable):
        base = Path(folder)
        kept = []
        for name in sorted(dirs):
            if name in skip:
                continue
            if (base / name).is_symlink():
                tally.links += 1
                continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            path = base / name
            if exclude is not None and path == exclude:
                continue
            text = _read_text(path, max_bytes, result)
            if text is not None and is_checklist(text):
                tally.checklists += 1
            elif text is not None:
                tally.files += 1
                yield path.relative_to(root).as_posix(), text


def _read_text(path: Path, max_bytes: int, result: Scan) -> str | None:
    tally = result.tally
    if path.is_symlink():
        tally.links += 1
        return None
    try:
        st = path.stat()
        if not S_ISREG(st.st_mode):  # a FIFO would be waited on, a device read forever
            tally.unreadable += 1
            result.unreadable.append(f"{path}: not a regular file")
            return None
        if st.st_size > max_bytes:
            tally.too_large += 1
            return None
        data = path.read_bytes()
    except OSError as exc:
        tally.unreadable += 1
        result.unreadable.append(f"{path}: {exc.strerror or exc}")
        return None
    if b"\0" in data[:SNIFF_BYTES]:
        tally.binary += 1
        return None
    return data.decode("utf-8", "replace")


def scan(
    repo: str | Path,
    patterns: Patterns | None = None,
    max_bytes: int = DEFAULT_MAX_FILE_BYTES,
    exclude: Path | None = None,
) -> Scan:
    """Search every text file of ``repo`` for every category's patterns."""
    patterns = patterns or Patterns()
    root = Path(repo).resolve()
    result = Scan(str(root), patterns.categories)
    skip_file = exclude.resolve() if exclude is not None else None
    for path, text in text_files(root, patterns.skip_dirs, max_bytes, result, skip_file):
        result.findings.extend(scan_text(path, text, patterns.categories))
    return result


def store_findings(db_path: str | Path, result: Scan) -> int:
    """Replace the ``leftovers`` rows of this repository with the new findings."""
    actions = {c.name: c.action for c in result.categories}
    at = writes.now()
    db = connection.connect(db_path)
    try:
        with writes.immediate(db) as conn:
            conn.execute("DELETE FROM leftovers WHERE repo = ?", (result.repo,))
            writes.insert(
                conn,
                "leftovers",
                ("repo", "path", "line", "category", "matched", "text", "action", "scanned_at"),
                [
                    (result.repo, f.path, f.line, f.category, f.matched, f.text,
                     actions[f.category], at)
                    for f in result.findings
                ],
            )
    finally:
        db.conn.close()
    return len(result.findings)
