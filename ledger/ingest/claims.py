"""Which ``sources`` row a file is: new, continued, moved, replaced or reset.

A file is known by its fingerprint (its first complete line, see :mod:`ledger.ingest.files`)
and the path it was read at. :func:`claim` finds the row an ingest continues from, or makes a
new one; everything it decides is reported back to the caller (notices, sources to forget) so
that the ingester alone counts and writes. :func:`plan` gives the ids the claims of new files
will make, before they are made, for the workers that fold those files ahead. What every
claim of one ingest pass shares is worked out once a pass (:class:`Settings`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from msgspec import Struct

from ledger.db import sources, writes
from ledger.formats.detect import DOCUMENTS
from ledger.ingest.files import FileInfo, open_file, sniff, tail_hash
from ledger.ingest.options import Options, task_class_for
from ledger.ingest.source import Cursor

NEW, UPDATED, UNCHANGED = "new", "updated", "unchanged"


class Settings:
    """The options of one ingest pass and what its claims derive from them, worked out once a
    pass, not once a file: the fold digest (a JSON of every setting, hashed: 50 us) and the
    task class of each folder (:func:`task_class_for`: a ``resolve()`` and a redaction, some
    90 us). Made again each pass, so a folder moved or relinked between passes is seen."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.digest = options.fold_digest
        self._classes: dict[str, str] = {}  # a file's folder, as named -> its task class

    def task_class(self, path: Path) -> str:
        """:func:`task_class_for` ``path``, remembered by the folder the path names: a file that
        is no link resolves to its folder resolved, so every file of that folder shares it."""
        if os.path.islink(path):
            return task_class_for(path, self.options)
        folder = os.path.dirname(path)
        known = self._classes.get(folder)
        if known is None:
            known = self._classes[folder] = task_class_for(path, self.options)
        return known


class Claimed(Struct):
    """What :func:`claim` found: the row to continue from (None if the file is unchanged) and
    whether it is a new source, one that grew, or neither. (The ingest's records are msgspec
    structs: a dataclass costs every ingest's start 0.5 to 0.9 ms to make, a struct 0.02.)"""

    source: dict[str, Any] | None
    status: str


def claim(
    conn: sqlite3.Connection,
    info: FileInfo,
    settings: Settings,
    notice: Callable[[str], None],
    forget: Callable[[str], None],
) -> Claimed:
    """The ``sources`` row to continue from (new, resumed or reset), or None if unchanged.

    ``forget(source_id)`` is called for every source whose rows must go (a replaced file, a
    file to read again from the start) before its row is made again."""
    options, digest = settings.options, settings.digest
    names = names_of(info.path)
    known = ours(sources.sources_like(conn, names, info.fingerprint or ""), options.host)
    here = [s for s in known if s["path"] in names]
    same = [s for s in here if s["fingerprint"] == info.fingerprint]
    if not same:
        same = [
            s for s in known
            if s["fingerprint"] == info.fingerprint and _gone_or_changed(s)
        ]
        # Files may share a first line: prefer the source this file continues.
        same.sort(key=lambda s: not continues(s, info))
        for moved in same[:1]:
            notice(f"{info.path}: moved from {moved['path']}, not read again")
    for stale in here:
        if stale["fingerprint"] != info.fingerprint:
            notice(f"{info.path}: replaced (its first line changed); read again")
            forget(stale["source_id"])
    if same:
        source = same[0]
        reason = _reset_reason(source, info, digest)
        if reason:
            notice(f"{info.path}: {reason}; read again from the start")
            forget(source["source_id"])
            return Claimed(_new_source(conn, info, source["source_id"], settings), NEW)
        if source["offset"] >= info.size:
            if source["path"] != str(info.path):
                writes.move_source(conn, source["source_id"], str(info.path))
            return Claimed(None, UNCHANGED)
        source["path"] = str(info.path)
        return Claimed(source, UPDATED)
    base = (info.fingerprint or "")[:12]
    source_id = unique_id(base, sources.source_ids_from(conn, base))
    return Claimed(_new_source(conn, info, source_id, settings), NEW)


def plan(
    conn: sqlite3.Connection, files: list[Path], settings: Settings
) -> list[PlannedSource]:
    """The files whose claims will make new sources, and the ids those claims will give
    (:func:`claim` gives a new file the first free id from its fingerprint)."""
    options = settings.options
    taken: dict[str, set[str]] = {}
    planned = []
    for path in files:
        try:
            info = sniff(path, options.max_line, options.dialect)
        except OSError:
            continue
        if info.dialect is None or info.fingerprint is None:
            continue
        if ours(sources.sources_like(conn, names_of(path), info.fingerprint), options.host):
            continue
        base = info.fingerprint[:12]
        ids = taken.setdefault(base, sources.source_ids_from(conn, base))
        source_id = unique_id(base, ids)
        ids.add(source_id)
        planned.append(PlannedSource(path, source_id, info, settings.task_class(path)))
    return planned


class PlannedSource(Struct):
    path: Path
    source_id: str
    info: FileInfo
    task_class: str


def ours(known: list[dict[str, Any]], host: str) -> list[dict[str, Any]]:
    """The sources this host may continue, move or replace: its own, and those with no host
    (made before hosts were recorded). Another host's source (merged in by ``merge``) is never
    taken for a local file, even at the same path or with the same first line: a local copy
    becomes a source of its own, and its records fold once by their keys."""
    return [s for s in known if s.get("host") in (None, host)]


def replaced(current: dict[str, Any] | None, source: dict[str, Any]) -> bool:
    """Whether the ``sources`` row as it is now (``current``) is no longer ``source``:
    gone, or made again for another file or fold (by another ingest, meanwhile)."""
    return current is None or any(current[k] != source[k] for k in ("fingerprint", "fold_digest"))


def continues(source: dict[str, Any], info: FileInfo) -> bool:
    """Whether the file ``info`` still holds the bytes ``source`` has read."""
    if source["offset"] > info.size:
        return False
    if source["dialect"] in DOCUMENTS or not source["offset"]:
        return True
    try:
        with open_file(info.path) as f:
            return tail_hash(f, source["offset"]) == source["check_hash"]
    except OSError:
        return False


def names_of(path: Path) -> list[str]:
    """The names ``sources`` may know a file by: its absolute path, and its path relative to
    this folder (databases made before paths were stored absolute). A source found by its old
    name takes the absolute one from this ingest on."""
    names = [str(path)]
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows): no relative name
        return names
    return names if relative == names[0] else [*names, relative]


def unique_id(base: str, taken: set[str]) -> str:
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _reset_reason(source: dict[str, Any], info: FileInfo, digest: str) -> str | None:
    if source["fold_digest"] != digest:
        return ("budget or vendor map changed since the last ingest "
                "(or a newer agent-ledger folds differently)")
    if info.size < source["offset"]:
        return f"truncated (now {info.size} bytes, {source['offset']} were read)"
    if source["dialect"] != info.dialect:
        # A file too short to tell its dialect at first, and now long enough.
        return f"now read as {info.dialect or 'unknown'}, not {source['dialect'] or 'unknown'}"
    if source["dialect"] in DOCUMENTS and info.size != source["offset"]:
        return "changed (a JSON document is read whole)"
    if not continues(source, info):
        return "rewritten (the bytes already read have changed)"
    return None


def _gone_or_changed(source: dict[str, Any]) -> bool:
    """A known source whose file is no longer at its recorded path (so it may have moved)."""
    path = Path(source["path"])
    if not path.exists():
        return True
    try:
        info = sniff(path)
    except OSError:
        return True
    return info.fingerprint != source["fingerprint"]


def _new_source(
    conn: sqlite3.Connection, info: FileInfo, source_id: str, settings: Settings
) -> dict[str, Any]:
    at = writes.now()
    source = {
        "source_id": source_id,
        "path": str(info.path),
        "dialect": info.dialect,
        "task_class": settings.task_class(info.path),
        "fingerprint": info.fingerprint,
        "check_hash": None,
        "offset": 0,
        "size": info.size,
        "mtime": info.mtime,
        "lines": 0,
        "blank_lines": 0,
        "fold_digest": settings.digest,
        "cursor": json.dumps(Cursor().to_dict()),
        "unknown_records": None,
        "first_ingested_at": at,
        "ingested_at": at,
        "host": settings.options.host,
    }
    writes.write_batch(
        conn, steps=[], incidents=[], errors=[], sessions=[], states=[], source=source
    )
    return source
