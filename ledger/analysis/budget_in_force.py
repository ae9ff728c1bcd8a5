"""The budget a database was folded under, said where its stops are shown.

A stop reason means nothing without its budget: under the seeds' placeholder (``Budget()``:
8 steps, 45 s, ...) most real agent sessions "stop" on ``max_seconds`` or ``max_steps``
because the caps were never measured for that work. The ingest summary, the dashboard's
overview and ``paid-path`` therefore name the budget in force, say when it is the
placeholder, and point to ``propose-budget`` and ``--budget-file`` (docs/tuning.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from msgspec import Struct

from ledger.core.budget import Budget, BudgetError

PLACEHOLDER = "the seeds' placeholder, not measured for this work"
#: Where the summary and the reports send a reader whose budget was never measured.
NEXT_STEP = (
    "agent-ledger propose-budget {db} > budget.toml, then ingest again with "
    "--budget-file budget.toml"
)


class BudgetInForce(Struct, frozen=True):
    """One budget sessions were folded under: its caps as text, and how many sessions (a
    msgspec struct: an ingest's summary names it, and a frozen dataclass costs fifty times as
    much to make)."""

    caps: str
    placeholder: bool
    sessions: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"caps": self.caps, "placeholder": self.placeholder, "sessions": self.sessions}


def caps_text(budget: Budget) -> str:
    """``max_rounds=12, ..., max_seconds=45`` in the keys' order (``off`` for a cap off)."""
    return ", ".join(f"{key}={_value(value)}" for key, value in budget.to_dict().items())


def _value(value: float | None) -> str:
    if value is None:
        return "off"
    return str(int(value)) if float(value).is_integer() else str(value)


def of_budget(budget: Budget, sessions: int = 0) -> BudgetInForce:
    return BudgetInForce(caps_text(budget), budget == Budget(), sessions)


def in_force(stored: Iterable[tuple[str | None, int]]) -> list[BudgetInForce]:
    """The budgets of stored sessions (``sessions.budget`` JSON and a count), most used first;
    a budget this version cannot read is shown as stored, never taken for the placeholder."""
    found = []
    for text, sessions in stored:
        try:
            found.append(of_budget(Budget.from_mapping(json.loads(text or "")), sessions))
        except (ValueError, TypeError, BudgetError):
            found.append(BudgetInForce(str(text), False, sessions))
    return sorted(found, key=lambda b: (-b.sessions, b.caps))


def budget_lines(budgets: list[BudgetInForce], db_path: str) -> list[str]:
    """What the CLI prints: each budget in force, and the next step if one is the placeholder."""
    lines = []
    for b in budgets:
        count = f" ({b.sessions} sessions)" if len(budgets) > 1 else ""
        note = f" ({PLACEHOLDER})" if b.placeholder else ""
        lines.append(f"budget in force{count}: {b.caps}{note}")
    if any(b.placeholder for b in budgets):
        lines.append("  measure one: " + NEXT_STEP.format(db=db_path))
    return lines
