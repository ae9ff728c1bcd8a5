"""What-if budgets: replay stored sessions under another budget and compare where they stop.

Pure: sessions and their events in (see :mod:`ledger.db.stored`), verdicts out. Each session is
replayed by the same :class:`~ledger.core.budget.Machine` ingest uses, with its dialect's cap
families, under its stored budget *retuned* (the caps the user changed, the rest as ingested).
The replay of a session ends at its first stop, since nothing after it can change the verdict.

A stop is a reason and the event it happened at; running out is ``task_complete`` at the end.
Compared with the stored stop, a session stops *earlier* (at an earlier event, or at all where
it used to run out), *later* (at a later event, or not at all), or at the same event for
*another reason*.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ledger.core.budget import LOOP, Budget, Machine, State
from ledger.core.events import Event
from ledger.core.fold import families_for
from ledger.core.money import usd
from ledger.core.pricing import PriceBook, price_event
from ledger.core.reasons import StopReason
from ledger.db.stored import StoredSession

EARLIER = "earlier"
LATER = "later"
OTHER_REASON = "other_reason"
UNCHANGED = "unchanged"
CHANGES = (EARLIER, LATER, OTHER_REASON)

#: Turns a session's stored budget into the budget to try.
Retune = Callable[[Budget], Budget]

COMPLETE = StopReason.TASK_COMPLETE.value


@dataclass(frozen=True, slots=True)
class Stop:
    """Where a session stops: a reason and the 1-based event, or ``at=None`` if it ran out."""

    reason: str
    at: int | None = None
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "at": self.at, "detail": self.detail}


def change(old: Stop, new: Stop) -> str | None:
    """earlier, later or other_reason; None if the session stops the same way."""
    if old.at == new.at:
        return None if old.reason == new.reason else OTHER_REASON
    if old.at is None:
        return EARLIER
    if new.at is None:
        return LATER
    return EARLIER if new.at < old.at else LATER


@dataclass(frozen=True, slots=True)
class Verdict:
    session_id: str
    task_class: str | None
    old: Stop
    new: Stop
    change: str | None
    #: max_cost is on, but no replayed round carried a cost (none was stored, and none could
    #: be priced): the session cannot stop for it, whatever the cap (a meter gap).
    unpriced: bool = False
    #: USD: what the whole stored session spent, and what it would not have spent had the
    #: budget stopped it where the replay does (None: no round carried a cost).
    cost_usd: float | None = None
    saved_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "task_class": self.task_class,
            "change": self.change,
            "old": self.old.to_dict(),
            "new": self.new.to_dict(),
            "unpriced": self.unpriced,
            "cost_usd": self.cost_usd,
            "saved_usd": self.saved_usd,
        }


class Replayer:
    """Replays events under retuned budgets; one machine per distinct budget and cap family."""

    def __init__(
        self, retune: Retune, vendor_map: Mapping[str, str], prices: PriceBook | None = None
    ) -> None:
        self.retune = retune
        self.vendor_map = vendor_map
        #: Prices the stored rounds that keep a model and tokens but no cost (``max_cost``).
        self.prices = prices
        self._machines: dict[tuple[Budget, str], Machine] = {}

    def machine(self, budget: Budget, dialect: str) -> Machine:
        key = (budget, dialect)
        machine = self._machines.get(key)
        if machine is None:
            machine = Machine(self.retune(budget), families_for(dialect), self.vendor_map)
            self._machines[key] = machine
        return machine

    def stop(self, budget: Budget, dialect: str, events: Iterable[Event]) -> Stop:
        """The first stop of ``events`` under the retuned ``budget``."""
        return self._replay(budget, dialect, events)[0]

    def _replay(
        self, budget: Budget, dialect: str, events: Iterable[Event]
    ) -> tuple[Stop, bool, float]:
        """The first stop, whether a round up to it carried a cost, and what was spent by then
        (the stopping round included: ``max_cost`` is checked after the round spends it)."""
        advance = self.machine(budget, dialect).advance
        state = State()
        prices = self.prices
        costed = False
        for event in events:
            if prices is not None and event.cost is None:
                price_event(event, prices, state)
            costed = costed or event.cost is not None
            if advance(state, event) is not None:
                assert state.stop_reason is not None
                stop = Stop(state.stop_reason.value, state.stop_at, state.stop_detail)
                return stop, costed, state.cost
        return Stop(COMPLETE), costed, state.cost

    def verdict(self, session: StoredSession, events: Iterable[Event]) -> Verdict:
        old = Stop(session.stop_reason, session.stop_at, session.stop_detail)
        new, costed, spent = self._replay(session.budget, session.dialect, events)
        capped = self.machine(session.budget, session.dialect).budget.max_cost is not None
        unpriced = capped and not costed and LOOP in families_for(session.dialect)
        total = session.cost_usd
        saved = None if total is None else round(total - spent, 12) if new.at else 0.0
        return Verdict(
            session.session_id, session.task_class, old, new, change(old, new), unpriced,
            total, saved,
        )


def evaluate(
    sessions: Iterable[tuple[StoredSession, Iterable[Event]]], replayer: Replayer
) -> Iterator[Verdict]:
    for session, events in sessions:
        yield replayer.verdict(session, events)


@dataclass
class Report:
    """Counts per task class, and the sessions that would stop differently."""

    sessions: int = 0
    by_class: dict[str | None, Counter[str]] = field(default_factory=dict)
    changes: list[Verdict] = field(default_factory=list)
    unpriced: int = 0  # sessions held to max_cost with no cost to measure it by
    #: USD over the replayed sessions that had a cost: what they spent, and what the budget
    #: tried would have saved (their spend after its stops).
    cost_usd: float = 0.0
    saved_usd: float = 0.0

    def add(self, verdict: Verdict) -> None:
        self.sessions += 1
        self.unpriced += verdict.unpriced
        if verdict.cost_usd is not None:
            self.cost_usd = round(self.cost_usd + verdict.cost_usd, 12)
            self.saved_usd = round(self.saved_usd + (verdict.saved_usd or 0.0), 12)
        counts = self.by_class.setdefault(verdict.task_class, Counter())
        counts["sessions"] += 1
        counts[verdict.change or UNCHANGED] += 1
        if verdict.change is not None:
            self.changes.append(verdict)

    @property
    def totals(self) -> Counter[str]:
        return sum(self.by_class.values(), Counter())

    def class_rows(self) -> list[dict[str, Any]]:
        """One row per task class: sessions, earlier, later, other_reason, unchanged."""
        return [
            {"task_class": name, **{k: counts[k] for k in ("sessions", *CHANGES, UNCHANGED)}}
            for name, counts in sorted(self.by_class.items(), key=lambda kv: kv[0] or "")
        ]

    def to_dict(self) -> dict[str, Any]:
        totals = self.totals
        return {
            "sessions": self.sessions,
            "changed": len(self.changes),
            "unpriced": self.unpriced,
            "cost_usd": self.cost_usd,
            "saved_usd": self.saved_usd,
            **{k: totals[k] for k in (*CHANGES, UNCHANGED)},
            "task_classes": self.class_rows(),
            "changes": [v.to_dict() for v in self.changes],
        }


def saved_line(report: Report) -> str:
    """What the budget tried would have saved, in words (US dollars, to the cent)."""
    share = report.saved_usd / report.cost_usd if report.cost_usd else 0.0
    return (
        f"Spend: the sessions with a cost spent {usd(report.cost_usd)}; stopped where this "
        f"budget stops them, they would have saved {usd(report.saved_usd)} ({share:.0%})."
    )


def what_if(
    sessions: Iterable[tuple[StoredSession, Iterable[Event]]], replayer: Replayer
) -> Report:
    report = Report()
    for verdict in evaluate(sessions, replayer):
        report.add(verdict)
    return report
