# ruff: noqa
# Seed 002's agent_budget.py, verbatim (a test oracle).
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal


class BudgetExceeded(RuntimeError):
    pass


@dataclass
class AgentBudget:
    max_steps: int = 8
    max_writes: int = 2
    max_seconds: float = 45.0
    ledger_path: Path = Path('agent_ledger.jsonl')
    started_at: float = field(default_factory=time.monotonic)
    steps: int = 0
    writes: int = 0

    def checkpoint(
        self,
        action: Literal['think', 'read', 'write', 'retry'],
        detail: str,
    ) -> None:
        elapsed = time.monotonic() - self.started_at
        self.steps += 1
        if action == 'write':
            self.writes += 1
        record = {
            'step': self.steps,
            'action': action,
            'detail': detail,
            'writes': self.writes,
            'elapsed_s': round(elapsed, 3),
        }
        with self.ledger_path.open('a', encoding='utf-8') as fh:
            fh.write(json.dumps(record) + '\n')
        self._enforce(action, elapsed)

    def _enforce(self, action: str, elapsed: float) -> None:
        if self.steps > self.max_steps:
            raise BudgetExceeded(
                f'steps {self.steps} > {self.max_steps}'
            )
        if self.writes > self.max_writes:
            raise BudgetExceeded(
                f'writes {self.writes} > {self.max_writes}'
            )
        if elapsed > self.max_seconds:
            raise BudgetExceeded(
                f'elapsed {elapsed:.1f}s > {self.max_seconds}s'
            )
        if action == 'retry' and self.steps >= self.max_steps - 1:
            raise BudgetExceeded('retry blocked near step ceiling')
