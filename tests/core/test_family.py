"""The family fold: a parent and its sub-agents counted as one stream (ledger.core.family)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.budget import Budget, Machine, State
from ledger.core.events import Event
from ledger.core.family import FamilyFold, family_budget, family_stop, key_of
from ledger.core.reasons import StopReason

OFF = {key: None for key in Budget.keys()}


def step(sid: str, idx: int, second: int, action: str = "read", **kw: Any) -> tuple[Any, ...]:
    """A family row (ledger.core.family.COLUMNS)."""
    return (
        sid, idx, f"2026-01-01T00:00:{second:02d}+00:00", action, kw.get("tool_calls"),
        kw.get("output_tokens"), kw.get("tool_error"), kw.get("vendor_stop"),
        kw.get("same_round", 0), kw.get("cost"),
    )


P, A, B = "p", "p:agent-a", "p:agent-b"
#: parent, sub-agent a and sub-agent b interleaved: p1 a1 p2 a2 b1 p3
FAMILY = [
    step(P, 1, 0), step(A, 1, 1, "write"), step(P, 2, 2, "round", tool_calls=2,
                                                  output_tokens=100),
    step(A, 2, 3, "round", tool_calls=1, output_tokens=50, cost=0.2), step(B, 1, 4, "write"),
    step(P, 3, 5, "round", tool_calls=1, output_tokens=10, cost=0.3),
]

CASES = {
    # caps: (reason, session, idx) of the family stop, or None
    "no caps": (OFF, None),
    "max_steps=3: the 4th step of the family (a's 2nd)": (
        {**OFF, "max_steps": 3}, (StopReason.MAX_STEPS, A, 2)),
    "max_writes=1: b's write is the family's 2nd": (
        {**OFF, "max_writes": 1}, (StopReason.MAX_WRITES, B, 1)),
    "max_tool_calls=3: a's round brings the family to 3": (
        {**OFF, "max_tool_calls": 3}, (StopReason.MAX_TOOL_CALLS, A, 2)),
    "max_output_tokens=150": ({**OFF, "max_output_tokens": 150},
                              (StopReason.MAX_OUTPUT_TOKENS, A, 2)),
    "max_rounds=3": ({**OFF, "max_rounds": 3}, (StopReason.MAX_ROUNDS, P, 3)),
    "max_cost=0.5": ({**OFF, "max_cost": 0.5}, (StopReason.MAX_COST, P, 3)),
    "max_seconds=3: from the family's first step": (
        {**OFF, "max_seconds": 3.0}, (StopReason.MAX_SECONDS, B, 1)),
    "max_steps=6: the family never exceeds it": ({**OFF, "max_steps": 6}, None),
}


@pytest.mark.parametrize(("caps", "expected"), CASES.values(), ids=CASES.keys())
def test_the_family_stops_where_its_totals_trip_a_cap(
    caps: dict[str, Any], expected: tuple[StopReason, str, int] | None
) -> None:
    stop = family_stop(reversed(FAMILY), Budget(**caps))  # any order in: sorted by time
    assert (None if stop is None else (stop.reason, stop.session_id, stop.idx)) == expected


def test_the_runs_of_one_session_stay_its_own() -> None:
    budget = Budget(**{**OFF, "max_consecutive_tool_errors": 1, "no_progress_rounds": 1})
    errors = [step(A, 1, 0, tool_error=1), step(A, 2, 1, tool_error=1)]
    assert family_stop(errors, budget) is None
    assert family_budget(budget) == Budget(**OFF)


def test_ties_go_by_session_then_step() -> None:
    rows = [step(B, 1, 0), step(A, 2, 0), step(A, 1, 0)]
    assert [key_of(r)[1:] for r in sorted(rows, key=key_of)] == [(A, 1), (A, 2), (B, 1)]
    stop = family_stop(rows, Budget(**{**OFF, "max_steps": 1}))
    assert stop is not None and (stop.session_id, stop.idx, stop.events) == (A, 2, 2)


def test_fed_in_pieces_it_ends_as_in_one_go() -> None:
    budget = Budget(**{**OFF, "max_steps": 4, "max_seconds": 60.0})
    fold = FamilyFold(budget)
    for i in range(0, len(FAMILY), 2):
        data = fold.to_dict()
        fold = FamilyFold.resume(data, budget, fold.families, fold.vendor_map)
        fold.feed(FAMILY[i:i + 2])
    assert fold.stop == family_stop(FAMILY, budget)
    assert fold.stop is not None and fold.stop.key == key_of(FAMILY[4])


def test_an_unmapped_vendor_stop_stops_the_family() -> None:
    rows = [step(P, 1, 0), step(A, 1, 1, "round", vendor_stop="gremlins")]
    stop = family_stop(rows, Budget(**OFF))
    assert stop is not None and (stop.reason, stop.session_id) == (StopReason.UNKNOWN_VENDOR, A)
    assert family_stop(rows[:1], Budget(**OFF)) is None


ACTIONS = st.sampled_from(["read", "write", "think", "retry", "round"])
MEMBER_STEPS = st.lists(
    st.tuples(ACTIONS, st.integers(0, 30), st.integers(0, 3), st.integers(0, 200),
              st.sampled_from([None, 0.0, 0.1, 0.25])),
    max_size=12,
)
CAPS = st.fixed_dictionaries({
    key: st.one_of(st.none(), st.integers(0, 8)) for key in
    ("max_steps", "max_writes", "max_tool_calls", "max_rounds")
} | {
    "max_output_tokens": st.one_of(st.none(), st.integers(0, 600)),
    "max_seconds": st.one_of(st.none(), st.floats(0, 40)),
    "max_cost": st.one_of(st.none(), st.floats(0, 1)),
    "max_consecutive_tool_errors": st.none(), "no_progress_rounds": st.none(),
})


def member(sid: str, steps: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [
        step(sid, i, second, action, tool_calls=calls if action == "round" else None,
             output_tokens=tokens if action == "round" else None,
             cost=cost if action == "round" else None)
        for i, (action, second, calls, tokens, cost) in enumerate(steps, 1)
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(MEMBER_STEPS, min_size=1, max_size=4), CAPS)
def test_the_family_stops_no_later_than_any_member_alone(
    members: list[list[tuple[Any, ...]]], caps: dict[str, Any]
) -> None:
    budget = Budget(**caps)
    rows = [r for n, steps in enumerate(members) for r in member(f"s{n}", steps)]
    together = family_stop(rows, budget)
    for n, steps in enumerate(members):
        alone = family_stop(member(f"s{n}", steps), budget)
        if alone is not None:
            assert together is not None and together.key <= alone.key


@settings(max_examples=200, deadline=None)
@given(MEMBER_STEPS, CAPS)
def test_a_family_of_one_is_the_session_under_the_machine(
    steps: list[tuple[Any, ...]], caps: dict[str, Any]
) -> None:
    """With no sub-agents the family's stop is the one the machine gives the session."""
    budget = Budget(**caps)
    rows = sorted(member(P, steps), key=key_of)
    state, machine, t0 = State(), Machine(budget), None
    expected = None
    for row in rows:
        at = int(row[2][17:19])
        t0 = at if t0 is None else t0
        event = Event(row[3], row[4], row[5], cost=row[9], elapsed_s=float(at - t0))
        if machine.advance(state, event) is not None:
            expected = (state.stop_reason, row[1])
    stop = family_stop(rows, budget)
    assert (None if stop is None else (stop.reason, stop.idx)) == expected
