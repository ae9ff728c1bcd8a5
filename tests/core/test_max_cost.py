"""max_cost: a seed 000 loop cap in US dollars, checked with >= after the round that spends it."""

from __future__ import annotations

import pytest

from ledger.core.budget import GATE, LOOP, Budget, BudgetError, Machine, State
from ledger.core.events import Event, meters_of
from ledger.core.reasons import DECISIONS, StopReason
from ledger.core.vendors import DEFAULT_VENDOR_MAP, classify


def run(costs: list[float | None], budget: Budget, families=(LOOP,)) -> State:
    machine, state = Machine(budget, families), State()
    for cost in costs:
        machine.advance(state, Event("round", cost=cost))
    return state


@pytest.mark.parametrize(
    ("costs", "cap", "stop_at"),
    [
        ([0.5, 0.5, 0.5], 1.0, 2),  # >=: the round that reaches the cap stops
        ([0.5, 0.4, 0.5], 1.0, 3),
        ([0.7, 0.1], 0.8, 2),  # 0.7 + 0.1 is 0.7999999999999999 in floats: rounded sums
        ([0.0], 0.0, 1),
        ([0.3, 0.3], 5.0, None),
    ],
)
def test_the_cap_trips_after_the_round_that_spends_it(costs, cap, stop_at) -> None:
    budget = Budget(max_rounds=None, max_cost=cap)
    state = run(costs, budget)
    assert state.stop_at == stop_at
    assert state.stop_reason == (StopReason.MAX_COST if stop_at else None)


def test_a_round_without_a_cost_cannot_trip_it_but_the_spend_is_kept() -> None:
    state = run([2.0, None, None], Budget(max_rounds=None, max_cost=5.0))
    assert (state.cost, state.stopped) == (2.0, False)
    state = run([None], Budget(max_cost=0))
    assert not state.stopped
    assert meters_of(Event("round", cost=0.1)) >= {"cost"}
    assert "cost" not in meters_of(Event("round", output_tokens=3))


def test_it_is_a_loop_cap_the_gate_family_never_applies() -> None:
    """Seed 002's checkpoints carry no usage and no cost: max_cost does not apply there."""
    state = run([9.0, 9.0], Budget(max_cost=1.0, max_steps=None), families=(GATE,))
    assert not state.stopped
    assert state.cost == 18.0  # counted all the same, so the row says what was spent


def test_the_stop_detail_reports_the_spend() -> None:
    state = run([1.25, 2.5], Budget(max_cost=3))
    assert state.stop_detail == "cost $3.7500 >= $3"


@pytest.mark.parametrize(("value", "parsed"), [("2.5", 2.5), ("3", 3.0), (4, 4.0), ("off", None)])
def test_the_key_takes_dollars_or_off(value, parsed) -> None:
    assert Budget.from_mapping({"max_cost": value}).max_cost == parsed


@pytest.mark.parametrize("value", ["-1", "lots", True])
def test_a_bad_value_is_refused(value) -> None:
    with pytest.raises(BudgetError, match="max_cost"):
        Budget.from_mapping({"max_cost": value})


def test_its_decision_table_row() -> None:
    row = DECISIONS[StopReason.MAX_COST]
    assert "usage field and a price you trust" in row.must_observe
    assert row.safe_action == "Stop and report the spend"
    assert row.fail_closed_if_missing == "The model has no price or the log has no usage"
    assert list(StopReason)[-1] is StopReason.MAX_COST  # appended: values are a contract


@pytest.mark.parametrize(
    "vendor",
    ["error_max_budget_usd", "budget_exhausted", "budget_limited", "sessionBudgetExceeded",
     "BudgetExceededError"],
)
def test_the_vendors_money_stops_map_to_it(vendor) -> None:
    assert classify(vendor, DEFAULT_VENDOR_MAP) is StopReason.MAX_COST
