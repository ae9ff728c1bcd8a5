"""Stored sessions and their events, read back from the database for a replay without the files.

A ``steps`` row keeps everything the budget machine reads from an event: the action, tool
calls, output tokens, tool error, vendor stop string, outcome, elapsed seconds and the
observation's *hash* (never its text; :attr:`Event.observation_hash` carries it) and the
round's cost (``cost_usd``, as priced at ingest: a replay measures money without prices).
So replaying the rows of a session under the budget it was ingested with reproduces its
stored stop. Two limits, both harmless for the stock vendor map: a vendor stop string is
stored redacted and cut to 500 characters (no mapped string is that long or looks like a
secret), and the vendor map used at ingest is not stored (pass the same ``--vendor-map``).

One query streams the steps in primary-key order, ``(session_id, idx)``, merged with a second
over ``sessions`` in the same order, so a replay holds one session at a time.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

from ledger.core.budget import Budget
from ledger.core.events import Event

#: The ``steps`` columns an event is rebuilt from (``detail`` and ``tool`` are only shown,
#: never measured, so a replay leaves them out).
STEP_COLUMNS = (
    "action", "tool_calls", "output_tokens", "tool_error", "observation_hash",
    "vendor_stop", "outcome", "elapsed_s", "same_round", "cost_usd",
)
#: Event's first fields in order: :func:`stored_sessions` builds events positionally, for
#: speed (of the fields after them only the cost is replayed; tokens, model, the unclassified
#: mark and the record key are not).
assert list(Event.__struct_fields__)[:15] == [
    "action", "tool_calls", "output_tokens", "observation", "tool_error", "vendor_stop",
    "outcome", "tool", "detail", "elapsed_s", "ts", "at", "observation_hash", "unmetered",
    "same_round",
]
NOT_UNMETERED: frozenset[str] = frozenset()
SESSION_COLUMNS = (
    "session_id", "task_class", "dialect", "stop_reason", "stop_at", "stop_detail",
    "recorded_stop", "budget", "cost_usd",
)

#: Sessions that completed with a verified terminal signal: the budget let them run out, and
#: the log itself said the task was complete (seed 000's decision table, row task_complete).
VERIFIED = "stop_reason = 'task_complete' AND recorded_stop = 'task_complete'"


class StoredError(ValueError):
    """The database does not hold what a replay needs (not a ledger, or an unreadable row)."""


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A ``sessions`` row: where the budget stopped it at ingest, and under which budget."""

    session_id: str
    task_class: str | None
    dialect: str
    stop_reason: str
    stop_at: int | None
    stop_detail: str | None
    recorded_stop: str | None
    budget: Budget
    cost_usd: float | None = None  # what the whole session spent (None: no round had a cost)


def stored_sessions(
    conn: sqlite3.Connection, task_class: str | None = None, where: str | None = None
) -> Iterator[tuple[StoredSession, Iterator[Event]]]:
    """Each stored session with an iterator over its events, in ``session_id`` order.

    ``task_class`` keeps one class; ``where`` is a fixed SQL condition on ``sessions`` (such as
    :data:`VERIFIED`), never user input. A caller may stop reading a session's events early:
    the rest are skipped without being rebuilt.
    """
    conditions = [c for c in (where, "task_class = ?" if task_class is not None else None) if c]
    params = [task_class] if task_class is not None else []
    filtered = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    sub = f" WHERE session_id IN (SELECT session_id FROM sessions{filtered})" if filtered else ""
    try:
        sessions = conn.execute(
            f"SELECT {', '.join(SESSION_COLUMNS)} FROM sessions{filtered} ORDER BY session_id",
            params,
        )
        steps = conn.execute(
            f"SELECT session_id, {', '.join(STEP_COLUMNS)} FROM steps{sub} "
            "ORDER BY session_id, idx",
            params,
        )
    except sqlite3.OperationalError as exc:
        raise StoredError(f"not an agent-ledger database ({exc})") from None
    pending = sessions.fetchone()
    for session_id, rows in groupby(steps, key=itemgetter(0)):
        while pending is not None and pending[0] < session_id:
            pending = sessions.fetchone()
        if pending is None:
            return
        if pending[0] == session_id:
            yield _session(pending), (
                Event(act, calls, tokens, None, None if err is None else err != 0, vendor,
                      outcome, None, None, elapsed, None, None, digest, NOT_UNMETERED,
                      bool(same), cost=cost)
                for _, act, calls, tokens, err, digest, vendor, outcome, elapsed, same, cost
                in rows
            )


def _session(row: tuple[Any, ...]) -> StoredSession:
    session_id, task_class, dialect, stop_reason, stop_at, detail, recorded, budget, cost = row
    try:
        stored_budget = _budget(budget)
    except (TypeError, ValueError) as exc:
        raise StoredError(f"session {session_id!r}: unreadable stored budget ({exc})") from None
    return StoredSession(
        session_id, task_class, dialect, stop_reason, stop_at, detail, recorded, stored_budget,
        cost,
    )


@lru_cache(maxsize=64)
def _budget(text: str) -> Budget:
    """Parsed once per distinct budget (a database holds few; Budget is immutable)."""
    return Budget.from_mapping(json.loads(text))


def open_readonly(path: str) -> sqlite3.Connection:
    """Open a ledger database for reading only (a replay never writes)."""
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise StoredError(f"{path}: cannot be read as a database ({exc})") from None
    return conn


def budgets(conn: sqlite3.Connection) -> list[tuple[str | None, int]]:
    """Each budget stored sessions were folded under (``sessions.budget``), with its count."""
    return conn.execute("SELECT budget, count(*) FROM sessions GROUP BY budget").fetchall()


def task_classes(conn: sqlite3.Connection, where: str | None = None) -> list[str]:
    """The task classes of the stored sessions (those matching the fixed condition ``where``)."""
    sql = "SELECT DISTINCT task_class FROM sessions"
    try:
        rows = conn.execute(sql + (f" WHERE {where}" if where else "") + " ORDER BY task_class")
        return [name for (name,) in rows]
    except sqlite3.OperationalError as exc:
        raise StoredError(f"not an agent-ledger database ({exc})") from None


@dataclass(frozen=True, slots=True)
class Spend:
    """What a task class's sessions spent (US dollars), and how many of them had a cost."""

    cost_usd: float
    priced: int
    sessions: int


def spend_by_class(conn: sqlite3.Connection) -> dict[str, Spend]:
    """Each task class's spend (its name as the verdicts give it: '' for none); empty for a
    database without money (made before migration 012)."""
    try:
        rows = conn.execute(
            "SELECT coalesce(task_class, ''), coalesce(sum(cost_usd), 0), count(cost_usd), "
            "count(*) FROM sessions GROUP BY 1"
        )
        return {name: Spend(usd, priced, n) for name, usd, priced, n in rows}
    except sqlite3.OperationalError:
        return {}
