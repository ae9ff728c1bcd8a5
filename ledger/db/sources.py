"""What an ingest reads back of its own writes: sources, saved session state, owners, counts."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any


def source_row(conn: sqlite3.Connection, source_id: str) -> dict[str, Any] | None:
    cursor = conn.execute("SELECT * FROM sources WHERE source_id = ?", (source_id,))
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cursor.description], row, strict=True))


def sources_like(
    conn: sqlite3.Connection, paths: Sequence[str], fingerprint: str
) -> list[dict[str, Any]]:
    """The sources at one of ``paths`` or with ``fingerprint``: all a file's identity can
    match (one lookup per file, not a scan of every source, so ingest stays linear in the
    files)."""
    marks = ", ".join("?" for _ in paths)
    cursor = conn.execute(
        f"SELECT * FROM sources WHERE path IN ({marks}) OR fingerprint = ?",
        (*paths, fingerprint),
    )
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def source_ids_from(conn: sqlite3.Connection, prefix: str) -> set[str]:
    """Source ids that start with ``prefix`` (the candidates a new id must not collide with).

    Read as a range of the primary key's index (:func:`prefix_range`), not by a scan of every
    source: a first ingest of n files made n scans of up to n ids."""
    bounds = prefix_range(prefix)
    if bounds is None:
        rows = conn.execute(
            "SELECT source_id FROM sources WHERE substr(source_id, 1, ?) = ?",
            (len(prefix), prefix),
        )
    else:
        rows = conn.execute(
            "SELECT source_id FROM sources WHERE source_id >= ? AND source_id < ?", bounds
        )
    return {source_id for (source_id,) in rows}


def prefix_range(prefix: str) -> tuple[str, str] | None:
    """``(prefix, successor)``: the texts that start with ``prefix`` are those from the one to
    below the other, as SQLite compares texts (their UTF-8 bytes, so in code point order).
    None where no successor can be written: an empty prefix, or one whose last character
    has no next code point (the end of Unicode, or a surrogate next)."""
    last = ord(prefix[-1]) + 1 if prefix else 0
    if not last or 0xD800 <= last < 0xE000 or last > sys.maxunicode:
        return None
    return prefix, prefix[:-1] + chr(last)


def paths_of(conn: sqlite3.Connection, host: str) -> set[str]:
    """The paths of the sources ``host`` may continue (its own, and those of no host: see
    :func:`ledger.ingest.claims.ours`)."""
    rows = conn.execute("SELECT path FROM sources WHERE host IS NULL OR host = ?", (host,))
    return {path for (path,) in rows}


def load_state(conn: sqlite3.Connection, source_id: str, session_id: str) -> dict[str, Any] | None:
    """The resumable state of one session of ``source_id``, if an ingest saved it."""
    row = conn.execute(
        "SELECT state FROM fold_state WHERE session_id = ? AND source_id = ?",
        (session_id, source_id),
    ).fetchone()
    return json.loads(row[0]) if row else None


def session_owner(conn: sqlite3.Connection, session_id: str) -> str | None:
    row = conn.execute(
        "SELECT source_id FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return row[0] if row else None


def session_keys(conn: sqlite3.Connection, session_id: str) -> dict[str, int]:
    """The record keys of a session's steps, each with its step's index (a range of the
    ``steps`` primary key)."""
    rows = conn.execute(
        "SELECT record_key, idx FROM steps WHERE session_id = ? AND record_key IS NOT NULL",
        (session_id,),
    )
    return dict(rows.fetchall())


def count_stop_reasons(conn: sqlite3.Connection, sessions: Iterable[str]) -> Counter[str]:
    """How many of ``sessions`` stopped for each reason, as the database holds them now."""
    ids = sorted(sessions)
    counts: Counter[str] = Counter()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        for reason, count in conn.execute(
            f"SELECT stop_reason, count(*) FROM sessions "
            f"WHERE session_id IN ({marks}) GROUP BY stop_reason",
            chunk,
        ):
            counts[reason] += count
    return counts
