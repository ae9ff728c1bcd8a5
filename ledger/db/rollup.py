"""The session rollup: per-bucket session counts, kept up to date by every batch, for the dashboard.

The dashboard's overview counts sessions by task class, stop reason, day and source file, and
shows how much of each cap the stopped sessions had used. Aggregating 100,000 sessions (and
joining each to its stopping step among a million steps) on every page view would be a full
scan per request. So the writer keeps ``session_rollup`` in step with ``sessions``: one row per
(source, task class, stop reason, day, no-terminal flag, unknown-vendor flag) holding

* the number of sessions and the sums of their counters, and
* for each budget counter and bucket (``rounds_0`` ... ``seconds_3``), how many of those
  sessions had used under 50%, 50-80%, 80-100% or all of that cap at the step where the budget
  stopped them (only sessions that stopped, held to that cap by their dialect, with the cap on
  and the meter in their log).

A session's contribution is a function of its ``sessions`` row, its stopping ``steps`` row and
whether it has an ``unknown_vendor`` incident. :func:`apply` adds (``sign=1``) or takes away
(``sign=-1``) the contributions of some sessions, so the writer takes them away before it
changes those sessions and adds them back before it commits (see :class:`Pending`). Key columns hold
``''`` for a missing value, so that the unique index can merge them (SQLite's NULLs never match).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Container, Iterable, Sequence

from msgspec import Struct

from ledger.core.budget import GATE, LOOP
from ledger.core.fold import families_for

TABLE = "session_rollup"

#: Bucket edges as fractions of the cap, and the label of each bucket.
BUCKET_EDGES = (0.5, 0.8, 1.0)
BUCKETS = ("under 50%", "50-80%", "80-100%", "at or over the cap")


class Counter(Struct, frozen=True):
    """A budget counter the steps table records after each step, and the cap it runs against
    (a msgspec struct: an ingest imports this, and a frozen dataclass costs fifty times as
    much to make)."""

    name: str
    label: str
    column: str  # in ``steps``
    cap: str  # a Budget field
    meter: str | None  # the meter the log must carry for it to mean anything (None: always)
    family: str  # the cap family (seed) that holds a dialect to this cap

    @property
    def dialects(self) -> tuple[str, ...]:
        """The dialects held to this counter's cap."""
        return tuple(d for d in ("native", "trace", "gate") if self.family in families_for(d))

    def bucket_column(self, bucket: int) -> str:
        return f"{self.name}_{bucket}"


COUNTERS: tuple[Counter, ...] = (
    Counter("rounds", "rounds", "total_rounds", "max_rounds", "round_counter", LOOP),
    Counter("tool_calls", "tool calls", "total_tool_calls", "max_tool_calls", "tool_calls", LOOP),
    Counter(
        "output_tokens", "output tokens", "total_output_tokens", "max_output_tokens",
        "output_tokens", LOOP,
    ),
    Counter(
        "tool_errors", "tool errors in a row", "consecutive_errors",
        "max_consecutive_tool_errors", "tool_errors", LOOP,
    ),
    Counter("steps", "steps", "total_steps", "max_steps", None, GATE),
    Counter("writes", "writes", "total_writes", "max_writes", "write_classification", GATE),
    Counter("seconds", "seconds", "elapsed_s", "max_seconds", "elapsed_time", GATE),
)

KEYS: tuple[tuple[str, str], ...] = (
    ("source_id", "coalesce(s.source_id, '')"),
    ("task_class", "coalesce(s.task_class, '')"),
    ("stop_reason", "coalesce(s.stop_reason, '')"),
    ("day", "coalesce(substr(s.started_at, 1, 10), '')"),
    (
        "no_terminal",
        "(s.stop_reason = 'task_complete' and coalesce(s.recorded_stop, '') != 'task_complete')",
    ),
    (
        "unknown_vendor",
        "exists(select 1 from incidents i "
        "where i.session_id = s.session_id and i.kind = 'unknown_vendor')",
    ),
)
INT_KEYS = frozenset({"no_terminal", "unknown_vendor"})


def bucket_sql(value: str, cap: str) -> str:
    """SQL for the bucket number (0-3) of ``value`` against ``cap``."""
    low, mid, full = BUCKET_EDGES
    return (
        f"case when {value} >= {full} * {cap} then 3 when {value} >= {mid} * {cap} then 2 "
        f"when {value} >= {low} * {cap} then 1 else 0 end"
    )


def bucket_of(counter: Counter) -> str:
    """SQL for the bucket number (0-3) of the counter at the session's stopping step, -1
    where its cap does not hold the session (not its dialect's, off, or not metered)."""
    cap = f"json_extract(s.budget, '$.{counter.cap}')"
    value = f"t.{counter.column}"
    dialects = ", ".join(f"'{d}'" for d in counter.dialects)
    held = f"s.dialect in ({dialects}) and {cap} is not null and {value} is not null"
    if counter.meter:
        held += f" and instr(',' || coalesce(s.meters, '') || ',', ',{counter.meter},') > 0"
    return f"case when {held} then {bucket_sql(value, cap)} else -1 end"


def _bucket_measures(counter: Counter) -> list[tuple[str, str]]:
    """``(column, SQL)`` of the counter's four bucket flags for one session."""
    return [
        (counter.bucket_column(b), f"case when ({bucket_of(counter)}) = {b} then 1 else 0 end")
        for b in range(len(BUCKETS))
    ]


#: A bucket flag's column: its counter and bucket.
_BUCKET_COLUMNS = {
    c.bucket_column(b): (c, b) for c in COUNTERS for b in range(len(BUCKETS))
}


Measure = tuple[str, str]  # a rollup column and the SQL of one session's contribution

#: The measures of migration 005.
BASE_MEASURES: tuple[Measure, ...] = (
    ("sessions", "1"),
    ("events", "coalesce(s.events, 0)"),
    ("steps", "coalesce(s.steps, 0)"),
    ("rounds", "coalesce(s.rounds, 0)"),
    ("tool_calls", "coalesce(s.tool_calls, 0)"),
    ("output_tokens", "coalesce(s.output_tokens, 0)"),
    ("events_after_stop", "coalesce(s.events_after_stop, 0)"),
    *(m for c in COUNTERS for m in _bucket_measures(c)),
)

#: A rollup's money is kept in whole nanodollars (USD 1e-9): integer sums are exact, however
#: often contributions are taken out and added back, where float sums would drift.
NANO = 1_000_000_000


def nano(value: str) -> str:
    """SQL for a dollar amount in whole nanodollars (0 where there is none)."""
    return nano_or_null(f"coalesce({value}, 0)")


def nano_or_null(value: str) -> str:
    """SQL for a dollar amount in whole nanodollars (NULL where there is none): the
    ``cost_nusd`` columns of migration 015 hold it."""
    return f"cast(round({value} * {NANO}) as integer)"


#: Migration 012's measures: sessions with a cost, their spend, and the spend after the step
#: at which the budget stopped them (the stopping step's running total is joined as ``t``).
MONEY_MEASURES: tuple[Measure, ...] = (
    ("priced", "(s.cost_usd is not null)"),
    ("cost_nusd", nano("s.cost_usd")),
    (
        "cost_after_stop_nusd",
        nano("case when s.stop_at is not null "
             "then s.cost_usd - coalesce(t.total_cost_usd, 0) end"),
    ),
)
MEASURES: tuple[Measure, ...] = (*BASE_MEASURES, *MONEY_MEASURES)
KEY_NAMES = tuple(name for name, _ in KEYS)
MEASURE_NAMES = tuple(name for name, _ in MEASURES)

#: Which sessions a contribution query covers: the ones named in ``:ids`` (a JSON list), or all.
SOME = "s.session_id in (select value from json_each(:ids))"
ALL = "1"


def contributions(which: str, measures: Sequence[Measure] = MEASURES) -> str:
    """One row per session: its rollup key and measures (the stopping step joined)."""
    columns = ", ".join(f"{sql} as {name}" for name, sql in (*KEYS, *measures))
    return (
        f"select {columns} from sessions s "
        "left join steps t on t.session_id = s.session_id and t.idx = s.stop_at "
        f"where {which}"
    )


def ddl(measures: Sequence[Measure] = MEASURES) -> list[str]:
    columns = [f"[{k}] {'INTEGER' if k in INT_KEYS else 'TEXT'} NOT NULL" for k in KEY_NAMES]
    columns += [f"[{m}] INTEGER NOT NULL" for m, _ in measures]
    return [
        f"CREATE TABLE [{TABLE}] ({', '.join(columns)})",
        f"CREATE UNIQUE INDEX [idx_{TABLE}_key] ON [{TABLE}] ({', '.join(KEY_NAMES)})",
        f"CREATE INDEX [idx_{TABLE}_empty] ON [{TABLE}] (sessions) WHERE sessions = 0",
    ]


def upsert(which: str, measured: Sequence[Measure] = MEASURES) -> str:
    """The statement that adds ``:sign`` times the contributions of the sessions ``which``
    selects. Each counter's bucket is worked out once a session (``bucket_<counter>``), in a
    subquery whose ``LIMIT`` keeps SQLite from flattening it into the sum, which would write
    the bucket's SQL out again for each of its four flags: half the SQL, and half the time a
    connection takes to prepare it the first time it runs (1.3 -> 0.8 ms; every ingest runs
    it on a connection of its own)."""
    names = [m for m, _ in measured]
    per_session: dict[str, str] = {}  # a column of the subquery: its SQL
    sums = []
    for name, sql in measured:
        counter, bucket = _BUCKET_COLUMNS.get(name, (None, 0))
        if counter is None:
            per_session[name] = sql
            sums.append(f":sign * sum({name})")
        else:
            column = f"bucket_{counter.name}"
            per_session.setdefault(column, bucket_of(counter))
            sums.append(f":sign * sum({column} = {bucket})")
    keys = ", ".join(KEY_NAMES)
    updates = ", ".join(f"{m} = {m} + excluded.{m}" for m in names)
    return (
        f"INSERT INTO [{TABLE}] ({keys}, {', '.join(names)}) "
        f"SELECT {keys}, {', '.join(sums)} "
        f"FROM ({contributions(which, list(per_session.items()))} LIMIT -1) WHERE 1 "
        f"GROUP BY {keys} ON CONFLICT ({keys}) DO UPDATE SET {updates}"
    )


def create(conn: sqlite3.Connection, measures: Sequence[Measure] = MEASURES) -> None:
    """Create the rollup table with ``measures`` (a migration names the ones of its time) and
    fill it from the sessions already stored."""
    for statement in ddl(measures):
        conn.execute(statement)
    conn.execute(upsert(ALL, measures), {"sign": 1})


def add_money(conn: sqlite3.Connection) -> None:
    """Migration 012: the money columns, and the rollup refilled with every measure."""
    for name, _ in MONEY_MEASURES:
        conn.execute(f"ALTER TABLE [{TABLE}] ADD COLUMN [{name}] INTEGER NOT NULL DEFAULT 0")
    conn.execute(f"DELETE FROM [{TABLE}]")
    conn.execute(upsert(ALL), {"sign": 1})


def apply(conn: sqlite3.Connection, session_ids: Sequence[str], sign: int) -> None:
    """Add (``sign=1``) or take away (``sign=-1``) these sessions' contributions; the rows
    left with no session are deleted once they are added back (a row a take-out empties is
    added to again, or deleted then, before the commit: :class:`Pending`)."""
    if not session_ids:
        return
    conn.execute(_UPSERT_SOME, {"sign": sign, "ids": json.dumps(list(session_ids))})
    if sign > 0:
        conn.execute(f"DELETE FROM [{TABLE}] WHERE sessions = 0")


#: The statement of :func:`apply` (18 KB of SQL: written once, not once a file).
_UPSERT_SOME = upsert(SOME)


class Pending:
    """The sessions whose contributions a write transaction has taken out of the rollup.

    A session's contribution is taken out before the transaction first changes it and added
    back once, just before the commit, from what the session has become: an ingest that goes
    on with a few sessions in each of many files applied the rollup twice per file before.
    Inside the transaction the rollup lacks those sessions; no one else sees it before the
    commit. ``mark``/``reset`` follow the transaction's savepoints.
    """

    def __init__(self) -> None:
        self.out: set[str] = set()
        self._order: list[str] = []  # self.out in the order taken out, for reset()

    def take_out(
        self, conn: sqlite3.Connection, session_ids: Iterable[str], absent: Container[str] = ()
    ) -> None:
        """Take these sessions out (those not out yet). ``absent``: sessions this transaction
        has found no ``sessions`` row of, and has not written since, whose contribution is
        nothing: they are only marked out (to be added back), with no statement (a statement
        a file, for the new sessions of a first ingest)."""
        new = sorted(set(session_ids) - self.out)
        apply(conn, [sid for sid in new if sid not in absent], -1)
        self.out.update(new)
        self._order += new

    def add_back(self, conn: sqlite3.Connection) -> None:
        apply(conn, sorted(self.out), 1)
        self.out.clear()
        self._order.clear()

    def mark(self) -> int:
        """A point to reset to: how many sessions are out now (no copy, since a transaction
        of many small files takes a mark per file)."""
        return len(self._order)

    def reset(self, mark: int) -> None:
        """Back to ``mark``: the savepoint it was taken at has been rolled back."""
        self.out.difference_update(self._order[mark:])
        del self._order[mark:]


def rebuilt(conn: sqlite3.Connection) -> list[tuple]:
    """What the rollup would hold if built from scratch now (for checks and tests)."""
    keys = ", ".join(KEY_NAMES)
    sums = ", ".join(f"sum({m})" for m in MEASURE_NAMES)
    return conn.execute(
        f"SELECT {keys}, {sums} FROM ({contributions(ALL)}) GROUP BY {keys} ORDER BY {keys}"
    ).fetchall()
