"""A session's budget counters drawn against their caps, step by step. Pure.

Which counters a session is held to follows the budget machine: its dialect's cap families
(a gate ledger is never held to ``max_rounds``) and the meters its log carries (a cap whose
meter is absent cannot be honoured, so it is shown as not measured, not as zero).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.core.budget import LOOP
from ledger.core.fold import families_for
from ledger.core.money import usd
from ledger.db.rollup import COUNTERS, Counter

from .cells import duration, tokens

NO_PROGRESS = Counter(
    "no_progress", "same observation in a row", "", "no_progress_rounds", "observations", LOOP
)
#: The session's spend so far against ``max_cost`` (a loop cap the rollup does not bucket).
COST = Counter("cost", "cost", "total_cost_usd", "max_cost", "cost", LOOP)


@dataclass(frozen=True)
class Gauge:
    """One counter of one session: its cap (None: off) and whether the log measures it."""

    name: str
    label: str
    cap: float | None
    measured: bool


#: Short labels for the compact meters of each timeline row.
SHORT = {
    "rounds": "rounds", "tool_calls": "calls", "output_tokens": "tokens", "tool_errors": "errors",
    "no_progress": "same obs", "steps": "steps", "writes": "writes", "seconds": "time",
    "cost": "cost",
}


@dataclass(frozen=True)
class Meter:
    name: str
    label: str
    value: float | None
    cap: float | None
    measured: bool
    percent: float | None  # of the cap, not clamped; None without a cap or a measure
    text: str

    def to_dict(self) -> dict[str, Any]:
        # By hand: dataclasses.asdict deep-copies, and a timeline page of 500 steps makes 4,000
        # of these (the longest session's first page at 1M events: 169-186 ms to 136-140 ms).
        return {
            "name": self.name, "label": self.label, "value": self.value, "cap": self.cap,
            "measured": self.measured, "percent": self.percent, "text": self.text,
            "short": SHORT.get(self.name, self.label),
        }


def gauges(session: Mapping[str, Any]) -> list[Gauge]:
    """The counters that hold ``session``, in the seeds' order, no-progress and cost after
    tool errors."""
    budget = json.loads(session.get("budget") or "{}")
    carried = set((session.get("meters") or "").split(","))
    families = families_for(session.get("dialect") or "native")
    counters = [*COUNTERS[:4], NO_PROGRESS, COST, *COUNTERS[4:]]
    return [
        Gauge(c.name, c.label, budget.get(c.cap), c.meter is None or c.meter in carried)
        for c in counters
        if c.family in families
    ]


def show(name: str, value: float | None) -> str:
    if value is None:
        return "?"
    if name == "output_tokens":
        return tokens(value)
    if name == "seconds":
        return duration(value)
    if name == COST.name:
        return usd(value)
    return f"{value:g}"


def meter(gauge: Gauge, value: float | None) -> Meter:
    if not gauge.measured:
        return Meter(gauge.name, gauge.label, None, gauge.cap, False, None, "not measured")
    cap = gauge.cap
    percent = None if cap is None or value is None else (100.0 if cap == 0 else value / cap * 100)
    text = show(gauge.name, value) + (f" / {show(gauge.name, cap)}" if cap is not None else "")
    return Meter(gauge.name, gauge.label, value, cap, True, percent, text)


def repeats(steps: Iterable[Mapping[str, Any]], before: Sequence[str]) -> list[int]:
    """How many times in a row each step's last observation has been seen (the machine's
    ``observation_repeats``); ``before`` is the hashes of the steps before, latest first."""
    last = before[0] if before else None
    count = run_length(before)
    found = []
    for step in steps:
        h = step.get("observation_hash")
        if h is not None:
            count = count + 1 if h == last else 1
            last = h
        found.append(count)
    return found


def run_length(latest_first: Sequence[str]) -> int:
    """How many of the hashes, latest first, equal the latest one."""
    count = 0
    for h in latest_first:
        if h != latest_first[0]:
            break
        count += 1
    return count


COLUMNS = {c.name: c.column for c in (*COUNTERS, COST)}


def step_meters(
    step: Mapping[str, Any], repeat: int, session_gauges: Sequence[Gauge]
) -> list[Meter]:
    """Each counter after ``step``, against its cap."""
    found = []
    for g in session_gauges:
        value = repeat if g.name == NO_PROGRESS.name else step.get(COLUMNS[g.name])
        found.append(meter(g, value))
    return found
