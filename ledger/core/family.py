"""A family's budget: a parent session and its sub-agents counted as one stream.

With ``subagents_count_in_parent`` on (docs/budget.md), the steps of a parent session and of
every sub-agent session it started go through one budget :class:`~ledger.core.budget.Machine`,
ordered by timestamp (ties by session, then step order), and the first step at which the
family's totals trip a cap is the family's stop. The caps on a run of one session's own
behaviour (``max_consecutive_tool_errors``, ``no_progress_rounds``) stay with each session: an
interleaved stream would cut or join their runs, so the family counts only totals. The
family's elapsed time runs from its first step. Pure: stored or live ``steps`` rows in, the
stop out; the ingest (:mod:`ledger.db.family_stops`) and the hook (:mod:`ledger.live.hook`) ask
the same :class:`FamilyFold`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from ledger.core.budget import FAMILIES, Budget, Machine, State
from ledger.core.events import Event
from ledger.core.fold import STEP_COLUMNS, StepRow
from ledger.core.reasons import StopReason
from ledger.core.vendors import DEFAULT_VENDOR_MAP

#: Caps that measure a run of one session's own events: not counted over a family.
OWN_CAPS = {"max_consecutive_tool_errors": None, "no_progress_rounds": None}
#: The ``steps`` columns a family step is made of, in this order (a stored row is selected so).
COLUMNS = (
    "session_id", "idx", "ts", "action", "tool_calls", "output_tokens", "tool_error",
    "vendor_stop", "same_round", "cost_usd",
)
_PICK = tuple(STEP_COLUMNS.index(c) for c in COLUMNS)

Key = tuple[str, str, int]  # (ts, session, idx): a step's place in its family's stream


def family_budget(budget: Budget) -> Budget:
    """The caps a family is held to: ``budget`` without the caps on one session's runs."""
    return replace(budget, **OWN_CAPS)


def family_row(row: StepRow) -> tuple[Any, ...]:
    """A live ``steps`` row (:data:`~ledger.core.fold.STEP_COLUMNS`) cut to :data:`COLUMNS`."""
    return tuple(row[i] for i in _PICK)


def key_of(row: tuple[Any, ...]) -> Key:
    """A family row's place in the stream: by timestamp, then session, then step order."""
    return (row[2] or "", row[0], row[1])


class FamilyStop(Struct, frozen=True):
    session_id: str  # the member whose step tripped the cap
    idx: int  # that step, numbered in its own session (as ``steps.idx``)
    ts: str | None
    reason: StopReason
    detail: str
    events: int  # the family's events up to and with it

    @property
    def key(self) -> Key:
        return (self.ts or "", self.session_id, self.idx)


class FamilyFold(Struct):
    """The family's counters so far; resumable (:meth:`to_dict`), so the hook feeds it the
    steps each call reads and ends where one pass over all of them ends."""

    budget: Budget
    families: frozenset[str] = FAMILIES
    vendor_map: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_VENDOR_MAP))
    state: State = field(default_factory=State)
    t0: float | None = None
    stop: FamilyStop | None = None

    def feed(self, rows: Iterable[tuple[Any, ...]]) -> FamilyStop | None:
        """Apply family rows (:data:`COLUMNS`), in stream order; the family's stop, if any."""
        machine = Machine(family_budget(self.budget), self.families, self.vendor_map)
        for row in sorted(rows, key=key_of):
            sid, idx, ts, action, tool_calls, tokens, error, vendor, same, cost = row
            at = _seconds(ts)
            if at is not None and self.t0 is None:
                self.t0 = at
            event = Event(
                action, tool_calls, tokens, None, None if error is None else bool(error),
                vendor, ts=ts, same_round=bool(same), cost=cost,
                elapsed_s=None if at is None or self.t0 is None else round(at - self.t0, 3),
            )
            if machine.advance(self.state, event) is not None and self.stop is None:
                assert self.state.stop_reason is not None
                self.stop = FamilyStop(
                    sid, idx, ts, self.state.stop_reason, self.state.stop_detail or "",
                    self.state.events,
                )
        return self.stop

    def to_dict(self) -> dict[str, Any]:
        stop = self.stop
        return {
            "state": self.state.to_dict(), "t0": self.t0,
            "stop": None if stop is None else [
                stop.session_id, stop.idx, stop.ts, stop.reason.value, stop.detail, stop.events
            ],
        }

    @classmethod
    def resume(
        cls, data: Mapping[str, Any], budget: Budget, families: frozenset[str],
        vendor_map: Mapping[str, str],
    ) -> FamilyFold:
        stop = data.get("stop")
        return cls(
            budget, families, vendor_map,
            State.from_dict(data["state"]) if data else State(), data.get("t0"),
            None if not stop else FamilyStop(
                stop[0], stop[1], stop[2], StopReason(stop[3]), stop[4], stop[5]
            ),
        )


def family_stop(
    rows: Iterable[tuple[Any, ...]], budget: Budget, families: frozenset[str] = FAMILIES,
    vendor_map: Mapping[str, str] | None = None,
) -> FamilyStop | None:
    """The first step at which the family's totals trip a cap, of all its rows at once."""
    return FamilyFold(budget, families, vendor_map or DEFAULT_VENDOR_MAP).feed(rows)


def _seconds(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None
