"""Seed 002's ``agent_budget`` on agent-ledger: the same gate, writing a native ledger.

``AgentBudget`` keeps the seed's constructor (arguments, order, defaults), attributes and
``checkpoint(action, detail)``; it raises :class:`BudgetExceeded` exactly where the seed raises,
with the seed's messages. What changes is the ledger: native events (``type: action``, a
session id, ``elapsed_s`` from the monotonic clock at full precision, ``ts``), appended whole
and with secrets redacted, so ``agent-ledger ingest`` replays the same stops. Two keyword
arguments are new: ``task_class`` and ``session`` (generated when not given).

As in the seed, the clock is ``time.monotonic()`` read at each checkpoint, and every
checkpoint is judged on its own: after a stop, a later step raises again only if a cap is
still exceeded (a blocked retry does not block the next read). The native
:class:`~ledger.live.recorder.Recorder` is stricter: once stopped, it stays stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ledger.core.budget import Budget
from ledger.live.recorder import BudgetExceeded, Recorder

__all__ = ["AgentBudget", "BudgetExceeded"]


@dataclass
class AgentBudget:
    max_steps: int = 8
    max_writes: int = 2
    max_seconds: float = 45.0
    ledger_path: Path = Path("agent_ledger.jsonl")
    started_at: float = field(default_factory=time.monotonic)
    steps: int = 0
    writes: int = 0
    task_class: str | None = None
    session: str | None = None

    def checkpoint(
        self,
        action: Literal["think", "read", "write", "retry"],
        detail: str,
    ) -> None:
        recorder = self._open()
        event = recorder.write("action", action=action, detail=detail)
        state = recorder.state
        self.steps, self.writes = state.steps, state.writes
        found = recorder.machine.check(state, event)
        if found is not None:
            raise BudgetExceeded(found[0], found[1], state.events, recorder.session)

    def _open(self) -> Recorder:
        """The session's recorder, made at the first checkpoint (not a field: ``asdict``,
        ``repr`` and ``==`` see only the seed's fields and ours)."""
        recorder: Recorder | None = getattr(self, "_recorder", None)
        if recorder is None:
            budget = Budget(
                max_steps=self.max_steps, max_writes=self.max_writes, max_seconds=self.max_seconds
            )
            # elapsed = time.monotonic() - started_at, read at call time, as in the seed.
            recorder = Recorder(
                self.ledger_path,
                session=self.session,
                task_class=self.task_class,
                budget=budget,
                clock=lambda: time.monotonic() - self.started_at,
                started_at=0.0,
            )
            self._recorder = recorder
            self.session = recorder.session
        return recorder
