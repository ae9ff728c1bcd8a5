# Seed 002's test_agent_budget.py, verbatim but for the import line (ledger.compat).
# test_agent_budget.py
import time
from pathlib import Path

import pytest

from ledger.compat.agent_budget import AgentBudget, BudgetExceeded


def test_step_ceiling_fails_closed(tmp_path: Path) -> None:
    budget = AgentBudget(
        max_steps=2,
        max_writes=5,
        max_seconds=30,
        ledger_path=tmp_path / 'l.jsonl',
    )
    budget.checkpoint('read', 'a')
    budget.checkpoint('read', 'b')
    with pytest.raises(BudgetExceeded):
        budget.checkpoint('read', 'c')


def test_write_ceiling_is_stricter_than_reads(tmp_path: Path) -> None:
    budget = AgentBudget(
        max_steps=20,
        max_writes=1,
        max_seconds=30,
        ledger_path=tmp_path / 'l.jsonl',
    )
    budget.checkpoint('read', 'a')
    budget.checkpoint('write', 'b')
    with pytest.raises(BudgetExceeded):
        budget.checkpoint('write', 'c')


def test_retry_near_ceiling_is_blocked(tmp_path: Path) -> None:
    budget = AgentBudget(
        max_steps=3,
        max_writes=5,
        max_seconds=30,
        ledger_path=tmp_path / 'l.jsonl',
    )
    budget.checkpoint('read', 'a')
    budget.checkpoint('read', 'b')
    with pytest.raises(BudgetExceeded):
        budget.checkpoint('retry', 'b-again')


def test_wall_clock_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = AgentBudget(
        max_steps=50,
        max_writes=5,
        max_seconds=0.01,
        ledger_path=tmp_path / 'l.jsonl',
    )
    monkeypatch.setattr(
        time, 'monotonic', lambda: budget.started_at + 1.0
    )
    with pytest.raises(BudgetExceeded):
        budget.checkpoint('think', 'late')
