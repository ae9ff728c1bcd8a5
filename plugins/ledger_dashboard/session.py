"""A session's timeline page: every step against the caps, its stop, its sub-agents."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from datasette.utils.asgi import NotFound

from ledger.core.reasons import DECISIONS, StopReason

from . import charts, queries
from .filters import REASONS
from .timeline import gauges, repeats, run_length, step_meters

if TYPE_CHECKING:
    pass

from .context import (
    REPEATS_SEEN,
    TIMELINE_PAGE,
    Context,
    number_arg,
    threshold,
)


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


async def family_stop(ctx: Context, session: dict[str, Any]) -> dict[str, Any] | None:
    """Where the session and its sub-agents, counted together, stopped (``family_stops``,
    with ``subagents_count_in_parent`` on), linked to that step; None if they never did."""
    found = await queries.rows(
        ctx.db, "select * from family_stops where parent_session_id = :id "
        "and stop_reason is not null", {"id": session["session_id"]},
    )
    if not found:
        return None
    stop = found[0]
    return dict(stop, url=f"{ctx.urls.session(stop['session_id'])}?at={stop['idx']}"
                f"#step-{stop['idx']}")


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
        "family_stop": await family_stop(ctx, session),
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
