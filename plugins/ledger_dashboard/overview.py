"""The overview page's data: sessions, spend, budgets and verdicts by task class and day."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from ledger.analysis.budget_in_force import NEXT_STEP, in_force
from ledger.core.money import CURRENCY
from ledger.core.reasons import StopReason
from ledger.db.rollup import BUCKETS, COUNTERS, NANO

from . import charts, queries

if TYPE_CHECKING:
    pass

from .context import (
    TOP,
    Context,
    link_rows,
    threshold,
)
from .incident_pages import vendor_row


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


#: The counters a live session's row shows, from its last decision (``COUNTERS`` of the hook).
LIVE_COUNTERS = ("steps", "writes", "tool_calls", "output_tokens", "cost")


def live_rows(ctx: Context, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Live sessions with their last decision's counters read, and their timeline's link
    (at the last call's step) once ``ingest`` has read the session."""
    out = []
    for r in found:
        try:
            counters = json.loads(r["counters"] or "{}")
        except ValueError:
            counters = {}
        link = ctx.urls.session(r["session_id"], r["event_idx"]) if r["ingested"] else None
        out.append(dict(
            r, counters={k: counters[k] for k in LIVE_COUNTERS if counters.get(k) is not None},
            timeline_url=link,
        ))
    return out


def since(now: datetime, minutes: int) -> str:
    """The ISO time ``minutes`` before ``now``, as the hook writes ``hook_decisions.at``."""
    return (now - timedelta(minutes=minutes)).isoformat(timespec="seconds")


async def overview_data(ctx: Context) -> dict[str, Any]:
    db, filters = ctx.db, ctx.filters
    src = await queries.Sources.of(db)
    limit = threshold(ctx.datasette, ctx.database)
    # Independent reads: Datasette runs them on its pool of read connections at once.
    (
        by_class, by_day, budget, verdicts, computed, storms, stuck, vendors,
        storm_count, stuck_count, vendor_count, tool_count, stored_budgets,
        spend_class, spend_reason, spend_day, live,
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
        queries.live_sessions(db, since(datetime.now(UTC), queries.LIVE_MINUTES)),
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
        "live": {"minutes": queries.LIVE_MINUTES, "sessions": live_rows(ctx, live)},
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
