"""The dashboard's pages: each builds one plain dict, served as HTML or as its ``.json`` twin.

Routes live under the database, as Datasette's own pages do (``/ledger/-/overview``), so a
Datasette serving several ledger databases has one dashboard per database. Every page checks
Datasette's permissions first (``view-database``, ``view-instance``), reads its filters from
the query string and runs only the fixed statements in ``queries``.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from datasette.utils import tilde_decode, tilde_encode
from datasette.utils.asgi import BadRequest, NotFound, Request, Response

from ledger.analysis.budget_in_force import NEXT_STEP, in_force
from ledger.core.actions import TOOL_VALUES, action_map_entry
from ledger.core.money import CURRENCY
from ledger.core.reasons import DECISIONS, StopReason
from ledger.core.vendors import VendorMapError, vendor_map_entry
from ledger.db.rollup import BUCKETS, COUNTERS, NANO

from . import cells, charts, queries
from .filters import REASONS, FilterError, Filters, whole_number
from .timeline import gauges, repeats, run_length, step_meters

if TYPE_CHECKING:
    from datasette.app import Datasette
    from datasette.database import Database

PLUGIN = "ledger_dashboard"
DEFAULT_THRESHOLD = 3
TIMELINE_PAGE = 500
#: How far back a timeline page looks to count repeated observations before its first step.
REPEATS_SEEN = 100
TOP = 5


@dataclass(frozen=True)
class PageInfo:
    slug: str
    title: str
    template: str


PAGES: tuple[PageInfo, ...] = (
    PageInfo("overview", "Overview", "ledger_overview.html"),
    PageInfo("retry-storms", "Retry storms", "ledger_retry_storms.html"),
    PageInfo("no-progress", "No-progress runs", "ledger_no_progress.html"),
    PageInfo(
        "unknown-vendors", "Unknown vendor stops and tools", "ledger_unknown_vendors.html"
    ),
)
PAGE_BY_SLUG = {p.slug: p for p in PAGES}
SLUGS = "|".join(p.slug for p in PAGES)


@dataclass(frozen=True)
class Urls:
    """Paths of the dashboard's pages for one database (with Datasette's base_url)."""

    datasette: Datasette
    database: str

    @property
    def base(self) -> str:
        return self.datasette.urls.database(self.database)

    def page(self, slug: str, query: str = "", json_twin: bool = False) -> str:
        return f"{self.base}/-/{slug}{'.json' if json_twin else ''}{query}"

    def session(self, session_id: str, at: int | None = None, json_twin: bool = False) -> str:
        path = f"{self.base}/-/sessions/{tilde_encode(session_id)}{'.json' if json_twin else ''}"
        return path if at is None else f"{path}?at={at}#step-{at}"

    def row(self, table: str, pk: str) -> str:
        return self.datasette.urls.row(self.database, table, tilde_encode(pk))

    def table(self, table: str, **args: Any) -> str:
        query = urlencode({k: v for k, v in args.items() if v is not None})
        return f"{self.datasette.urls.table(self.database, table)}{'?' + query if query else ''}"


@dataclass(frozen=True)
class Context:
    datasette: Datasette
    request: Request
    db: Database
    urls: Urls
    filters: Filters

    @property
    def database(self) -> str:
        return self.db.name


def threshold(datasette: Datasette, database: str) -> int:
    """The retry storm threshold from ``plugins: ledger_dashboard: retry_storm_threshold``."""
    config = datasette.plugin_config(PLUGIN, database=database) or {}
    value = config.get("retry_storm_threshold", DEFAULT_THRESHOLD)
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise BadRequest(
            f"plugins: {PLUGIN}: retry_storm_threshold must be a whole number of 2 or more, "
            f"not {value!r} (the fold records retry runs from 2 in a row)"
        )
    return value


def number_arg(request: Request, name: str, default: int, minimum: int) -> int:
    """A whole-number argument of the query string (FilterError if it is not one)."""
    text = request.args.get(name) or ""
    return whole_number(name, text, minimum) if text else default


async def open_context(datasette: Datasette, request: Request) -> Context:
    route = tilde_decode(request.url_vars["database"])
    try:
        db = datasette.get_database(route=route)
    except KeyError:
        raise NotFound(f"Database not found: {route}") from None
    await datasette.ensure_permissions(
        request.actor, [("view-database", db.name), "view-instance"]
    )
    if not await queries.is_ledger(db):
        raise NotFound(f"{db.name} is not an agent-ledger database (run agent-ledger ingest)")
    filters = Filters.from_args(request.args)
    return Context(datasette, request, db, Urls(datasette, db.name), filters)


def link_rows(ctx: Context, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add the timeline link of each incident row (at its first step)."""
    return [dict(r, timeline_url=ctx.urls.session(r["session_id"], r["start_idx"])) for r in found]


# --- page builders -------------------------------------------------------------------------


def class_rows(by_class: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Rows of (task class, stop reason) sums as one row per task class, and the totals."""
    summed = ("sessions", "steps", "events_after_stop", "tool_calls", "output_tokens")
    classes: dict[str, dict[str, Any]] = {}
    totals: dict[str, int] = defaultdict(int, {"sessions": 0, "steps": 0, "stopped_by_budget": 0})
    for r in by_class:
        row = classes.setdefault(
            r["task_class"],
            {"task_class": r["task_class"], **dict.fromkeys(summed, 0), "stop_reasons": {}},
        )
        for key in summed:
            row[key] += r[key]
            totals[key] += r[key]
        row["stop_reasons"][r["stop_reason"]] = r["sessions"]
        if r["stop_reason"] != StopReason.TASK_COMPLETE.value:
            totals["stopped_by_budget"] += r["sessions"]
    return list(classes.values()), dict(totals)


def period_rows(by_day: list[dict[str, Any]]) -> dict[str, Any]:
    """Sessions per day (or month), each with its stop reasons."""
    unit, found = charts.by_period([r for r in by_day if r["day"]])
    periods: dict[str, dict[str, Any]] = {}
    for r in found:
        period = periods.setdefault(
            r["period"], {"period": r["period"], "sessions": 0, "stop_reasons": {}}
        )
        period["sessions"] += r["sessions"]
        period["stop_reasons"][r["stop_reason"]] = r["sessions"]
    return {
        "unit": unit,
        "periods": list(periods.values()),
        "without_timestamp": sum(r["sessions"] for r in by_day if not r["day"]),
    }


def verdict_row(row: dict[str, Any]) -> dict[str, Any]:
    """A ``task_classes`` verdict row, its ``reasons`` (a JSON list) read as a list."""
    reasons = row.get("reasons")
    try:
        parsed = json.loads(reasons) if isinstance(reasons, str) else reasons
    except ValueError:
        parsed = [reasons]
    return dict(row, reasons=parsed if isinstance(parsed, list) else [reasons])


def budget_rows_by_counter(found: list[dict[str, Any]]) -> dict[str, Any]:
    counts = {(r["counter"], r["bucket"]): r["sessions"] for r in found}
    return {
        "buckets": list(BUCKETS),
        "counters": [
            {
                "counter": c.name,
                "label": c.label,
                "sessions": [counts.get((c.name, b), 0) for b in range(len(BUCKETS))],
            }
            for c in COUNTERS
            if any(name == c.name for name, _ in counts)
        ],
    }


def dollars(nano: int | None) -> float:
    """A rollup's nanodollars as US dollars (exact to the nanodollar)."""
    return (nano or 0) / NANO


def spend_rows(found: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Spend per value of ``key``: sessions, how many had a cost, what they spent, and what
    they spent after the step where the budget stopped them."""
    return [
        {
            key: r[key], "sessions": r["sessions"], "priced_sessions": r["priced"],
            "cost_usd": dollars(r["cost_nusd"]), "after_stop_usd": dollars(r["after_stop_nusd"]),
        }
        for r in found
    ]


def spend_data(
    by_class: list[dict[str, Any]], by_reason: list[dict[str, Any]],
    by_day: list[dict[str, Any]], money: bool,
) -> dict[str, Any]:
    """The overview's money: the total, per task class (with its share), per stop reason and
    over time. Amounts are exact US dollars; pages round them for reading."""
    classes = spend_rows(by_class, "task_class")
    total = sum(r["cost_nusd"] or 0 for r in by_class)
    for row, r in zip(classes, by_class, strict=True):
        row["share"] = (r["cost_nusd"] or 0) / total if total else None
    unit, periods = charts.spend_by_period(
        [{"day": r["day"], "cost_usd": dollars(r["cost_nusd"])} for r in by_day if r["day"]]
    )
    return {
        "kept": money,
        "currency": CURRENCY,
        "total_usd": dollars(total),
        "after_stop_usd": dollars(sum(r["after_stop_nusd"] or 0 for r in by_class)),
        "sessions": sum(r["sessions"] for r in by_class),
        "priced_sessions": sum(r["priced"] or 0 for r in by_class),
        "by_task_class": classes,
        "by_stop_reason": spend_rows(by_reason, "stop_reason"),
        "over_time": {"unit": unit, "periods": periods},
    }


def with_spend(rows: list[dict[str, Any]], spend: dict[str, Any]) -> list[dict[str, Any]]:
    """Paid-path rows with their class's spend and its share of the spend in view."""
    by_class = {r["task_class"]: r for r in spend["by_task_class"]}
    return [
        dict(
            r,
            cost_usd=by_class.get(r.get("task_class"), {}).get("cost_usd"),
            share_of_spend=by_class.get(r.get("task_class"), {}).get("share"),
        )
        for r in rows
    ]


async def overview_data(ctx: Context) -> dict[str, Any]:
    db, filters = ctx.db, ctx.filters
    src = await queries.Sources.of(db)
    limit = threshold(ctx.datasette, ctx.database)
    # Independent reads: Datasette runs them on its pool of read connections at once.
    (
        by_class, by_day, budget, verdicts, computed, storms, stuck, vendors,
        storm_count, stuck_count, vendor_count, tool_count, stored_budgets,
        spend_class, spend_reason, spend_day,
    ) = await asyncio.gather(
        queries.by_class_and_reason(db, src, filters),
        queries.by_day_and_reason(db, src, filters),
        queries.budget_at_stop(db, src, filters),
        queries.paid_path_verdicts(db, filters),
        queries.paid_path_computed(db, src, filters),
        queries.incidents(db, queries.RETRY_STORMS, filters, limit, size=TOP, money=src.money),
        queries.incidents(db, queries.NO_PROGRESS, filters, 2, size=TOP, money=src.money),
        queries.unknown_keys(db, queries.UNKNOWN_VENDOR, filters, size=TOP),
        queries.count_incidents(db, "retry_storm", filters, limit),
        queries.count_incidents(db, "no_progress", filters, 2),
        queries.count_unknown_keys(db, queries.UNKNOWN_VENDOR, filters),
        queries.count_unknown_keys(db, queries.UNCLASSIFIED_TOOL, filters),
        queries.budgets(db, filters),
        queries.spend_by(db, src, filters, "task_class"),
        queries.spend_by(db, src, filters, "stop_reason"),
        queries.spend_by(db, src, filters, "day"),
    )
    classes, totals = class_rows(by_class)
    budgets = in_force(stored_budgets)
    spend = spend_data(spend_class, spend_reason, spend_day, src.money)
    return {
        "database": ctx.database,
        "filters": filters.active(),
        "rollup": src.stored,
        "totals": totals,
        "task_classes": classes,
        "over_time": period_rows(by_day),
        "budget_at_stop": budget_rows_by_counter(budget),
        "budgets": {
            "rows": [b.to_dict() for b in budgets],
            "placeholder": any(b.placeholder for b in budgets),
            "next_step": NEXT_STEP.format(db=PurePath(ctx.db.path or f"{ctx.database}.db").name),
        },
        "spend": spend,
        "paid_path": {
            "from": "computed" if verdicts is None else "task_classes",
            "rows": with_spend(
                computed if verdicts is None else [verdict_row(r) for r in verdicts], spend
            ),
        },
        "retry_storms": {
            "threshold": limit, "count": storm_count, "top": link_rows(ctx, storms.rows),
        },
        "no_progress": {"count": stuck_count, "top": link_rows(ctx, stuck.rows)},
        "unknown_vendors": {
            "count": vendor_count, "top": [vendor_row(ctx, r) for r in vendors.rows],
        },
        "unclassified_tools": {"count": tool_count},
        "_charts": {
            "by_class": charts.stop_reasons_by_class(
                by_class,
                lambda task_class, reason: ctx.urls.table(
                    "sessions", task_class=task_class, stop_reason=reason
                ),
            ),
            "over_time": charts.sessions_over_time(by_day),
            "budget": charts.budget_at_stop(budget),
            "spend_by_class": charts.spend_by_class(spend["by_task_class"]),
            "spend_over_time": charts.spend_over_time(spend["over_time"]),
        },
    }


async def retry_storms_data(ctx: Context) -> dict[str, Any]:
    limit = number_arg(
        ctx.request, "min_length", threshold(ctx.datasette, ctx.database), minimum=2
    )
    money = (await queries.Sources.of(ctx.db)).money
    page, by_day, count, spent = await asyncio.gather(
        queries.incidents(
            ctx.db, queries.RETRY_STORMS, ctx.filters, limit,
            after=ctx.request.args.get("_next"), size=page_size(ctx.request), money=money,
        ),
        queries.storms_by_day(ctx.db, ctx.filters, limit),
        queries.count_incidents(ctx.db, "retry_storm", ctx.filters, limit),
        queries.incident_spend(ctx.db, "retry_storm", ctx.filters, limit, money),
    )
    return {
        "database": ctx.database,
        "filters": ctx.filters.active(),
        "threshold": limit,
        "count": count,
        "cost_usd": spent,
        "rows": link_rows(ctx, page.rows),
        "next": page.next,
        "next_url": next_url(ctx, "retry-storms", page.next),
        "by_day": by_day,
        "_charts": {"retries": charts.retries_over_time(by_day)},
    }


async def no_progress_data(ctx: Context) -> dict[str, Any]:
    limit = number_arg(ctx.request, "min_length", 2, minimum=2)
    money = (await queries.Sources.of(ctx.db)).money
    page, count, spent = await asyncio.gather(
        queries.incidents(
            ctx.db, queries.NO_PROGRESS, ctx.filters, limit,
            after=ctx.request.args.get("_next"), size=page_size(ctx.request), money=money,
        ),
        queries.count_incidents(ctx.db, "no_progress", ctx.filters, limit),
        queries.incident_spend(ctx.db, "no_progress", ctx.filters, limit, money),
    )
    return {
        "database": ctx.database,
        "filters": ctx.filters.active(),
        "min_length": limit,
        "count": count,
        "cost_usd": spent,
        "rows": link_rows(ctx, page.rows),
        "next": page.next,
        "next_url": next_url(ctx, "no-progress", page.next),
    }


async def unknown_vendors_data(ctx: Context) -> dict[str, Any]:
    """Vendor stop strings the vendor map lacks, and tools the action map lacks: both fail
    closed, both are fixed by a line in a TOML file."""
    db, filters = ctx.db, ctx.filters
    offset = number_arg(ctx.request, "_next", 0, minimum=0)
    page, count, tools, tool_count = await asyncio.gather(
        queries.unknown_keys(db, queries.UNKNOWN_VENDOR, filters, offset=offset),
        queries.count_unknown_keys(db, queries.UNKNOWN_VENDOR, filters),
        queries.unknown_keys(db, queries.UNCLASSIFIED_TOOL, filters),
        queries.count_unknown_keys(db, queries.UNCLASSIFIED_TOOL, filters),
    )
    found = [vendor_row(ctx, r) for r in page.rows]
    classed = [tool_row(ctx, r) for r in tools.rows]
    return {
        "database": ctx.database,
        "filters": filters.active(),
        "count": count,
        "rows": found,
        "vendor_map": vendor_map_file(found),
        "next": page.next,
        "next_url": next_url(ctx, "unknown-vendors", page.next),
        "unclassified_tools": {
            "count": tool_count,
            "rows": classed,
            "action_map": action_map_file(classed),
            "more": tools.next is not None,
        },
    }


#: The paste-ready line keeps the string failing closed until someone picks its meaning.
ENTRY_PLACEHOLDER = StopReason.UNKNOWN_VENDOR.value
ENTRY_HINT = "# choose: " + " | ".join(
    [r for r in REASONS if r != ENTRY_PLACEHOLDER] + ["continue"]
)


def vendor_row(ctx: Context, row: dict[str, Any]) -> dict[str, Any]:
    raw = row["vendor_stop"]
    try:
        entry: str | None = f"{vendor_map_entry(raw, ENTRY_PLACEHOLDER)}  {ENTRY_HINT}"
    except (VendorMapError, ValueError):
        entry = None
    return dict(
        row,
        vendor_map_entry=entry,
        incidents_url=ctx.urls.table("incidents", kind="unknown_vendor", key=raw),
    )


def vendor_map_file(found: list[dict[str, Any]]) -> str:
    """A ``[stops]`` table of every string shown, for a ``--vendor-map`` TOML file."""
    lines = [r["vendor_map_entry"] for r in found if r["vendor_map_entry"]]
    if not lines:
        return ""
    return "\n".join([
        "# agent-ledger vendor map: replace each \"unknown_vendor\" with what the string means,",
        "# then: agent-ledger ingest DB PATH --vendor-map this-file.toml",
        "[stops]",
        *lines,
    ]) + "\n"


#: The paste-ready line classes a tool as a write (what it counts as now) until someone knows.
TOOL_HINT = "# choose: " + " | ".join(TOOL_VALUES)


def tool_row(ctx: Context, row: dict[str, Any]) -> dict[str, Any]:
    return dict(
        row,
        action_map_entry=f"{action_map_entry(row['tool'])}  {TOOL_HINT}",
        incidents_url=ctx.urls.table("incidents", kind="unclassified_tool", key=row["tool"]),
    )


def action_map_file(found: list[dict[str, Any]]) -> str:
    """A ``[tools]`` table of every tool shown, for an ``--action-map`` TOML file."""
    if not found:
        return ""
    return "\n".join([
        "# agent-ledger action map: each tool is a write until you class it (think, read, or",
        "# shell for a tool whose input is a shell command), then:",
        "# agent-ledger ingest DB PATH --action-map this-file.toml",
        "[tools]",
        *(r["action_map_entry"] for r in found),
    ]) + "\n"


def decision_of(session: dict[str, Any]) -> dict[str, str] | None:
    """The decision table's row for the reason the budget stopped ``session`` (None if it
    ran out)."""
    if session["stop_at"] is None or session["stop_reason"] not in REASONS:
        return None
    d = DECISIONS[StopReason(session["stop_reason"])]
    return {
        "reason": d.reason.value, "seed": d.seed, "must_observe": d.must_observe,
        "safe_action": d.safe_action, "fail_closed_if_missing": d.fail_closed_if_missing,
        "description": d.description,
    }


def window(first: int, last: int, events: int, stop_at: int | None) -> dict[str, Any]:
    """Which steps a timeline page shows, and the links to the pages around it."""
    return {
        "first": first,
        "last": last,
        "events": events,
        "previous_url": f"?at={max(first - TIMELINE_PAGE, 1)}" if first > 1 else None,
        "next_url": f"?at={last + 1}" if last < events else None,
        "stop_url": f"?at={stop_at}#step-{stop_at}" if stop_at else None,
    }


async def final_meters(
    ctx: Context, session_id: str, idx: int, shown: list[dict[str, Any]], held: list[Any]
) -> list[dict[str, Any]]:
    """The counters after step ``idx`` (the stop, or the last step), against their caps."""
    step = next((s for s in shown if s["idx"] == idx), None)
    if step is None:
        step = next(iter(await queries.steps(ctx.db, session_id, idx, 1)), None)
    if step is None:
        return []
    hashes = await queries.observations_before(ctx.db, session_id, idx + 1, REPEATS_SEEN)
    return [m.to_dict() for m in step_meters(step, run_length(hashes), held)]


async def sub_agents_data(ctx: Context, session: dict[str, Any]) -> dict[str, Any] | None:
    """The session's sub-agents, each linked, and their totals beside the session's own
    (None for a session without sub-agents)."""
    totals = await queries.sub_agent_totals(ctx.db, session["session_id"])
    if not totals["sessions"]:
        return None
    children = await queries.sub_agents(ctx.db, session["session_id"])
    own = {c: session[c] for c in queries.SUB_AGENT_SUMS}
    return {
        "rows": [dict(r, url=ctx.urls.session(r["session_id"])) for r in children],
        "shown": len(children),
        "totals": totals,
        "own": own,
        "with_sub_agents": {
            c: None if own[c] is None and totals[c] is None else (own[c] or 0) + (totals[c] or 0)
            for c in queries.SUB_AGENT_SUMS
        },
    }


async def session_data(ctx: Context, session_id: str) -> dict[str, Any]:
    await ctx.datasette.ensure_permissions(
        ctx.request.actor,
        [("view-table", (ctx.database, "steps")), ("view-database", ctx.database),
         "view-instance"],
    )
    session = await queries.session(ctx.db, session_id)
    if session is None:
        raise NotFound(f"No session {session_id!r} in {ctx.database}")
    events, stop_at = session["events"] or 0, session["stop_at"]
    at = number_arg(ctx.request, "at", 1, minimum=1)
    first = ((min(at, max(events, 1)) - 1) // TIMELINE_PAGE) * TIMELINE_PAGE + 1
    shown = await queries.steps(ctx.db, session_id, first, TIMELINE_PAGE)
    held = gauges(session)
    before = await queries.observations_before(ctx.db, session_id, first, REPEATS_SEEN)
    limit = threshold(ctx.datasette, ctx.database)
    incidents = [
        dict(i, href=f"?at={i['start_idx']}#step-{i['start_idx']}")
        for i in await queries.session_incidents(ctx.db, session_id)
        if i["kind"] != "retry_storm" or i["length"] >= limit
    ]
    meters = [step_meters(s, n, held) for s, n in zip(shown, repeats(shown, before), strict=True)]
    denied = {d["event_idx"]: d for d in await queries.denied_calls(
        ctx.db, session_id, first, TIMELINE_PAGE)}
    steps = [
        dict(
            step,
            is_stop=step["idx"] == stop_at,
            denied=denied.get(step["idx"]),
            meters=[m.to_dict() for m in step_meter],
            incidents=sorted({
                i["kind"] for i in incidents if i["start_idx"] <= step["idx"] <= i["end_idx"]
            }),
        )
        for step, step_meter in zip(shown, meters, strict=True)
    ]
    final_idx = stop_at or events
    return {
        "database": ctx.database,
        "session": dict(session, budget=json.loads(session.get("budget") or "{}")),
        "sub_agents": await sub_agents_data(ctx, session),
        "decision": decision_of(session),
        "at_stop": {
            "idx": final_idx,
            "stopped": stop_at is not None,
            "meters": await final_meters(ctx, session_id, final_idx, shown, held),
        },
        "steps": steps,
        "incidents": incidents,
        "retry_storm_threshold": limit,
        "window": window(first, shown[-1]["idx"] if shown else first - 1, events, stop_at),
        "_charts": {
            "budget": charts.budget_by_step([s["idx"] for s in shown], meters, stop_at)
        },
    }


def page_size(request: Request) -> int:
    size = number_arg(request, "_size", queries.PAGE_SIZE, minimum=1)
    return min(size, queries.MAX_PAGE_SIZE)


#: Arguments a page's next link keeps, besides the filters.
KEPT = ("min_length", "_size")


def next_url(ctx: Context, slug: str, token: str | None) -> str | None:
    if token is None:
        return None
    kept = {name: ctx.request.args.get(name) for name in KEPT}
    return ctx.urls.page(slug, ctx.filters.query(**kept, _next=token))


# --- serving -------------------------------------------------------------------------------

Builder = Callable[[Context], Awaitable[dict[str, Any]]]


async def respond(
    ctx: Context, page: PageInfo, data: dict[str, Any], json_twin: bool, json_url: str
) -> Response:
    """The page's dict as its ``.json`` twin, or rendered (with its charts) as HTML."""
    chart_specs = data.pop("_charts", {})
    if json_twin:
        return Response.json(data, default=str)
    context = {
        **data,
        "page": page,
        "ledger_urls": ctx.urls,
        "query": ctx.filters.query(),
        "chart_specs": cells.visible_data(chart_specs),
        "alternate_url_json": json_url,
        "json_url": json_url,
        "reasons": REASONS,
        "filter_options": await filter_options(ctx) if page in PAGES else {},
    }
    html = await ctx.datasette.render_template(
        page.template, context, request=ctx.request, view_name=f"ledger-{page.slug}"
    )
    return Response.html(html)


async def filter_options(ctx: Context) -> dict[str, Any]:
    src = await queries.Sources.of(ctx.db)
    return {
        "task_classes": await queries.task_classes(ctx.db, src),
        "stop_reasons": list(REASONS),
        "sources": await queries.sources(ctx.db),
    }


BUILDERS: dict[str, Builder] = {
    "overview": overview_data,
    "retry-storms": retry_storms_data,
    "no-progress": no_progress_data,
    "unknown-vendors": unknown_vendors_data,
}


View = Callable[..., Awaitable[Response]]


def bad_arguments_are_400(view: View) -> View:
    """A query-string argument the page cannot use (a FilterError) answers 400 with its
    message, on the page and its ``.json`` twin alike."""

    @functools.wraps(view)
    async def inner(datasette: Datasette, request: Request) -> Response:
        try:
            return await view(datasette, request)
        except FilterError as exc:
            raise BadRequest(str(exc)) from None

    return inner


@bad_arguments_are_400
async def dashboard_page(datasette: Datasette, request: Request) -> Response:
    ctx = await open_context(datasette, request)
    page = PAGE_BY_SLUG[request.url_vars["page"]]
    data = await BUILDERS[page.slug](ctx)
    json_twin = bool(request.url_vars.get("format"))
    query = request.query_string
    json_url = ctx.urls.page(page.slug, f"?{query}" if query else "", json_twin=True)
    return await respond(ctx, page, data, json_twin, json_url)


SESSION_PAGE = PageInfo("session", "Session timeline", "ledger_session.html")


@bad_arguments_are_400
async def session_page(datasette: Datasette, request: Request) -> Response:
    ctx = await open_context(datasette, request)
    session_id = tilde_decode(request.url_vars["session"])
    data = await session_data(ctx, session_id)
    json_twin = bool(request.url_vars.get("format"))
    query = request.query_string
    json_url = ctx.urls.session(session_id, json_twin=True) + (f"?{query}" if query else "")
    return await respond(ctx, SESSION_PAGE, data, json_twin, json_url)


def routes() -> list[tuple[str, View]]:
    return [
        (rf"^/(?P<database>[^/]+)/-/(?P<page>{SLUGS})(?P<format>\.json)?$", dashboard_page),
        (r"^/(?P<database>[^/]+)/-/sessions/(?P<session>[^/]+?)(?P<format>\.json)?$",
         session_page),
    ]
