"""The retry-storm, no-progress and unknown-vendor pages' data, with the lines to paste."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ledger.core.actions import TOOL_VALUES, action_map_entry
from ledger.core.reasons import StopReason
from ledger.core.vendors import VendorMapError, fails_closed_on_purpose, vendor_map_entry

from . import charts, queries
from .filters import REASONS

if TYPE_CHECKING:
    pass

from .context import (
    Context,
    link_rows,
    next_url,
    number_arg,
    page_size,
    threshold,
)


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
        # a real string the built-in map fails closed on purpose, or one it has never seen
        known_source=fails_closed_on_purpose(raw),
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
