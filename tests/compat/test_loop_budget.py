"""ledger.compat.loop_budget behaves as seed 000's loop_budget, on random rounds and budgets."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings

from ledger.compat import loop_budget as compat
from ledger.core.budget import Budget, BudgetError
from tests.core.test_budget import loop_budgets, trace_rounds
from tests.helpers import SAMPLES
from tests.seeds import loop_budget as seed


def both(budget: Budget) -> tuple[compat.LoopBudget, seed.LoopBudget]:
    values = {f.name: getattr(budget, f.name) for f in dataclasses.fields(seed.LoopBudget)}
    return compat.LoopBudget(**values), seed.LoopBudget(**values)


def test_the_api_has_the_seeds_names_fields_and_defaults() -> None:
    for name in ("LoopBudget", "LoopState"):
        ours, theirs = getattr(compat, name), getattr(seed, name)
        assert [(f.name, f.default) for f in dataclasses.fields(ours)] == [
            (f.name, f.default) for f in dataclasses.fields(theirs)]
    assert compat.LoopBudget.__dataclass_params__.frozen


def test_stop_reason_is_ours_with_the_seeds_values() -> None:
    from ledger.core.reasons import StopReason

    assert compat.StopReason is StopReason
    for member in seed.StopReason:
        assert compat.StopReason[member.name] == member.value


@settings(max_examples=200, deadline=None)
@given(rounds=trace_rounds, budget=loop_budgets)
def test_apply_round_and_should_stop_match_the_seed_round_by_round(rounds, budget) -> None:
    ours_budget, seed_budget = both(budget)
    ours, theirs = compat.LoopState(), seed.LoopState()
    for event in rounds:
        for module, state in ((compat, ours), (seed, theirs)):
            module.apply_round(
                state, tools=len(event["tool_calls"]), tokens=event["output_tokens"],
                observation=event["observation"], tool_error=event["tool_error"],
            )
            state.vendor_stop = event.get("vendor_stop")
        got, expected = compat.should_stop(ours_budget, ours), seed.should_stop(seed_budget, theirs)
        assert (got.value if got else None) == (expected.value if expected else None)
        assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)


@settings(max_examples=100, deadline=None)
@given(rounds=trace_rounds, budget=loop_budgets)
def test_replay_trace_matches_the_seed(rounds, budget) -> None:
    ours_budget, seed_budget = both(budget)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        path.write_text(json.dumps({"task": "t", "rounds": rounds}))
        got = compat.replay_trace(str(path), ours_budget)
        assert got.value == seed.replay_trace(str(path), seed_budget).value


def test_replay_trace_of_the_seed_fixture_is_no_progress() -> None:
    path = str(SAMPLES / "seed-trace.json")
    budget = compat.LoopBudget(no_progress_rounds=2)
    assert compat.replay_trace(path, budget) is compat.StopReason.NO_PROGRESS


def test_a_round_the_seed_cannot_read_raises(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"rounds": [{"output_tokens": "many"}]}))
    with pytest.raises(ValueError, match="output_tokens"):
        compat.replay_trace(str(path), compat.LoopBudget())


def test_budgets_the_seed_would_misread_are_refused() -> None:
    with pytest.raises(BudgetError, match="no_progress_rounds must be 1 or more"):
        compat.should_stop(compat.LoopBudget(no_progress_rounds=0), compat.LoopState())
