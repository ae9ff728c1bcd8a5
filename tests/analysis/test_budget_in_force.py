"""The budget in force, named wherever stops are counted: the ingest summary, ``paid-path``
and the overview (ledger/analysis/budget_in_force.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.analysis.budget_in_force import BudgetInForce, budget_lines, caps_text, in_force
from ledger.cli import cli
from ledger.core.budget import Budget
from tests.helpers import REAL_LOGS

PLACEHOLDER = Budget()
MEASURED = Budget(max_steps=40, max_seconds=900.5, max_cost=2.0, max_writes=None)


def test_caps_are_named_in_the_keys_order_with_off() -> None:
    assert caps_text(MEASURED) == (
        "max_rounds=12, max_tool_calls=24, max_output_tokens=32000, "
        "max_consecutive_tool_errors=3, no_progress_rounds=2, max_cost=2, max_steps=40, "
        "max_writes=off, max_seconds=900.5"
    )


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ([(PLACEHOLDER.to_json(), 3)], [(True, 3)]),
        ([(MEASURED.to_json(), 2)], [(False, 2)]),
        ([(MEASURED.to_json(), 1), (PLACEHOLDER.to_json(), 5)], [(True, 5), (False, 1)]),
        ([("not json", 1), (None, 2)], [(False, 2), (False, 1)]),  # unreadable: shown as is
        ([('{"max_steps": 8, "max_rounds": 12}', 4)], [(True, 4)]),  # keys it omits: defaults
    ],
)
def test_stored_budgets_most_used_first(stored: list, expected: list) -> None:
    assert [(b.placeholder, b.sessions) for b in in_force(stored)] == expected


def test_the_placeholder_is_said_and_the_next_step_named() -> None:
    lines = budget_lines(in_force([(PLACEHOLDER.to_json(), 3)]), "my.db")
    assert lines[0].endswith("max_seconds=45 (the seeds' placeholder, not measured for this work)")
    assert lines[1] == (
        "  measure one: agent-ledger propose-budget my.db > budget.toml, then ingest again "
        "with --budget-file budget.toml"
    )
    measured = budget_lines([BudgetInForce(caps_text(MEASURED), False, 2)], "my.db")
    assert measured == [f"budget in force: {caps_text(MEASURED)}"]
    two = budget_lines(in_force([(MEASURED.to_json(), 1), (PLACEHOLDER.to_json(), 5)]), "d")
    assert [line.split(":")[0] for line in two] == [
        "budget in force (5 sessions)", "budget in force (1 sessions)", "  measure one",
    ]


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_summary_and_paid_path_name_the_budget(tmp_path: Path) -> None:
    db = str(tmp_path / "ledger.db")
    summary = run("ingest", db, str(REAL_LOGS))
    assert "(the seeds' placeholder, not measured for this work)" in summary
    assert f"agent-ledger propose-budget {db} > budget.toml" in summary
    paid = run("paid-path", db)
    assert paid.splitlines()[1].startswith("budget in force: max_rounds=12")
    assert "--budget-file budget.toml" in paid.splitlines()[2]
    found = json.loads(run("paid-path", db, "--json"))["budgets"]
    assert found == [{"caps": caps_text(PLACEHOLDER), "placeholder": True, "sessions": 6}]
    as_json = json.loads(run("ingest", db, str(REAL_LOGS), "--json"))["budget"]
    assert as_json == {"caps": caps_text(PLACEHOLDER), "placeholder": True, "sessions": 0}
    budget = tmp_path / "budget.toml"
    budget.write_text("max_steps = 40\nmax_seconds = 900\n")
    measured = run("ingest", db, str(REAL_LOGS), "--budget-file", str(budget))
    assert "max_steps=40" in measured and "placeholder" not in measured
    assert "placeholder" not in run("paid-path", db)
