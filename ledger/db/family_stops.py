"""The ``family_stops`` table: each family's stop, worked out from the stored steps.

With ``subagents_count_in_parent`` on, after every ingest pass the families it touched (a
parent session with sub-agents, where the parent or one of them was written) are folded again
from their stored ``steps`` by :func:`ledger.core.family.family_stop`, and their rows
rewritten. With it off the table is left empty, and nothing else changes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ledger.core.budget import Budget
from ledger.core.fold import families_for
from ledger.db.writes import immediate

if TYPE_CHECKING:  # annotations only: ledger.db.connection imports it (without pandas)
    import sqlite_utils

_PARENTS_SQL = (
    "select distinct parent_session_id from sessions where parent_session_id is not null"
)
_CHUNK = 500


def after_ingest(
    db: sqlite_utils.Database, on: bool, budget: Budget, vendor_map: Mapping[str, str],
    touched: set[str] | None,
) -> None:
    """Rewrite the family stops of the families in ``touched`` (None: of every family); with
    the key off (``on`` false), clear them."""
    conn = db.conn
    if not on:
        if conn.execute("select 1 from family_stops limit 1").fetchone():
            with immediate(db):
                conn.execute("delete from family_stops")
        return
    parents = _parents(conn, None if _stale(conn, budget) else touched)
    if parents:
        with immediate(db):
            for parent in parents:
                _write(conn, parent, budget, vendor_map)


def _stale(conn: sqlite3.Connection, budget: Budget) -> bool:
    """Whether some family has no row under this budget (the key just turned on, another
    budget): then every family is worked out again, not only the ones the ingest touched."""
    (kept,) = conn.execute(
        "select count(*) from family_stops where budget_digest = ?", (budget.digest,)
    ).fetchone()
    (families,) = conn.execute(f"select count(*) from ({_PARENTS_SQL})").fetchone()
    return kept != families


def _parents(conn: sqlite3.Connection, touched: set[str] | None) -> list[str]:
    """The parents with sub-agents, of ``touched`` sessions or touched themselves."""
    found = [row[0] for row in conn.execute(_PARENTS_SQL)]
    if touched is None:
        return found
    ids = list(touched)
    near = set(ids)
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start:start + _CHUNK]
        near.update(row[0] for row in conn.execute(
            "select parent_session_id from sessions where session_id in "
            f"({', '.join('?' * len(chunk))})", chunk,
        ))
    return [p for p in found if p in near]


def _write(
    conn: sqlite3.Connection, parent: str, budget: Budget, vendor_map: Mapping[str, str]
) -> None:
    # Here, not above: with the key off, as it is by default, an ingest never needs it.
    from ledger.core.family import COLUMNS, family_stop

    steps_sql = f"select {', '.join(COLUMNS)} from steps where session_id = ?"
    members = [parent, *(row[0] for row in conn.execute(
        "select session_id from sessions where parent_session_id = ?", (parent,)
    ))]
    row = conn.execute("select dialect from sessions where session_id = ?", (parent,)).fetchone()
    steps = [step for sid in members for step in conn.execute(steps_sql, (sid,))]
    stop = family_stop(steps, budget, families_for(row[0] if row else "native"), vendor_map)
    where = (None,) * 6 if stop is None else (
        stop.session_id, stop.idx, stop.ts, stop.reason.value, stop.detail, stop.events
    )
    conn.execute(
        "insert or replace into family_stops values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (parent, *where, len(members), budget.digest),
    )
