"""ledger.compat.agent_budget raises where seed 002's AgentBudget raises, and writes a native
ledger whose replay stops at the same step."""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings

from ledger.compat import agent_budget as compat
from ledger.core.budget import Budget
from ledger.core.reasons import StopReason
from ledger.ingest.files import LedgerPathError
from ledger.ingest.options import Options
from ledger.ingest.replay import replay
from tests.core.test_budget import gate_actions, gate_budgets
from tests.seeds import agent_budget as seed


def test_the_constructor_keeps_the_seeds_arguments_and_defaults() -> None:
    theirs = [(f.name, f.default, f.default_factory) for f in dataclasses.fields(seed.AgentBudget)]
    ours = [(f.name, f.default, f.default_factory)
            for f in dataclasses.fields(compat.AgentBudget) if f.init]
    assert ours[: len(theirs)] == theirs
    assert [name for name, *_ in ours[len(theirs):]] == ["task_class", "session"]
    assert issubclass(compat.BudgetExceeded, RuntimeError)


def test_it_writes_native_events_that_ingest_replays(tmp_path: Path) -> None:
    ledger = tmp_path / "agent_ledger.jsonl"
    gate = compat.AgentBudget(max_steps=3, ledger_path=ledger, task_class="docs")
    gate.checkpoint("think", "plan password=hunter2")
    gate.checkpoint("read", "tool:read")
    with pytest.raises(compat.BudgetExceeded, match="retry blocked near step ceiling") as raised:
        gate.checkpoint("retry", "tool:read")
    assert (raised.value.reason, raised.value.at) == (StopReason.RETRY_NEAR_CEILING, 3)
    events = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [(e["type"], e["action"], e["session"]) for e in events] == [
        ("action", "think", gate.session), ("action", "read", gate.session),
        ("action", "retry", gate.session)]
    assert events[0]["task_class"] == "docs"
    assert events[0]["detail"] == "plan password=[REDACTED:secret-assignment]"
    assert (gate.steps, gate.writes) == (3, 0)
    assert dataclasses.asdict(gate)["steps"] == 3 and "AgentBudget(max_steps=3" in repr(gate)
    [(rows, errors)] = replay([ledger], Options(budget=Budget(max_steps=3)))
    assert errors == []
    assert [(r["stop_reason"], r["stop_at"], r["task_class"]) for r in rows] == [
        ("retry_near_ceiling", 3, "docs")]


def test_a_seed_ledger_at_the_same_path_is_not_mixed_with_native_events(tmp_path) -> None:
    ledger = tmp_path / "agent_ledger.jsonl"
    seed.AgentBudget(ledger_path=ledger).checkpoint("think", "old run")
    with pytest.raises(LedgerPathError, match="a gate ledger"):
        compat.AgentBudget(ledger_path=ledger).checkpoint("think", "new run")


def drive(module, actions, budget: Budget, ledger: Path, mp: pytest.MonkeyPatch) -> list:
    """Every checkpoint's outcome (the message it raised, or None) and the counters after it."""
    gate = module.AgentBudget(max_steps=budget.max_steps, max_writes=budget.max_writes,
                              max_seconds=budget.max_seconds, ledger_path=ledger)
    gate.started_at = 0.0
    outcomes = []
    for action, elapsed in actions:
        mp.setattr(time, "monotonic", lambda e=elapsed: e)
        try:
            gate.checkpoint(action, f"tool:{action}")
            outcomes.append((None, gate.steps, gate.writes))
        except module.BudgetExceeded as exc:
            outcomes.append((str(exc), gate.steps, gate.writes))
    return outcomes


@settings(max_examples=200, deadline=None)
@given(actions=gate_actions, budget=gate_budgets)
def test_it_raises_exactly_where_the_seed_raises(actions, budget) -> None:
    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory() as tmp:
        ours = drive(compat, actions, budget, Path(tmp) / "ours.jsonl", mp)
        theirs = drive(seed, actions, budget, Path(tmp) / "seed.jsonl", mp)
        mp.undo()
        assert ours == theirs
        if not actions:
            return
        [(rows, errors)] = replay([Path(tmp) / "ours.jsonl"], Options(budget=budget))
    first = next(((step, raised) for step, (raised, *_) in enumerate(ours, 1) if raised),
                 (None, None))
    assert errors == []
    assert (rows[0]["stop_at"], rows[0]["stop_detail"]) == first
