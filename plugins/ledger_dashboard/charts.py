"""Chart.js configurations, built from query rows. Pure data: no functions, no HTML.

The page embeds them as JSON; ``static/ledger-dashboard.js`` hands each to Chart.js unchanged,
except ``links`` (a URL per bar, opened on click) and ``stopIndex`` (a marker line). Chart.js
draws text on a canvas, so ledger strings in labels are never parsed as HTML.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledger.db.rollup import BUCKETS, COUNTERS

from .cells import REASON_COLOURS
from .filters import REASONS
from .timeline import Meter

Spec = dict[str, Any]
BUCKET_COLOURS = ("#a5d6a7", "#fff59d", "#ffb74d", "#e53935")
#: Where a day axis turns into a month axis.
MAX_DAYS = 120


def _options(stacked: bool, horizontal: bool = False, **extra: Any) -> dict[str, Any]:
    axis = {"stacked": stacked, "ticks": {"precision": 0}}
    options: dict[str, Any] = {
        "animation": False,
        "responsive": True,
        "maintainAspectRatio": False,
        "scales": {"x": dict(axis), "y": dict(axis)},
        "plugins": {"legend": {"position": "bottom"}},
    }
    if horizontal:
        options["indexAxis"] = "y"
    options.update(extra)
    return options


def _reason_datasets(
    labels: Sequence[str],
    counts: Mapping[tuple[str, str], int],
    link: Callable[[str, str], str] | None,
) -> tuple[list[dict[str, Any]], list[list[str]]]:
    datasets, links = [], []
    present = {reason for _, reason in counts}
    for reason in REASONS:
        if reason not in present:
            continue
        datasets.append({
            "label": reason,
            "data": [counts.get((label, reason), 0) for label in labels],
            "backgroundColor": REASON_COLOURS[reason][0],
        })
        links.append([link(label, reason) if link else "" for label in labels])
    return datasets, links


def _stacked(
    rows: Sequence[Mapping[str, Any]],
    key: str,
    horizontal: bool,
    link: Callable[[str, str], str] | None = None,
) -> Spec:
    """Stacked bars, one per value of ``key``, a segment per stop reason."""
    labels = sorted({r[key] for r in rows})
    counts = {(r[key], r["stop_reason"]): r["sessions"] for r in rows}
    datasets, links = _reason_datasets(labels, counts, link)
    spec: Spec = {
        "type": "bar",
        "data": {"labels": labels, "datasets": datasets},
        "options": _options(True, horizontal=horizontal),
    }
    if link is not None:
        spec["links"] = links
    return spec


def stop_reasons_by_class(
    rows: Sequence[Mapping[str, Any]], link: Callable[[str, str], str]
) -> Spec:
    """A bar per task class, a segment per stop reason; a click lists those sessions."""
    return _stacked(rows, "task_class", horizontal=True, link=link)


def by_period(rows: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Day rows as they are, or summed by month when there are more than MAX_DAYS days."""
    days = {r["day"] for r in rows}
    if len(days) <= MAX_DAYS:
        return "day", [dict(r, period=r["day"]) for r in rows]
    months: dict[tuple[str, str], int] = defaultdict(int)
    for r in rows:
        months[(r["day"][:7], r["stop_reason"])] += r["sessions"]
    return "month", [
        {"period": p, "stop_reason": reason, "sessions": n}
        for (p, reason), n in sorted(months.items())
    ]


def sessions_over_time(rows: Sequence[Mapping[str, Any]]) -> Spec:
    """Stacked bars of sessions per day (or month), a segment per stop reason."""
    unit, periods = by_period([r for r in rows if r["day"]])
    return {**_stacked(periods, "period", horizontal=False), "unit": unit}


def budget_at_stop(rows: Sequence[Mapping[str, Any]]) -> Spec:
    """One stacked bar per counter: stopped sessions by how much of that cap they had used."""
    counts = {(r["counter"], r["bucket"]): r["sessions"] for r in rows}
    present = [c for c in COUNTERS if any(counter == c.name for counter, _ in counts)]
    datasets = [
        {
            "label": label,
            "data": [counts.get((c.name, bucket), 0) for c in present],
            "backgroundColor": BUCKET_COLOURS[bucket],
        }
        for bucket, label in enumerate(BUCKETS)
    ]
    return {
        "type": "bar",
        "data": {"labels": [c.label for c in present], "datasets": datasets},
        "options": _options(True, horizontal=True),
    }


def retries_over_time(rows: Sequence[Mapping[str, Any]]) -> Spec:
    """Retry storms per day, with the retries in them and how many were blocked."""
    timed = [r for r in rows if r["day"]]
    labels = [r["day"] for r in timed]
    return {
        "type": "bar",
        "data": {
            "labels": labels,
            "datasets": [
                {
                    "label": "retries in storms",
                    "data": [r["retries"] for r in timed],
                    "backgroundColor": "#ef9a9a",
                },
                {
                    "label": "storms",
                    "data": [r["storms"] for r in timed],
                    "backgroundColor": "#c62828",
                },
                {
                    "label": "blocked near the step ceiling",
                    "data": [r["blocked"] for r in timed],
                    "backgroundColor": "#5d4037",
                },
            ],
        },
        "options": _options(False),
    }


GAUGE_COLOURS = {
    "rounds": "#ef6c00",
    "tool_calls": "#f9a825",
    "output_tokens": "#bf360c",
    "tool_errors": "#c62828",
    "no_progress": "#6a1b9a",
    "steps": "#1565c0",
    "writes": "#00838f",
    "seconds": "#283593",
    "cost": "#2e7d32",
}


def budget_by_step(
    indexes: Sequence[int], meters: Sequence[Sequence[Meter]], stop_at: int | None
) -> Spec:
    """Lines: each capped, measured counter as a percentage of its cap after every step."""
    datasets = []
    for n, first in enumerate(meters[0] if meters else []):
        if not first.measured or first.cap is None:
            continue
        datasets.append({
            "label": first.label,
            "data": [row[n].percent for row in meters],
            "borderColor": GAUGE_COLOURS.get(first.name, "#444444"),
            "backgroundColor": GAUGE_COLOURS.get(first.name, "#444444"),
            "stepped": True,
            "pointRadius": 2,
        })
    labels = [str(i) for i in indexes]
    options = _options(False)
    options["scales"]["y"] = {"suggestedMin": 0, "suggestedMax": 100,
                              "title": {"display": True, "text": "% of cap"}}
    options["scales"]["x"] = {"title": {"display": True, "text": "step"}}
    spec: Spec = {"type": "line", "data": {"labels": labels, "datasets": datasets},
                  "options": options}
    if stop_at is not None and stop_at in indexes:
        spec["stopIndex"] = list(indexes).index(stop_at)
    return spec


SPEND_COLOUR = "#2e7d32"


def spend_by_period(rows: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Spend per day, or summed by month when there are more than MAX_DAYS days."""
    if len(rows) <= MAX_DAYS:
        return "day", [{"period": r["day"], "cost_usd": r["cost_usd"]} for r in rows]
    months: dict[str, float] = defaultdict(float)
    for r in rows:
        months[r["day"][:7]] += r["cost_usd"]
    return "month", [{"period": p, "cost_usd": usd} for p, usd in sorted(months.items())]


def _money_options(horizontal: bool = False) -> dict[str, Any]:
    """Bars of US dollars: the value axis titled in the currency, with no whole-number ticks."""
    options = _options(False, horizontal=horizontal)
    value = "x" if horizontal else "y"
    options["scales"][value] = {"beginAtZero": True, "title": {"display": True, "text": "USD"}}
    options["plugins"]["legend"] = {"display": False}
    return options


def spend_by_class(rows: Sequence[Mapping[str, Any]]) -> Spec:
    """A bar per task class: what its sessions spent."""
    return {
        "type": "bar",
        "data": {
            "labels": [r["task_class"] for r in rows],
            "datasets": [{
                "label": "spend (USD)",
                "data": [round(r["cost_usd"], 4) for r in rows],
                "backgroundColor": SPEND_COLOUR,
            }],
        },
        "options": _money_options(horizontal=True),
    }


def spend_over_time(over_time: Mapping[str, Any]) -> Spec:
    """Spend per day (or month)."""
    periods = over_time["periods"]
    return {
        "type": "bar",
        "data": {
            "labels": [p["period"] for p in periods],
            "datasets": [{
                "label": "spend (USD)",
                "data": [round(p["cost_usd"], 4) for p in periods],
                "backgroundColor": SPEND_COLOUR,
            }],
        },
        "options": _money_options(),
        "unit": over_time["unit"],
    }
