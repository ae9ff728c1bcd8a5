"""The verdict tables: read what :mod:`ledger.verdicts` needs, write what it finds.

``session_parity``, ``cap_coverage`` and ``task_classes`` are derived from ``sessions``,
``steps`` and ``incidents``; they are rewritten whole, in one transaction, after every ingest
that changed something and by ``agent-ledger verdicts``. The settings they were computed with
(tolerance, minimum sessions) are kept in ``verdict_settings`` so that a later ingest keeps them.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from itertools import groupby
from typing import Any

import sqlite_utils

from . import store
from .verdicts import STAY, Settings, Verdicts, compute, task_class_of

SESSIONS_SQL = """
select
  s.session_id, s.task_class, s.dialect, s.stop_reason, s.stop_at, s.stop_detail,
  s.recorded_stop, s.vendor_stop, s.rounds, s.steps, s.tool_calls, s.meters, s.budget,
  st.total_rounds as stop_rounds, st.total_steps as stop_steps,
  st.total_tool_calls as stop_tool_calls
from sessions s
left join steps st on st.session_id = s.session_id and st.idx = s.stop_at
order by coalesce(s.task_class, ''), s.session_id
"""

UNKNOWN_VENDOR_SQL = """
select session_id, task_class, key from incidents where kind = 'unknown_vendor'
order by session_id, start_idx
"""


def _dicts(conn: sqlite3.Connection, sql: str) -> list[dict[str, Any]]:
    cursor = conn.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def stored_settings(conn: sqlite3.Connection) -> Settings:
    """The settings of the last computation, or the defaults."""
    row = conn.execute(
        "SELECT tolerance, min_sessions FROM verdict_settings WHERE id = 1"
    ).fetchone()
    return Settings(*row) if row else Settings()


def compute_from(conn: sqlite3.Connection, settings: Settings | None = None) -> Verdicts:
    """Verdicts over the database as it stands, without writing anything."""
    settings = settings or stored_settings(conn)
    return compute(_dicts(conn, SESSIONS_SQL), _dicts(conn, UNKNOWN_VENDOR_SQL), settings)


def refresh(db: sqlite_utils.Database, settings: Settings | None = None) -> Verdicts:
    """Recompute the verdict tables and store them with the settings used."""
    with store.immediate(db) as conn:
        settings = settings or stored_settings(conn)
        verdicts = Verdicts(settings)
        for part in _rewrite(conn, settings):
            verdicts.parity += part.parity
            verdicts.coverage += part.coverage
            verdicts.classes += part.classes
    verdicts.classes.sort(key=lambda c: (c["verdict"] != STAY, c["task_class"]))
    return verdicts


def _rewrite(
    conn: sqlite3.Connection, settings: Settings, classes: set[str] | None = None
) -> Iterator[Verdicts]:
    """Rewrite the verdict tables one task class at a time (a class's verdict needs only its
    own sessions), so memory holds one class, not the whole database; ``classes``: only these.
    Call inside :func:`store.immediate`; yields each class's part after writing it."""
    unknown: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in _dicts(conn, UNKNOWN_VENDOR_SQL):
        unknown[task_class_of(row)].append(row)
    sql, params = SESSIONS_SQL, []
    if classes is None:
        for table in ("session_parity", "cap_coverage", "task_classes"):
            store.replace_all(conn, table, [])
    else:
        params = sorted(classes)
        marks = ", ".join("?" for _ in params)
        for table in ("session_parity", "cap_coverage", "task_classes"):
            conn.execute(
                f"DELETE FROM [{table}] WHERE coalesce(task_class, '') IN ({marks})", params
            )
        sql = SESSIONS_SQL.replace(
            "order by", f"where coalesce(s.task_class, '') in ({marks})\norder by"
        )
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    rows = (dict(zip(names, row, strict=True)) for row in cursor)
    for task_class, members in groupby(rows, key=task_class_of):
        part = compute(list(members), unknown[task_class], settings)
        store.replace_all(conn, "session_parity", part.parity, keep=True)
        store.replace_all(conn, "cap_coverage", part.coverage, keep=True)
        store.replace_all(conn, "task_classes", part.classes, keep=True)
        yield part
    store.replace_all(conn, "verdict_settings", [{
        "id": 1,
        "tolerance": settings.tolerance,
        "min_sessions": settings.min_sessions,
        "computed_at": store.now(),
    }])


def after_ingest(
    db: sqlite_utils.Database, changed: bool, touched: set[str] | None = None
) -> None:
    """Called at the end of every ingest: recompute if the data changed, or if the verdict
    tables were never computed (a database made before they existed).

    ``touched``: the sessions the ingest wrote, when it deleted none; then only their task
    classes are recomputed (a class's verdict depends on its own sessions alone). None: all.
    """
    never = db.conn.execute("SELECT count(*) FROM verdict_settings").fetchone()[0] == 0
    if not (changed or never):
        return
    with store.immediate(db) as conn:
        classes = None if never or touched is None else _classes_of(conn, touched)
        for _ in _rewrite(conn, stored_settings(conn), classes):
            pass  # written as it goes; nothing kept


def _classes_of(conn: sqlite3.Connection, sessions: set[str]) -> set[str]:
    found: set[str] = set()
    ids = sorted(sessions)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        found.update(task_class_of({"task_class": cls}) for (cls,) in conn.execute(
            f"SELECT DISTINCT task_class FROM sessions WHERE session_id IN ({marks})", chunk
        ))
    return found
