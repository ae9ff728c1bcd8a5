"""A proposed budget, derived from the sessions that completed with a verified terminal signal.

Seed 000, step 3: "Start from the captured trace, then tighten one notch so the new host cannot
outrun the paid loop. Label these defaults as a proposal until your replay suite has run
against real traces."

The captured traces are the sessions that ran out under their budget *and* whose log said the
task was complete (``stop_reason = recorded_stop = task_complete``). The paid loop let each of
them run as far as it did; its own limit lay somewhere above. *One notch* is one unit of the
cap's meter (a round, a tool call, a token, an error, a repeated observation, a cent, a step,
a write, a millisecond), and tightening stops one notch above what the verified runs used:
each cap is the **tightest value under which every verified session still completes**:

* seed 000's caps trip at ``>=`` after a step, so the cap is the observed peak plus one (one
  cent for ``max_cost``, which counts US dollars);
* seed 002's caps trip at ``>`` when a step is taken, so the cap is the peak itself; and its
  retry rule blocks a retry taken at step ``n`` when ``max_steps <= n + 1``, so ``max_steps``
  is at least ``n + 2`` for every retry a verified run took.

Nothing is rounded: a rounder number is either looser (the new host could outrun the paid loop)
or stops a verified run. A cap no verified session is held to (its dialect's seed has no such
cap) or can be measured on (the log lacks the meter) is proposed ``off``; where the meter is
missing that is seed 000 step 4's gap: the cap cannot be honoured, so say so, do not pretend.

Pure: stored sessions and their events in, a :class:`Proposal` out.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ledger.analysis.whatif import (
    CHANGES,
    COMPLETE,
    UNCHANGED,
    Replayer,
    Report,
    Verdict,
    evaluate,
    saved_line,
)
from ledger.core.budget import GATE, LOOP, Budget, State, apply
from ledger.core.events import Event, meters_of
from ledger.core.fold import families_for
from ledger.db.stored import StoredSession

Number = int | float


@dataclass(frozen=True)
class Cap:
    """A budget key as the proposal sees it: its family, the meter it needs, its boundary."""

    key: str
    family: str
    meter: str | None  # None: always measured where the family applies (steps)
    above: bool  # True: trips when usage > cap (seed 002); False: usage >= cap (seed 000)
    unit: str
    notch: Number = 1  # what a >= cap adds to the peak


CAPS: tuple[Cap, ...] = (
    Cap("max_rounds", LOOP, "round_counter", False, "rounds"),
    Cap("max_tool_calls", LOOP, "tool_calls", False, "tool calls"),
    Cap("max_output_tokens", LOOP, "output_tokens", False, "output tokens"),
    Cap("max_consecutive_tool_errors", LOOP, "tool_errors", False, "consecutive tool errors"),
    Cap("no_progress_rounds", LOOP, "observations", False, "repeats of one observation"),
    Cap("max_cost", LOOP, "cost", False, "US dollars", 0.01),
    Cap("max_steps", GATE, None, True, "steps"),
    Cap("max_writes", GATE, "write_classification", True, "writes"),
    Cap("max_seconds", GATE, "elapsed_time", True, "seconds"),
)
assert [c.key for c in CAPS] == Budget.keys()


@dataclass(frozen=True)
class Usage:
    """What one verified session used: per cap, its peak and the least cap it passes."""

    session_id: str
    peaks: dict[str, Number]  # caps the session is held to and measured on
    needs: dict[str, Number]  # the tightest passing value of each such cap
    held: frozenset[str]  # families the session's dialect is held to


def usage(session: StoredSession, events: Iterable[Event]) -> Usage:
    """Replay the session's events (no caps) and record the peaks the budget checks."""
    state = State()
    meters: set[str] = set()
    worst_errors = worst_repeats = retry_needs = 0
    seconds: float | None = None
    for event in events:
        apply(state, event)
        meters |= meters_of(event)
        if not event.is_step:
            continue
        worst_errors = max(worst_errors, state.consecutive_tool_errors)
        worst_repeats = max(worst_repeats, state.observation_repeats)
        if state.elapsed_s is not None:
            seconds = state.elapsed_s if seconds is None else max(seconds, state.elapsed_s)
        if event.action == "retry":
            retry_needs = max(retry_needs, state.steps + 2)
    observed: dict[str, Number | None] = {
        "max_rounds": state.rounds,
        "max_tool_calls": state.tool_calls,
        "max_output_tokens": state.output_tokens,
        "max_consecutive_tool_errors": worst_errors,
        "no_progress_rounds": worst_repeats,
        "max_cost": state.cost,
        "max_steps": state.steps,
        "max_writes": state.writes,
        "max_seconds": seconds,
    }
    held = families_for(session.dialect)
    peaks: dict[str, Number] = {}
    needs: dict[str, Number] = {}
    for cap in CAPS:
        peak = observed[cap.key]
        if cap.family not in held or peak is None or (cap.meter and cap.meter not in meters):
            continue
        peaks[cap.key] = peak
        needs[cap.key] = peak if cap.above else _plus(peak, cap.notch)
    if "max_steps" in needs:
        needs["max_steps"] = max(needs["max_steps"], retry_needs)
    return Usage(session.session_id, peaks, needs, held)


@dataclass(frozen=True)
class Line:
    """One cap of the proposal: its value (None = off), the peak behind it, and why."""

    key: str
    value: Number | None
    peak: Number | None
    measured_in: int
    note: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Proposal:
    task_class: str | None
    verified: int
    lines: list[Line]
    source: str = ""
    trial: Report = field(default_factory=Report)
    stopped: list[Verdict] = field(default_factory=list)
    verified_ids: frozenset[str] = frozenset()

    @property
    def budget(self) -> Budget:
        return Budget(**{line.key: line.value for line in self.lines})

    def observe(self, verdict: Verdict) -> None:
        """Count one session replayed under the proposal; keep it if the proposal stops it."""
        self.trial.add(verdict)
        if verdict.new.reason != COMPLETE:
            self.stopped.append(verdict)

    @property
    def verified_stopped(self) -> list[Verdict]:
        """Verified sessions the proposal stops: none, by construction (tested)."""
        return [v for v in self.stopped if v.session_id in self.verified_ids]

    def to_dict(self) -> dict[str, Any]:
        totals = self.trial.totals
        return {
            "task_class": self.task_class,
            "verified_sessions": self.verified,
            "budget": self.budget.to_dict(),
            "caps": [line.to_dict() for line in self.lines],
            "trial": {
                "sessions": self.trial.sessions,
                "stopped": len(self.stopped),
                "cost_usd": self.trial.cost_usd,
                "saved_usd": self.trial.saved_usd,
                "verified_stopped": len(self.verified_stopped),
                **{k: totals[k] for k in (*CHANGES, UNCHANGED)},
                "stops": [v.to_dict() for v in self.stopped],
            },
        }


def propose(task_class: str | None, usages: Iterable[Usage], source: str = "") -> Proposal:
    """The tightest budget that every one of ``usages`` passes."""
    used = list(usages)
    lines = []
    for cap in CAPS:
        measured = [u for u in used if cap.key in u.needs]
        if measured:
            value = max(u.needs[cap.key] for u in measured)
            peak = max(u.peaks[cap.key] for u in measured)
            rule = "the peak" if cap.above else f"the peak + {_number(cap.notch)}"
            if cap.key == "max_steps" and value != peak:
                rule = "a retry taken at step n needs n + 2"
            note = (
                f"{cap.unit}: peak {_number(peak)}, measured in {len(measured)} of {len(used)} "
                f"verified sessions; cap = {rule}"
            )
            lines.append(Line(cap.key, value, peak, len(measured), note))
        elif any(cap.family in u.held for u in used):
            lines.append(Line(cap.key, None, None, 0, (
                f"FAIL CLOSED: no verified session carries the {cap.meter} meter, so this cap "
                "cannot be honoured (seed 000 step 4: keep the class on the paid path or add "
                "the meter)"
            )))
        else:
            lines.append(Line(cap.key, None, None, 0, (
                f"not applicable: no verified session's dialect is held to {cap.family} caps"
            )))
    return Proposal(
        task_class, len(used), lines, source, verified_ids=frozenset(u.session_id for u in used)
    )


def _plus(peak: Number, notch: Number) -> Number:
    """One notch above the peak (rounded like the machine's dollar sums, so 0.7 + 0.1 = 0.8)."""
    return peak + notch if isinstance(notch, int) else round(peak + notch, 12)


def _number(value: Number) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _quoted(text: str | None) -> str:
    """Safe inside a TOML comment: JSON quoting escapes newlines and control characters."""
    return json.dumps(text)


def to_toml(proposal: Proposal, listed: int | None = None) -> str:
    """The proposal as a budget file ``--budget-file`` loads, its evidence in comments."""
    sessions = "session" if proposal.verified == 1 else "sessions"
    db = shlex.quote(proposal.source) if proposal.source else "DB_PATH"
    out = [
        "# PROPOSAL — not a tested budget. Replay it against real traces before a host honours",
        "# it (seed 000, step 3). Do not use it for capacity planning.",
        "#",
        f"# Derived by agent-ledger propose-budget from {proposal.verified} {sessions} of task",
        f"# class {_quoted(proposal.task_class)}"
        + (f" in {_quoted(proposal.source)}" if proposal.source else "")
        + " that completed with a verified terminal",
        "# signal (stop_reason = recorded_stop = task_complete). Each cap is tightened to one",
        "# notch above what those runs used: the tightest value under which every one of them",
        "# still completes (seed 000 caps trip at >=: the peak + 1; seed 002 caps trip at >:",
        "# the peak itself).",
        f"# Try it:  agent-ledger what-if {db} --budget-file THIS_FILE",
        "",
        "[budget]",
    ]
    width = max(len(line.key) for line in proposal.lines)
    for line in proposal.lines:
        value = '"off"' if line.value is None else _number(line.value)
        out.append(f"{line.key.ljust(width)} = {value}  # {line.note}")
    out += ["", *(f"# {text}" if text else "#" for text in trial_lines(proposal, listed))]
    return "\n".join(out) + "\n"


def trial_lines(proposal: Proposal, listed: int | None = None) -> list[str]:
    """What the proposal would have stopped among the class's sessions, as plain lines."""
    trial = proposal.trial
    totals = trial.totals
    lines = [
        f"Replayed under this proposal, {len(proposal.stopped)} of {trial.sessions} stored "
        f"sessions stop before they run out ({len(proposal.verified_stopped)} of the "
        f"{proposal.verified} verified ones).",
        f"Against their stored stops: {totals['earlier']} earlier, {totals['later']} later, "
        f"{totals['other_reason']} for another reason, {totals['unchanged']} unchanged.",
    ]
    if trial.cost_usd:
        lines.append(saved_line(trial))
    shown = proposal.stopped if listed is None else proposal.stopped[:listed]
    if shown:
        lines.append("")
    for verdict in shown:
        was = _stop(verdict.old.reason, verdict.old.at)
        change = verdict.change or "unchanged"
        lines.append(
            f"  {_quoted(verdict.session_id)}: {_stop(verdict.new.reason, verdict.new.at)} "
            f"({verdict.new.detail}); stored {was}: {change}"
        )
    if len(shown) < len(proposal.stopped):
        lines.append(f"  ... and {len(proposal.stopped) - len(shown)} more (--limit 0 lists all)")
    return lines


def _stop(reason: str, at: int | None) -> str:
    return reason if at is None else f"{reason} at {at}"


def trial(
    proposal: Proposal,
    sessions: Iterable[tuple[StoredSession, Iterable[Event]]],
    vendor_map: Mapping[str, str],
) -> Proposal:
    """Replay ``sessions`` under the proposal (in place of their stored budgets)."""
    budget = proposal.budget
    for verdict in evaluate(sessions, Replayer(lambda _stored: budget, vendor_map)):
        proposal.observe(verdict)
    return proposal
