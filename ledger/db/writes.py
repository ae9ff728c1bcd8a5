"""The writes of one batch, and of derived tables, inside one write transaction.

Every batch of rows is written in one ``BEGIN IMMEDIATE`` transaction together with the
source's new offset and the sessions' resumable state, so a killed ingest loses nothing that
was committed and never commits half a batch (exactly-once effects from at-least-once reads).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

import sqlite_utils

from ledger.core.fold import STEP_COLUMNS, StepRow
from ledger.db import rollup


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@contextmanager
def immediate(db: sqlite_utils.Database) -> Iterator[sqlite3.Connection]:
    """A write transaction that takes the write lock up front (never a deferred upgrade)."""
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _upsert(conn: sqlite3.Connection, table: str, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    _upsert_values(conn, table, columns, map(itemgetter(*columns), rows))


def _upsert_values(
    conn: sqlite3.Connection, table: str, columns: Sequence[str], values: Iterable[Sequence[Any]]
) -> None:
    """Insert or replace rows given as values in ``columns`` order."""
    sql = (
        f"INSERT OR REPLACE INTO [{table}] ({', '.join(f'[{c}]' for c in columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    conn.executemany(sql, values)




def write_batch(
    conn: sqlite3.Connection,
    *,
    steps: Sequence[StepRow],
    incidents: Sequence[dict[str, Any]],
    errors: Sequence[dict[str, Any]],
    sessions: Sequence[dict[str, Any]],
    states: Sequence[tuple[str, str, str]],
    source: dict[str, Any] | None,
    shared: Sequence[tuple[str, str]] = (),
) -> None:
    """Write one batch as :meth:`SourceFold.take_folded` gives it (``steps`` rows in primary-key
    order, values in :data:`STEP_COLUMNS` order; ``states`` as JSON), inside a write
    transaction (``source``: its new ``sources`` row, if it has moved on). The sessions'
    contributions to the rollup must have been taken out first (see
    :class:`rollup.Pending`)."""
    if steps:
        _upsert_values(conn, "steps", STEP_COLUMNS, steps)
    _upsert(conn, "incidents", incidents)
    if errors:
        columns = list(errors[0])
        conn.executemany(
            f"INSERT INTO ingest_errors ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' for _ in columns)})",
            [tuple(e[c] for c in columns) for e in errors],
        )
    _upsert(conn, "sessions", sessions)
    _upsert(
        conn,
        "fold_state",
        [
            {"session_id": sid, "source_id": src, "state": state}
            for sid, src, state in states
        ],
    )
    if shared:
        conn.executemany(
            "INSERT OR IGNORE INTO session_sources (source_id, session_id) VALUES (?, ?)", shared
        )
    if source is not None:
        _upsert(conn, "sources", [source])


def replace_all(
    conn: sqlite3.Connection, table: str, rows: Sequence[dict[str, Any]], keep: bool = False
) -> None:
    """Replace a derived table's rows (``keep``: add to them). Call inside :func:`immediate`."""
    if not keep:
        conn.execute(f"DELETE FROM [{table}]")
    _upsert(conn, table, rows)


def forget_source(conn: sqlite3.Connection, source_id: str, pending: rollup.Pending) -> list[str]:
    """Delete everything that came from one source (before it is read again from the start);
    its sessions' contributions are taken out of the rollup through ``pending``.

    A session whose records are in several files (``session_sources``) goes whole, so the
    other files that hold it are forgotten too (and so on, for their other sessions): each is
    read again from its start when next ingested. Returns the paths of those others."""
    linked = _linked_sources(conn, source_id)
    paths = []
    for each in (source_id, *sorted(linked)):
        row = conn.execute("SELECT path FROM sources WHERE source_id = ?", (each,)).fetchone()
        if each != source_id and row is not None:
            paths.append(row[0])
        _forget_one(conn, each, pending)
    return paths


def _linked_sources(conn: sqlite3.Connection, source_id: str) -> set[str]:
    """The other sources that share a session with ``source_id``, directly or through others."""
    found, todo = {source_id}, [source_id]
    while todo:
        current = todo.pop()
        rows = conn.execute(
            "SELECT source_id FROM sessions WHERE session_id IN ("
            "  SELECT session_id FROM session_sources WHERE source_id = ?) "
            "UNION SELECT source_id FROM session_sources WHERE session_id IN ("
            "  SELECT session_id FROM sessions WHERE source_id = ? "
            "  UNION SELECT session_id FROM session_sources WHERE source_id = ?)",
            (current, current, current),
        )
        for (other,) in rows:
            if other not in found:
                found.add(other)
                todo.append(other)
    return found - {source_id}


def _forget_one(conn: sqlite3.Connection, source_id: str, pending: rollup.Pending) -> None:
    sessions = "SELECT session_id FROM sessions WHERE source_id = ?"
    pending.take_out(conn, [sid for (sid,) in conn.execute(sessions, (source_id,))])
    conn.execute(
        f"DELETE FROM session_sources WHERE source_id = ? OR session_id IN ({sessions})",
        (source_id, source_id),
    )
    for table in ("incidents", "steps"):
        conn.execute(f"DELETE FROM {table} WHERE session_id IN ({sessions})", (source_id,))
    conn.execute("DELETE FROM fold_state WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM sessions WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM ingest_errors WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM sources WHERE source_id = ?", (source_id,))
