"""The dashboard's SQL: fixed statements with named parameters, each bounded by an index.

The overview reads the rollup (``session_rollup``, see ``ledger/rollup.py``) instead of
aggregating ``sessions``; incident pages read the ``incidents`` rows the fold wrote,
a page at a time along an index (keyset pagination, never OFFSET over a big table); a session's
timeline reads its own steps by primary key. A database written by an agent-ledger older than
the rollup still works: it is then computed from ``sessions`` on the fly (slower).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from datasette.utils import tilde_decode, tilde_encode

from ledger.db import rollup

from .filters import MAX_INTEGER, FilterError, Filters

if TYPE_CHECKING:
    from datasette.database import Database

LEDGER_TABLES = frozenset({"sessions", "steps", "incidents", "stop_reasons", "sources"})
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
VENDOR_PAGE_SIZE = 100

Row = dict[str, Any]


async def rows(db: Database, sql: str, params: dict[str, Any] | None = None) -> list[Row]:
    results = await db.execute(sql, params or {})
    return [dict(r) for r in results.rows]


async def is_ledger(db: Database) -> bool:
    return LEDGER_TABLES <= set(await db.table_names())


@dataclass(frozen=True)
class Sources:
    """Where the overview reads its counts: the rollup table, or the same rows computed; and
    whether the database keeps money (migration 012: costs of sessions, steps, incidents)."""

    table: str
    stored: bool
    money: bool = True

    @classmethod
    async def of(cls, db: Database) -> Sources:
        money = "cost_usd" in await db.table_columns("incidents")
        if await db.table_exists(rollup.TABLE):
            return cls(rollup.TABLE, True, money)
        measures = rollup.MEASURES if money else rollup.BASE_MEASURES
        return cls(f"({rollup.contributions(rollup.ALL, measures)})", False, money)


# --- the overview --------------------------------------------------------------------------


async def from_rollup(
    db: Database, src: Sources, filters: Filters, select: str, rest: str = ""
) -> list[Row]:
    """``select`` over the rollup rows the filters pick, then ``rest`` (group, order)."""
    return await rows(
        db,
        f"select {select} from {src.table} where 1{filters.rollup_where()} {rest}",
        filters.params(),
    )


async def by_class_and_reason(db: Database, src: Sources, filters: Filters) -> list[Row]:
    return await from_rollup(
        db, src, filters,
        "task_class, stop_reason, sum(sessions) as sessions, sum(steps) as steps, "
        "sum(events) as events, sum(tool_calls) as tool_calls, "
        "sum(output_tokens) as output_tokens, sum(events_after_stop) as events_after_stop",
        "group by task_class, stop_reason order by task_class, stop_reason",
    )


async def by_day_and_reason(db: Database, src: Sources, filters: Filters) -> list[Row]:
    return await from_rollup(
        db, src, filters, "day, stop_reason, sum(sessions) as sessions",
        "group by day, stop_reason order by day, stop_reason",
    )


async def budget_at_stop(db: Database, src: Sources, filters: Filters) -> list[Row]:
    """Stopped sessions per (counter, bucket), for the buckets that hold any."""
    columns = [c.bucket_column(b) for c in rollup.COUNTERS for b in range(len(rollup.BUCKETS))]
    sums = ", ".join(f"coalesce(sum({col}), 0) as {col}" for col in columns)
    (found,) = await from_rollup(db, src, filters, sums)
    return [
        {"counter": c.name, "bucket": b, "sessions": found[c.bucket_column(b)]}
        for c in rollup.COUNTERS
        for b in range(len(rollup.BUCKETS))
        if found[c.bucket_column(b)]
    ]


#: What spend can be summed by (a rollup key each), and the spend of a rollup row's sessions.
SPEND_KEYS = frozenset({"task_class", "stop_reason", "day"})
SPEND = (
    "sum(sessions) as sessions, sum(priced) as priced, sum(cost_nusd) as cost_nusd, "
    "sum(cost_after_stop_nusd) as after_stop_nusd"
)


async def spend_by(db: Database, src: Sources, filters: Filters, key: str) -> list[Row]:
    """Sessions, priced sessions, their spend and their spend after the budget's stop (in
    nanodollars: exact), per value of one rollup key; nothing for a database without money."""
    if key not in SPEND_KEYS:
        raise ValueError(key)
    if not src.money:
        return []
    return await from_rollup(db, src, filters, f"{key}, {SPEND}", f"group by {key} order by {key}")


async def paid_path_computed(db: Database, src: Sources, filters: Filters) -> list[Row]:
    """Seed 000's fail-closed rule: unknown vendor stops, or completes with no terminal signal."""
    return await from_rollup(
        db, src, filters,
        "task_class, sum(sessions) as sessions, "
        "sum(sessions * unknown_vendor) as unknown_vendor_sessions, "
        "sum(sessions * no_terminal) as completes_without_terminal_signal",
        "group by task_class "
        "having sum(sessions * unknown_vendor) > 0 or sum(sessions * no_terminal) > 0 "
        "order by unknown_vendor_sessions desc, completes_without_terminal_signal desc, "
        "task_class",
    )


async def paid_path_verdicts(db: Database, filters: Filters) -> list[Row] | None:
    """The ``task_classes`` verdict table's stay-on-paid-path rows, if the database has one."""
    if not await db.table_exists("task_classes"):
        return None
    columns = set(await db.table_columns("task_classes"))
    if "verdict" not in columns:
        return None
    where = ""
    params: dict[str, Any] = {}
    if "task_class" in columns and filters.task_class is not None:
        where = " and task_class = :task_class"
        params["task_class"] = filters.task_class
    return await rows(
        db,
        f"select * from task_classes where verdict = 'stay_on_paid_path'{where} "
        "order by task_class limit 500",
        params,
    )


async def task_classes(db: Database, src: Sources) -> list[str]:
    found = await rows(db, f"select distinct task_class from {src.table} order by task_class")
    return [r["task_class"] for r in found]


async def sources(db: Database) -> list[Row]:
    return await rows(db, "select source_id, path from sources order by path limit 1000")


async def hosts(db: Database) -> list[str]:
    """The hosts the database's sources were ingested on (``sources.host``; none in a
    database made before hosts were recorded), for the host filter's choices."""
    if "host" not in await db.table_columns("sources"):
        return []
    found = await rows(
        db, "select distinct host from sources where host is not null order by host limit 1000"
    )
    return [r["host"] for r in found]


# --- incidents -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """One incident kind's listing: its sort order (an index's, scanned backwards) and types."""

    kind: str
    order: tuple[tuple[str, type], ...]

    def keyset(self) -> str:
        columns = ", ".join(f"i.{c}" for c, _ in self.order)
        marks = ", ".join(f":k{n}" for n in range(len(self.order)))
        return f" and ({columns}) < ({marks})"

    def order_by(self) -> str:
        return ", ".join(f"i.{c} desc" for c, _ in self.order)

    def token(self, row: Row) -> str:
        return ",".join(tilde_encode(str(row[c])) for c, _ in self.order)

    def parse(self, token: str) -> dict[str, Any]:
        parts = token.split(",")
        try:
            if len(parts) != len(self.order):
                raise ValueError
            return {
                f"k{n}": _token_value(kind, tilde_decode(part))
                for n, (part, (_, kind)) in enumerate(zip(parts, self.order, strict=True))
            }
        except ValueError:
            raise FilterError(f"_next: {token!r} is not a page token from this page") from None


def _token_value(kind: type, text: str) -> Any:
    value = kind(text)
    if kind is int and not -MAX_INTEGER - 1 <= value <= MAX_INTEGER:
        raise ValueError(text)
    return value


RETRY_STORMS = Kind(
    "retry_storm", (("length", int), ("session_id", str), ("start_idx", int))
)
NO_PROGRESS = Kind(
    "no_progress",
    (("length", int), ("output_tokens", int), ("session_id", str), ("start_idx", int)),
)

INCIDENT_COLUMNS = (
    "i.session_id, i.kind, i.start_idx, i.end_idx, i.length, i.key, i.detail, i.output_tokens, "
    "i.tool_calls, i.blocked, i.task_class, i.started_at, i.ended_at, s.stop_reason"
)


def incident_columns(money: bool) -> str:
    """The listed columns, with what each run cost where the database keeps money."""
    return INCIDENT_COLUMNS + (", i.cost_usd" if money else ", null as cost_usd")


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    next: str | None


async def incidents(
    db: Database,
    kind: Kind,
    filters: Filters,
    min_length: int,
    after: str | None = None,
    size: int = PAGE_SIZE,
    money: bool = True,
) -> Page:
    """A page of one kind's incidents of at least ``min_length`` steps, longest first."""
    params: dict[str, Any] = {
        **filters.params(), "kind": kind.kind, "min_length": min_length, "limit": size + 1,
    }
    keyset = ""
    if after:
        params.update(kind.parse(after))
        keyset = kind.keyset()
    found = await rows(
        db,
        f"select {incident_columns(money)} from incidents i "
        "join sessions s on s.session_id = i.session_id "
        f"where i.kind = :kind and i.length >= :min_length{keyset}{filters.incident_where()} "
        f"order by {kind.order_by()} limit :limit",
        params,
    )
    more = len(found) > size
    found = found[:size]
    return Page(found, kind.token(found[-1]) if more and found else None)


async def budgets(db: Database, filters: Filters) -> list[tuple[str | None, int]]:
    """The budgets the sessions the filters pick were folded under, with their counts."""
    found = await rows(
        db,
        "select s.budget, count(*) as n from sessions s "
        f"where 1{filters.session_where()} group by s.budget",
        filters.params(),
    )
    return [(r["budget"], r["n"]) for r in found]


async def count_incidents(db: Database, kind: str, filters: Filters, min_length: int) -> int:
    found = await rows(
        db,
        "select count(*) as n from incidents i "
        f"where i.kind = :kind and i.length >= :min_length{filters.incident_where()}",
        {**filters.params(), "kind": kind, "min_length": min_length},
    )
    return int(found[0]["n"])


async def incident_spend(
    db: Database, kind: str, filters: Filters, min_length: int, money: bool
) -> float | None:
    """What one kind's incidents of at least ``min_length`` steps cost together (USD; None
    where none had a cost, or the database keeps no money)."""
    if not money:
        return None
    found = await rows(
        db,
        "select sum(i.cost_usd) as usd from incidents i "
        f"where i.kind = :kind and i.length >= :min_length{filters.incident_where()}",
        {**filters.params(), "kind": kind, "min_length": min_length},
    )
    return found[0]["usd"]


async def storms_by_day(db: Database, filters: Filters, min_length: int) -> list[Row]:
    return await rows(
        db,
        "select coalesce(substr(i.started_at, 1, 10), '') as day, count(*) as storms, "
        "sum(i.length) as retries, sum(i.blocked) as blocked from incidents i "
        f"where i.kind = 'retry_storm' and i.length >= :min_length{filters.incident_where()} "
        "group by day order by day",
        {**filters.params(), "min_length": min_length},
    )


#: Incident kinds whose key is something no map names, with the name of the key in the rows.
UNKNOWN_VENDOR = ("unknown_vendor", "vendor_stop")
UNCLASSIFIED_TOOL = ("unclassified_tool", "tool")


async def unknown_keys(
    db: Database, unknown: tuple[str, str], filters: Filters, offset: int = 0,
    size: int = VENDOR_PAGE_SIZE,
) -> Page:
    """Raw vendor strings nobody mapped (``UNKNOWN_VENDOR``) or tools nobody classed
    (``UNCLASSIFIED_TOOL``), most frequent first (a few hundred at most)."""
    kind, name = unknown
    found = await rows(
        db,
        f"select i.key as {name}, count(*) as occurrences, "
        "count(distinct i.session_id) as sessions, "
        "json_group_array(distinct i.task_class) as task_classes, "
        "min(i.started_at) as first_seen, max(i.started_at) as last_seen "
        "from incidents i "
        f"where i.kind = :kind{filters.incident_where()} "
        f"group by i.key order by occurrences desc, {name} limit :limit offset :offset",
        {**filters.params(), "kind": kind, "limit": size + 1, "offset": offset},
    )
    for row in found:
        row["task_classes"] = sorted(c for c in json.loads(row["task_classes"]) if c is not None)
    more = len(found) > size
    return Page(found[:size], str(offset + size) if more else None)


async def count_unknown_keys(db: Database, unknown: tuple[str, str], filters: Filters) -> int:
    found = await rows(
        db,
        "select count(distinct i.key) as n from incidents i "
        f"where i.kind = :kind{filters.incident_where()}",
        {**filters.params(), "kind": unknown[0]},
    )
    return int(found[0]["n"])



# --- one session ---------------------------------------------------------------------------


async def session(db: Database, session_id: str) -> Row | None:
    found = await rows(db, "select * from sessions where session_id = :id", {"id": session_id})
    return found[0] if found else None


async def steps(db: Database, session_id: str, first: int, size: int) -> list[Row]:
    return await rows(
        db,
        "select * from steps where session_id = :id and idx >= :first and idx < :end "
        "order by idx",
        {"id": session_id, "first": first, "end": first + size},
    )


async def observations_before(
    db: Database, session_id: str, first: int, limit: int
) -> list[str]:
    """The last ``limit`` observation hashes before step ``first``, latest first."""
    found = await rows(
        db,
        "select observation_hash from steps where session_id = :id and idx < :first "
        "and observation_hash is not null order by idx desc limit :limit",
        {"id": session_id, "first": first, "limit": limit},
    )
    return [r["observation_hash"] for r in found]


async def denied_calls(db: Database, session_id: str, first: int, size: int) -> list[Row]:
    """The live brake's denials of the session's calls in steps ``first`` to
    ``first + size - 1`` (a database made before migration 013 has none)."""
    if "hook_decisions" not in await db.table_names():
        return []
    return await rows(
        db,
        "select event_idx, stop_reason, reason, at from hook_decisions where session_id = :id "
        "and decision = 'deny' and event_idx >= :first and event_idx < :end order by id",
        {"id": session_id, "first": first, "end": first + size},
    )


#: The live sessions of the overview: those the hook decided on in the last ``LIVE_MINUTES``,
#: read from its last ``LIVE_DECISIONS`` decisions (a bounded read of the newest rows, by id).
LIVE_MINUTES = 30
LIVE_DECISIONS = 5_000
LIVE_SHOWN = 20


async def live_sessions(db: Database, since: str) -> list[Row]:
    """The sessions the live brake decided on at or after ``since`` (an ISO time, as the
    hook writes ``at``), latest first: how many calls it was asked about, how many it
    denied, its last decision with the counters as they stood, and whether ``ingest`` has
    read the session yet (its timeline exists). Empty before migration 013."""
    if "hook_decisions" not in await db.table_names():
        return []
    return await rows(
        db,
        "with recent as (select * from hook_decisions order by id desc limit :decisions), "
        "live as (select session_id, count(*) as decisions, sum(decision = 'deny') as denied, "
        "max(id) as last_id from recent where at >= :since group by session_id) "
        "select live.session_id, live.decisions, live.denied, h.at, h.decision, h.tool_name, "
        "h.action, h.stop_reason, h.stop_detail, h.event_idx, h.counters, "
        "exists(select 1 from sessions s where s.session_id = live.session_id) as ingested "
        "from live join hook_decisions h on h.id = live.last_id order by h.id desc "
        "limit :shown",
        {"since": since, "decisions": LIVE_DECISIONS, "shown": LIVE_SHOWN},
    )


async def session_incidents(db: Database, session_id: str) -> list[Row]:
    return await rows(
        db,
        "select * from incidents where session_id = :id order by start_idx, kind",
        {"id": session_id},
    )


#: The counts a session's sub-agents are totalled by (``sessions`` columns).
SUB_AGENT_SUMS = (
    "rounds", "steps", "tool_calls", "tool_errors", "writes", "output_tokens", "input_tokens",
    "cache_creation_tokens", "cache_read_tokens", "reasoning_tokens", "cost_usd",
)
SUB_AGENTS_SHOWN = 100
#: A session's sub-agents at any depth (a sub-agent's own sub-agents too), along the
#: ``parent_session_id`` index; UNION, not UNION ALL, so links that loop end.
_DESCENDANTS = (
    "with recursive tree(session_id) as ("
    " select session_id from sessions where parent_session_id = :id"
    " union select s.session_id from sessions s join tree t on s.parent_session_id = t.session_id"
    ") "
)


async def sub_agents(db: Database, session_id: str) -> list[Row]:
    """The session's own sub-agents (the first ``SUB_AGENTS_SHOWN``, in start order)."""
    return await rows(
        db,
        "select session_id, started_at, stop_reason, recorded_stop, "
        + ", ".join(SUB_AGENT_SUMS)
        + " from sessions where parent_session_id = :id "
        "order by started_at is null, started_at, session_id limit :limit",
        {"id": session_id, "limit": SUB_AGENTS_SHOWN},
    )


async def sub_agent_totals(db: Database, session_id: str) -> Row:
    """The sums of the session's sub-agents at any depth, with how many there are and how
    many have no cost (a sum of costs that leaves some out is not the whole cost)."""
    sums = ", ".join(f"sum({c}) as {c}" for c in SUB_AGENT_SUMS)
    found = await rows(
        db,
        _DESCENDANTS + f"select count(*) as sessions, {sums}, "
        "sum(cost_usd is null) as unpriced from sessions "
        "where session_id in (select session_id from tree)",
        {"id": session_id},
    )
    return found[0]
