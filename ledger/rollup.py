"""Rollups: per-bucket session counts, kept up to date by every batch, for the dashboard.

The dashboard's overview counts sessions by task class, stop reason, day and source file, and
shows how much of each cap the stopped sessions had used. Aggregating 100,000 sessions (and
joining each to its stopping step among a million steps) on every page view would be a full
scan per request. So the writer keeps two small tables in step with ``sessions``:

* ``session_rollup``: one row per (source, task class, stop reason, day, no-terminal flag,
  unknown-vendor flag) with the number of sessions and the sums of their counters;
* ``budget_rollup``: one row per (the same key, counter, bucket): how many stopped sessions had
  used under 50%, 50-80%, 80-100% or all of that counter's cap at the step where they stopped.

A session's contribution is a function of its ``sessions`` row, its stopping ``steps`` row and
whether it has an ``unknown_vendor`` incident. :func:`apply` adds (``sign=1``) or takes away
(``sign=-1``) the contributions of some sessions, so the writer takes them away before a batch
changes those sessions and adds them back after (see ``store.write_batch``). Key columns hold
``''`` for a missing value, so that a unique index can merge them (SQLite's NULLs never match).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .budget import GATE, LOOP
from .fold import families_for

#: Bucket edges as fractions of the cap, and the label of each bucket.
BUCKET_EDGES = (0.5, 0.8, 1.0)
BUCKETS = ("under 50%", "50-80%", "80-100%", "at or over the cap")


@dataclass(frozen=True)
class Counter:
    """A budget counter the steps table records after each step, and the cap it runs against."""

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

SESSION_MEASURES: tuple[tuple[str, str], ...] = (
    ("sessions", "1"),
    ("events", "coalesce(s.events, 0)"),
    ("steps", "coalesce(s.steps, 0)"),
    ("rounds", "coalesce(s.rounds, 0)"),
    ("tool_calls", "coalesce(s.tool_calls, 0)"),
    ("output_tokens", "coalesce(s.output_tokens, 0)"),
    ("events_after_stop", "coalesce(s.events_after_stop, 0)"),
)

#: Which sessions a contribution query covers: the ones named in ``:ids`` (a JSON list), or all.
SOME = "s.session_id in (select value from json_each(:ids))"
ALL = "1"


def bucket_sql(value: str, cap: str) -> str:
    """SQL for the bucket number (0-3) of ``value`` against ``cap``."""
    low, mid, full = BUCKET_EDGES
    return (
        f"case when {value} >= {full} * {cap} then 3 when {value} >= {mid} * {cap} then 2 "
        f"when {value} >= {low} * {cap} then 1 else 0 end"
    )


def _key_select() -> str:
    return ", ".join(f"{sql} as {name}" for name, sql in KEYS)


def session_contributions(which: str) -> str:
    """One row per session: its rollup key and measures."""
    measures = ", ".join(f"{sql} as {name}" for name, sql in SESSION_MEASURES)
    return f"select {_key_select()}, {measures} from sessions s where {which}"


def budget_contributions(which: str) -> str:
    """One row per (stopped session, counter): its rollup key, the counter and its bucket."""
    parts = []
    for c in COUNTERS:
        dialects = ", ".join(f"'{d}'" for d in c.dialects)
        meter = (
            f" and instr(',' || coalesce(s.meters, '') || ',', ',{c.meter},') > 0"
            if c.meter
            else ""
        )
        cap = f"json_extract(s.budget, '$.{c.cap}')"
        parts.append(
            f"select {_key_select()}, '{c.name}' as counter, "
            f"{bucket_sql(f't.{c.column}', cap)} as bucket, 1 as sessions "
            "from sessions s join steps t on t.session_id = s.session_id and t.idx = s.stop_at "
            f"where {which} and s.dialect in ({dialects}){meter} "
            f"and {cap} is not null and t.{c.column} is not null"
        )
    return " union all ".join(parts)


@dataclass(frozen=True)
class Rollup:
    table: str
    keys: tuple[str, ...]
    measures: tuple[str, ...]
    contributions: Callable[[str], str]  # SQL of the contributions of the sessions ``which``

    def ddl(self) -> list[str]:
        columns = [f"[{k}] {'INTEGER' if k in _INT_KEYS else 'TEXT'} NOT NULL" for k in self.keys]
        columns += [f"[{m}] INTEGER NOT NULL" for m in self.measures]
        key_list = ", ".join(self.keys)
        return [
            f"CREATE TABLE [{self.table}] ({', '.join(columns)})",
            f"CREATE UNIQUE INDEX [idx_{self.table}_key] ON [{self.table}] ({key_list})",
            f"CREATE INDEX [idx_{self.table}_empty] ON [{self.table}] (sessions) "
            "WHERE sessions = 0",
        ]

    def upsert(self, which: str) -> str:
        keys = ", ".join(self.keys)
        measures = ", ".join(self.measures)
        sums = ", ".join(f":sign * sum({m})" for m in self.measures)
        updates = ", ".join(f"{m} = {m} + excluded.{m}" for m in self.measures)
        source = self.contributions(which)
        return (
            f"INSERT INTO [{self.table}] ({keys}, {measures}) "
            f"SELECT {keys}, {sums} FROM ({source}) WHERE 1 GROUP BY {keys} "
            f"ON CONFLICT ({keys}) DO UPDATE SET {updates}"
        )


_INT_KEYS = frozenset({"no_terminal", "unknown_vendor", "bucket"})
_KEY_NAMES = tuple(name for name, _ in KEYS)

ROLLUPS: tuple[Rollup, ...] = (
    Rollup(
        "session_rollup",
        _KEY_NAMES,
        tuple(name for name, _ in SESSION_MEASURES),
        session_contributions,
    ),
    Rollup(
        "budget_rollup",
        (*_KEY_NAMES, "counter", "bucket"),
        ("sessions",),
        budget_contributions,
    ),
)


def create(conn: sqlite3.Connection) -> None:
    """Create the rollup tables and fill them from the sessions already stored."""
    for rollup in ROLLUPS:
        for statement in rollup.ddl():
            conn.execute(statement)
        conn.execute(rollup.upsert(ALL), {"sign": 1})


def apply(conn: sqlite3.Connection, session_ids: Sequence[str], sign: int) -> None:
    """Add (``sign=1``) or take away (``sign=-1``) these sessions' contributions."""
    if not session_ids:
        return
    params = {"sign": sign, "ids": json.dumps(list(session_ids))}
    for rollup in ROLLUPS:
        conn.execute(rollup.upsert(SOME), params)
        conn.execute(f"DELETE FROM [{rollup.table}] WHERE sessions = 0")


def rebuilt(conn: sqlite3.Connection, table: str) -> list[tuple]:
    """What ``table`` would hold if built from scratch now (for checks and tests)."""
    rollup = next(r for r in ROLLUPS if r.table == table)
    keys = ", ".join(rollup.keys)
    sums = ", ".join(f"sum({m})" for m in rollup.measures)
    source = rollup.contributions(ALL)
    return conn.execute(
        f"SELECT {keys}, {sums} FROM ({source}) GROUP BY {keys} ORDER BY {keys}"
    ).fetchall()
