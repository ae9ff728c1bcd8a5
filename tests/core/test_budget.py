"""The budget state machine, specified against both seeds.

Every rule is checked three ways: the seeds' own tests translated to this API, a decision
table of minimal inputs per stop reason (with both boundaries), and hypothesis properties that
run the seeds' own code (tests/seeds/) side by side with the machine on random inputs.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.budget import GATE, LOOP, Budget, BudgetError, Machine, State
from ledger.core.events import Event
from ledger.core.reasons import SEED_VENDOR_MAP, StopReason
from tests.seeds import agent_budget as seed002
from tests.seeds import loop_budget as seed000

R = StopReason


def rnd(tools: int = 0, tokens: int = 0, obs: str | None = "", error: bool = False,
        vendor: str | None = None) -> Event:
    return Event("round", tool_calls=tools, output_tokens=tokens, observation=obs,
                 tool_error=error, vendor_stop=vendor)


def act(action: str, elapsed: float | None = 0.0, detail: str = "") -> Event:
    return Event(action, detail=detail, elapsed_s=elapsed)


def run(events: list[Event], budget: Budget | None = None,
        families: frozenset[str] = frozenset({LOOP, GATE})) -> State:
    machine = Machine(budget or Budget(), families, SEED_VENDOR_MAP)
    state = State()
    for event in events:
        machine.advance(state, event)
    return state


LOOP_ONLY = frozenset({LOOP})
GATE_ONLY = frozenset({GATE})


# --- the seeds' own tests, translated ---------------------------------------------------------


def test_unknown_vendor_fails_closed() -> None:
    state = run([rnd(vendor="policy_hidden_v3")], families=LOOP_ONLY)
    assert state.stop_reason is R.UNKNOWN_VENDOR


def test_repeated_observation_is_no_progress() -> None:
    state = run([rnd(1, 10, "same"), rnd(1, 10, "same")], Budget(no_progress_rounds=2), LOOP_ONLY)
    assert state.stop_reason is R.NO_PROGRESS
    assert state.stop_at == 2


def test_seed_trace_stops_on_no_progress_at_round_three() -> None:
    trace = [
        rnd(1, 400, "found 3 call sites"),
        rnd(2, 900, "patched api.py; tests still import getUser"),
        rnd(1, 200, "patched api.py; tests still import getUser", vendor="empty_assistant"),
    ]
    state = run(trace, Budget(no_progress_rounds=2), LOOP_ONLY)
    assert (state.stop_reason, state.stop_at) == (R.NO_PROGRESS, 3)


def test_step_ceiling_fails_closed() -> None:
    state = run([act("read"), act("read"), act("read")],
                Budget(max_steps=2, max_writes=5, max_seconds=30), GATE_ONLY)
    assert (state.stop_reason, state.stop_at) == (R.MAX_STEPS, 3)


def test_write_ceiling_is_stricter_than_reads() -> None:
    state = run([act("read"), act("write"), act("write")],
                Budget(max_steps=20, max_writes=1, max_seconds=30), GATE_ONLY)
    assert (state.stop_reason, state.stop_at) == (R.MAX_WRITES, 3)


def test_retry_near_ceiling_is_blocked() -> None:
    state = run([act("read"), act("read"), act("retry")],
                Budget(max_steps=3, max_writes=5, max_seconds=30), GATE_ONLY)
    assert (state.stop_reason, state.stop_at) == (R.RETRY_NEAR_CEILING, 3)


def test_wall_clock_fails_closed() -> None:
    state = run([act("think", elapsed=1.0)],
                Budget(max_steps=50, max_writes=5, max_seconds=0.01), GATE_ONLY)
    assert (state.stop_reason, state.stop_at) == (R.MAX_SECONDS, 1)


# --- decision table: one minimal input per reason, at the boundary ---------------------------

DEFAULT_CASES = [
    # (events, families, expected reason, expected stop_at)
    ([rnd(obs=str(i)) for i in range(12)], LOOP_ONLY, R.MAX_ROUNDS, 12),
    ([rnd(obs=str(i)) for i in range(11)], LOOP_ONLY, None, None),
    ([rnd(12, obs="a"), rnd(12, obs="b")], LOOP_ONLY, R.MAX_TOOL_CALLS, 2),
    ([rnd(12, obs="a"), rnd(11, obs="b")], LOOP_ONLY, None, None),
    ([rnd(tokens=32_000)], LOOP_ONLY, R.MAX_OUTPUT_TOKENS, 1),
    ([rnd(tokens=31_999)], LOOP_ONLY, None, None),
    ([rnd(obs="a", error=True), rnd(obs="b", error=True), rnd(obs="c", error=True)],
     LOOP_ONLY, R.TOOL_ERROR_BUDGET, 3),
    ([rnd(obs="a", error=True), rnd(obs="b", error=True), rnd(obs="c"),
      rnd(obs="d", error=True)], LOOP_ONLY, None, None),
    ([rnd(obs="x"), rnd(obs="x")], LOOP_ONLY, R.NO_PROGRESS, 2),
    ([rnd(obs="x"), rnd(obs="y"), rnd(obs="x")], LOOP_ONLY, None, None),
    ([rnd(obs="a", vendor="completed")], LOOP_ONLY, None, None),  # mapped: not a stop
    ([rnd(obs="a", vendor="whatever_v9")], LOOP_ONLY, R.UNKNOWN_VENDOR, 1),
    ([act("read")] * 9, GATE_ONLY, R.MAX_STEPS, 9),
    ([act("read")] * 8, GATE_ONLY, None, None),
    ([act("write")] * 3, GATE_ONLY, R.MAX_WRITES, 3),
    ([act("write")] * 2, GATE_ONLY, None, None),
    ([act("think", 45.001)], GATE_ONLY, R.MAX_SECONDS, 1),
    ([act("think", 45.0)], GATE_ONLY, None, None),
    ([act("read")] * 6 + [act("retry")], GATE_ONLY, R.RETRY_NEAR_CEILING, 7),
    ([act("read")] * 5 + [act("retry")], GATE_ONLY, None, None),
]


@pytest.mark.parametrize(("events", "families", "reason", "stop_at"), DEFAULT_CASES)
def test_decision_table_with_default_budget(events, families, reason, stop_at) -> None:
    state = run(events, Budget(), families)
    assert (state.stop_reason, state.stop_at) == (reason, stop_at)


def test_seed_000_order_unknown_vendor_wins_over_caps() -> None:
    state = run([rnd(tools=30, tokens=40_000, vendor="nope")], families=LOOP_ONLY)
    assert state.stop_reason is R.UNKNOWN_VENDOR


def test_seed_000_order_rounds_before_tool_calls_before_tokens() -> None:
    budget = Budget(max_rounds=1, max_tool_calls=1, max_output_tokens=1)
    assert run([rnd(5, 5)], budget, LOOP_ONLY).stop_reason is R.MAX_ROUNDS
    budget = Budget(max_rounds=9, max_tool_calls=1, max_output_tokens=1)
    assert run([rnd(5, 5)], budget, LOOP_ONLY).stop_reason is R.MAX_TOOL_CALLS


def test_seed_002_order_steps_before_writes_before_seconds_before_retry() -> None:
    budget = Budget(max_steps=0, max_writes=0, max_seconds=0.0)
    assert run([act("write", 1.0)], budget, GATE_ONLY).stop_reason is R.MAX_STEPS
    budget = Budget(max_steps=5, max_writes=0, max_seconds=0.0)
    assert run([act("write", 1.0)], budget, GATE_ONLY).stop_reason is R.MAX_WRITES


def test_a_gate_ledger_is_not_cut_by_loop_caps() -> None:
    events = [act("read") for _ in range(8)]
    assert run(events, Budget(max_rounds=1, max_steps=8), GATE_ONLY).stop_reason is None


def test_a_trace_is_not_cut_by_gate_caps() -> None:
    events = [rnd(obs=str(i)) for i in range(11)]
    assert run(events, Budget(max_steps=2), LOOP_ONLY).stop_reason is None


def test_native_events_are_held_to_both_families() -> None:
    events = [rnd(obs="a"), act("write"), act("write"), act("write")]
    state = run(events, Budget())
    assert (state.stop_reason, state.stop_at) == (R.MAX_WRITES, 4)
    assert (state.rounds, state.steps, state.writes) == (1, 4, 3)


def test_markers_are_not_steps() -> None:
    state = run([Event("start"), act("read"), Event("end", outcome="task_complete")],
                Budget(max_steps=1))
    assert (state.events, state.steps, state.stop_reason) == (3, 1, None)


def more(tools: int | None = None, tokens: int | None = None, obs: str | None = None,
         error: bool | None = None) -> Event:
    """An event that continues the current round (a later line of the same response)."""
    return Event("round", tool_calls=tools, output_tokens=tokens, observation=obs,
                 tool_error=error, same_round=True)


def test_a_continuation_adds_to_the_round_without_a_new_round_or_step() -> None:
    state = run([rnd(1, 10), more(tools=2, tokens=5), more(obs="result", error=True)])
    assert (state.rounds, state.steps, state.events) == (1, 1, 3)
    assert (state.tool_calls, state.output_tokens, state.tool_errors) == (3, 15, 1)


def test_a_continuation_is_held_to_the_loop_caps() -> None:
    state = run([rnd(1), more(tools=1), more(tools=1)], Budget(max_tool_calls=3), LOOP_ONLY)
    assert (state.stop_reason, state.stop_at) == (R.MAX_TOOL_CALLS, 3)
    errors = [rnd(1), more(obs="a", error=True), more(obs="b", error=True)]
    state = run(errors, Budget(max_consecutive_tool_errors=2), LOOP_ONLY)
    assert (state.stop_reason, state.stop_at) == (R.TOOL_ERROR_BUDGET, 3)
    same = [rnd(1), more(obs="x"), more(obs="x")]
    assert run(same, Budget(no_progress_rounds=2), LOOP_ONLY).stop_reason is R.NO_PROGRESS


def test_a_continuation_takes_no_step_of_the_gate() -> None:
    events = [rnd(1)] + [more(tools=1)] * 20
    state = run(events, Budget(max_steps=1, max_tool_calls=None))
    assert (state.steps, state.stop_reason) == (1, None)


def test_events_after_the_stop_are_counted_but_cannot_stop_again() -> None:
    state = run([act("write")] * 5, Budget(max_writes=1), GATE_ONLY)
    assert (state.stop_reason, state.stop_at, state.writes, state.events) == (
        R.MAX_WRITES, 2, 5, 5)


def test_absent_meters_are_not_measured() -> None:
    # No observation field: no-progress cannot be judged; no tool_error field: no reset.
    events = [rnd(obs=None, error=True), rnd(obs=None), rnd(obs=None, error=True)]
    events[1].tool_error = None
    state = run(events, Budget(max_consecutive_tool_errors=2), LOOP_ONLY)
    assert (state.stop_reason, state.stop_at) == (R.TOOL_ERROR_BUDGET, 3)
    assert state.last_observation_hash is None


def test_a_cap_switched_off_never_trips() -> None:
    assert run([act("read")] * 50, Budget(max_steps=None), GATE_ONLY).stop_reason is None


def test_stop_detail_says_which_numbers() -> None:
    assert run([act("read")] * 9, families=GATE_ONLY).stop_detail == "steps 9 > 8"
    assert run([rnd(tokens=40_000)], families=LOOP_ONLY).stop_detail == (
        "output tokens 40000 >= 32000")


# --- budgets --------------------------------------------------------------------------------


def test_defaults_are_the_seeds() -> None:
    assert Budget().to_dict() == {
        "max_rounds": 12, "max_tool_calls": 24, "max_output_tokens": 32_000,
        "max_consecutive_tool_errors": 3, "no_progress_rounds": 2, "max_cost": None,
        "max_steps": 8, "max_writes": 2, "max_seconds": 45.0,
    }


@pytest.mark.parametrize(
    ("pairs", "expected"),
    [
        (["max_rounds=20"], {"max_rounds": 20}),
        (["max_seconds=90"], {"max_seconds": 90.0}),
        (["max_seconds=0.5"], {"max_seconds": 0.5}),
        (["max_steps=off"], {"max_steps": None}),
        (["max_output_tokens=100_000"], {"max_output_tokens": 100_000}),
        ([" max_writes = 0 "], {"max_writes": 0}),
    ],
)
def test_budget_from_assignments(pairs, expected) -> None:
    budget = Budget.from_assignments(pairs)
    for key, value in expected.items():
        assert getattr(budget, key) == value


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["max_round=3"], "unknown budget key 'max_round'"),
        (["max_rounds"], "expected KEY=VALUE"),
        (["max_rounds=three"], "max_rounds must be a number"),
        (["max_rounds=1.5"], "max_rounds must be a whole number"),
        (["max_rounds=-1"], "must be 0 or more"),
        (["no_progress_rounds=0"], "no_progress_rounds must be 1 or more"),
        # a NaN cap never trips, an infinite one is 'off' in disguise: both refused
        (["max_cost=nan"], "max_cost must be a finite number or 'off', not nan"),
        (["max_cost=inf"], "max_cost must be a finite number or 'off', not inf"),
        (["max_seconds=-inf"], "max_seconds must be a finite number"),
    ],
)
def test_bad_budgets_are_refused_with_a_reason(pairs, message) -> None:
    with pytest.raises(BudgetError, match=message):
        Budget.from_assignments(pairs)


def test_budget_digest_tells_budgets_apart() -> None:
    assert Budget().digest == Budget().digest
    assert Budget().digest != Budget(max_rounds=13).digest


def test_state_round_trips_through_a_dict() -> None:
    state = run([rnd(2, 10, "x"), rnd(1, 5, "x")], families=LOOP_ONLY)
    assert State.from_dict(json.loads(json.dumps(state.to_dict()))) == state


# --- parity with the seeds' own code, on random inputs ---------------------------------------

vendor_strings = st.one_of(
    st.none(), st.just(""), st.sampled_from(sorted(SEED_VENDOR_MAP)),
    st.text(min_size=1, max_size=8),
)
trace_rounds = st.lists(
    st.fixed_dictionaries(
        {
            "tool_calls": st.lists(st.fixed_dictionaries({"name": st.just("t")}), max_size=6),
            "output_tokens": st.integers(0, 9_000),
            "observation": st.sampled_from(["", "a", "b", "same", "other"]),
            "tool_error": st.booleans(),
        },
        optional={"vendor_stop": vendor_strings},
    ),
    max_size=30,
)
loop_budgets = st.builds(
    Budget,
    max_rounds=st.integers(1, 20),
    max_tool_calls=st.integers(1, 60),
    max_output_tokens=st.integers(1, 60_000),
    max_consecutive_tool_errors=st.integers(1, 5),
    no_progress_rounds=st.integers(1, 4),
)


def seed000_stop(rounds: list[dict], budget: Budget) -> tuple[str, int | None]:
    """Seed 000's replay_trace, plus the round it stopped at (counted by its own state)."""
    seed_budget = seed000.LoopBudget(
        max_rounds=budget.max_rounds, max_tool_calls=budget.max_tool_calls,
        max_output_tokens=budget.max_output_tokens,
        max_consecutive_tool_errors=budget.max_consecutive_tool_errors,
        no_progress_rounds=budget.no_progress_rounds,
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        path.write_text(json.dumps({"task": "t", "rounds": rounds}))
        reason = seed000.replay_trace(str(path), seed_budget)
    state = seed000.LoopState()
    for event in rounds:
        seed000.apply_round(state, tools=len(event.get("tool_calls", [])),
                            tokens=int(event.get("output_tokens") or 0),
                            observation=event.get("observation") or "",
                            tool_error=bool(event.get("tool_error")))
        state.vendor_stop = event.get("vendor_stop")
        if seed000.should_stop(seed_budget, state):
            return reason.value, state.rounds
    return reason.value, None


@settings(max_examples=400, deadline=None)
@given(rounds=trace_rounds, budget=loop_budgets)
def test_trace_replay_matches_seed_000(rounds, budget) -> None:
    from ledger.formats.seed_dialects import trace_rounds as parse_trace

    _, records = parse_trace({"task": "t", "rounds": rounds})
    events = [record.event for _, record in records]
    state = run(events, budget, LOOP_ONLY)
    reason = (state.stop_reason or R.TASK_COMPLETE).value
    assert (reason, state.stop_at) == seed000_stop(rounds, budget)


gate_actions = st.lists(
    st.tuples(st.sampled_from(["think", "read", "write", "retry"]),
              st.integers(0, 60_000).map(lambda ms: ms / 1000)),
    max_size=20,
).map(lambda xs: [(a, t) for a, t in sorted(xs, key=lambda x: x[1])])
gate_budgets = st.builds(
    Budget,
    max_steps=st.integers(0, 12),
    max_writes=st.integers(0, 4),
    max_seconds=st.integers(0, 60_000).map(lambda ms: ms / 1000),
)


def seed002_run(actions: list[tuple[str, float]], budget: Budget, ledger: Path,
                monkeypatch: pytest.MonkeyPatch) -> tuple[str, int] | None:
    """Drive seed 002's AgentBudget; it writes the ledger; return where it raised and why."""
    gate = seed002.AgentBudget(max_steps=budget.max_steps, max_writes=budget.max_writes,
                               max_seconds=budget.max_seconds, ledger_path=ledger)
    # Start the clock at 0 so that monotonic() - started_at is exactly the elapsed time the
    # ledger records (it rounds to milliseconds: a stop decided by less than that cannot be
    # told from the ledger, by the seed or by us).
    gate.started_at = 0.0
    for action, elapsed in actions:
        monkeypatch.setattr(time, "monotonic", lambda e=elapsed: e)
        try:
            gate.checkpoint(action, f"tool:{action}")
        except seed002.BudgetExceeded as exc:
            message = str(exc)
            reason = (
                "max_steps" if message.startswith("steps") else
                "max_writes" if message.startswith("writes") else
                "max_seconds" if message.startswith("elapsed") else
                "retry_near_ceiling"
            )
            return reason, gate.steps
    return None


@settings(max_examples=300, deadline=None)
@given(actions=gate_actions, budget=gate_budgets)
def test_gate_replay_matches_seed_002(actions, budget) -> None:
    from ledger.formats.seed_dialects import gate_record

    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "agent_ledger.jsonl"
        raised = seed002_run(actions, budget, ledger, mp)
        written = ledger.read_text().splitlines() if ledger.exists() else []
    events = [gate_record(json.loads(line)).event for line in written]
    state = run(events, budget, GATE_ONLY)
    ours = (state.stop_reason.value, state.stop_at) if state.stop_reason else None
    assert ours == raised


@settings(max_examples=200, deadline=None)
@given(rounds=trace_rounds, budget=loop_budgets)
def test_replay_is_deterministic(rounds, budget) -> None:
    from ledger.formats.seed_dialects import trace_rounds as parse_trace

    def once() -> dict:
        _, records = parse_trace({"task": "t", "rounds": rounds})
        return run([r.event for _, r in records], budget).to_dict()

    assert once() == once()


@pytest.mark.parametrize(
    "budget",
    [Budget(max_rounds=0), Budget(max_tool_calls=0), Budget(max_output_tokens=0),
     Budget(max_consecutive_tool_errors=0)],
)
def test_a_zero_loop_cap_does_not_trip_on_an_action_that_measured_nothing(budget) -> None:
    assert run([act("read"), act("think")], budget).stop_reason is None


def test_a_zero_round_cap_trips_on_the_first_round() -> None:
    state = run([act("read"), rnd(obs="a")], Budget(max_rounds=0))
    assert (state.stop_reason, state.stop_at) == (R.MAX_ROUNDS, 2)


def test_a_string_mapped_to_unknown_vendor_fails_closed() -> None:
    machine = Machine(Budget(), LOOP_ONLY, {**SEED_VENDOR_MAP, "weird": "unknown_vendor"})
    state = State()
    assert machine.advance(state, rnd(vendor="weird")) is R.UNKNOWN_VENDOR
