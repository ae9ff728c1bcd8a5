"""What-if budgets: stored sessions replayed under another budget, compared with their stops."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from ledger.analysis.whatif import (
    EARLIER,
    LATER,
    OTHER_REASON,
    Replayer,
    Report,
    Stop,
    change,
    evaluate,
    what_if,
)
from ledger.cli import cli
from ledger.core.budget import Budget
from ledger.core.vendors import DEFAULT_VENDOR_MAP
from ledger.db.stored import open_readonly, stored_sessions
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.ingest.replay import replay
from tests.strategies import budgets, ledger, write_ledger

# --- the comparison ---------------------------------------------------------------------------

CHANGES = [
    # (stored stop, what-if stop, change)
    (Stop("task_complete"), Stop("task_complete"), None),
    (Stop("max_rounds", 4), Stop("max_rounds", 4), None),
    (Stop("task_complete"), Stop("max_rounds", 4), EARLIER),
    (Stop("max_rounds", 12), Stop("max_rounds", 3), EARLIER),
    (Stop("max_rounds", 12), Stop("no_progress", 3), EARLIER),
    (Stop("max_rounds", 3), Stop("task_complete"), LATER),
    (Stop("max_steps", 9), Stop("max_writes", 11), LATER),
    (Stop("no_progress", 3), Stop("max_rounds", 3), OTHER_REASON),
]


@pytest.mark.parametrize(("old", "new", "expected"), CHANGES)
def test_change_is_earlier_later_or_another_reason(old: Stop, new: Stop, expected) -> None:
    assert change(old, new) == expected


# --- replays against the database ---------------------------------------------------------


def run(db: Path, retune, task_class: str | None = None, vendor_map=DEFAULT_VENDOR_MAP) -> Report:
    with closing(open_readonly(str(db))) as conn:
        return what_if(stored_sessions(conn, task_class), Replayer(retune, vendor_map))


def test_nothing_changes_under_the_stored_budget(sample_db: Path) -> None:
    report = run(sample_db, lambda stored: stored)
    assert report.sessions == 15
    assert report.changes == []
    assert report.totals["unchanged"] == 15


def test_a_lower_round_cap_stops_sessions_earlier_or_for_another_reason(sample_db: Path) -> None:
    report = run(sample_db, lambda stored: Budget.from_assignments(["max_rounds=3"], stored))
    changes = {v.session_id: (v.change, v.new.reason, v.new.at) for v in report.changes}
    assert changes == {
        "6f0ca1ba01fc": (EARLIER, "max_rounds", 3),  # completed in 3 rounds: now stopped at 3
        "811be5e93b95": (EARLIER, "max_rounds", 3),  # stopped at 12
        "ca1ccbfdeb56": (EARLIER, "max_rounds", 3),  # stopped by tokens at 5
        "0d35d469e4d4": (OTHER_REASON, "max_rounds", 3),  # no_progress at the same round
        "bf-0001": (OTHER_REASON, "max_rounds", 4),  # tool_error_budget at the same event
        "bf-0002": (EARLIER, "max_rounds", 5),
        "bf-0006": (EARLIER, "max_rounds", 4),
    }
    by_class = {row["task_class"]: row for row in report.class_rows()}
    assert by_class["refactor"] == {
        "task_class": "refactor", "sessions": 4, "earlier": 3, "later": 0,
        "other_reason": 1, "unchanged": 0,
    }
    assert by_class["docs"]["unchanged"] == 5  # gate ledgers are not held to max_rounds


def test_higher_gate_caps_let_gate_sessions_run_later(sample_db: Path) -> None:
    report = run(sample_db, lambda s: Budget.from_assignments(["max_steps=off"], s), "docs")
    assert {(v.session_id, v.change, v.new.reason) for v in report.changes} == {
        ("0903fa030c63-3", LATER, "task_complete"),
        ("0903fa030c63-4", LATER, "task_complete"),
    }
    assert report.sessions == 5


def test_caps_not_named_keep_their_stored_values(samples: Path, db_path: Path) -> None:
    ingest(db_path, [samples / "refactor"], Options(budget=Budget(max_rounds=2)))
    report = run(db_path, lambda s: Budget.from_assignments(["max_output_tokens=off"], s))
    # Every refactor trace has 2+ rounds, so the stored max_rounds=2 still stops all of them
    # at round 2, whatever happens to the token cap.
    assert report.changes == []
    assert report.sessions == 3


def test_a_vendor_map_that_knows_the_string_lets_the_session_run_on(sample_db: Path) -> None:
    mapping = {**DEFAULT_VENDOR_MAP, "policy_hidden_v3": "user_cancel"}
    report = run(sample_db, lambda s: s, "bugfix", mapping)
    assert [(v.session_id, v.old.reason, v.new.reason, v.change) for v in report.changes] == [
        ("bf-0003", "unknown_vendor", "task_complete", LATER)
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions=ledger(), stored=budgets, tried=budgets)
def test_what_if_agrees_with_ingesting_under_the_new_budget(sessions, stored, tried) -> None:
    """The oracle: replaying stored steps under budget B stops every session exactly where
    reading the ledger file again under B does (reason, event and detail)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = write_ledger(Path(tmp) / "runs", sessions)
        db = Path(tmp) / "ledger.db"
        ingest(db, [path], Options(budget=stored))
        with closing(open_readonly(str(db))) as conn:
            replayer = Replayer(lambda _stored: tried, DEFAULT_VENDOR_MAP)
            verdicts = {v.session_id: v for v in evaluate(stored_sessions(conn), replayer)}
        fresh = {
            row["session_id"]: Stop(row["stop_reason"], row["stop_at"], row["stop_detail"])
            for rows, _ in replay([path], Options(budget=tried)) for row in rows
        }
    assert {sid: v.new for sid, v in verdicts.items()} == fresh
    for verdict in verdicts.values():
        assert verdict.change == change(verdict.old, verdict.new)
        assert (verdict.change is None) == (
            (verdict.old.reason, verdict.old.at) == (verdict.new.reason, verdict.new.at)
        )


# --- the command ----------------------------------------------------------------------------


def invoke(*args: str):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_lists_the_changed_sessions_and_the_counts(sample_db: Path) -> None:
    result = invoke("what-if", sample_db, "--budget", "max_rounds=3", "--task-class", "refactor")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        "4 sessions replayed from their stored steps under their stored budgets changed by "
        "max_rounds=3."
    )
    assert lines[1] == "4 would stop differently: 3 earlier, 0 later, 1 for another reason."
    assert any(
        line.split() == ["811be5e93b95", "refactor", "earlier", "max_rounds", "at", "12",
                         "max_rounds", "at", "3", "rounds", "3", ">=", "3"]
        for line in lines
    )
    assert lines[-1].split() == ["refactor", "4", "3", "0", "1", "0"]


def test_cli_json_lists_every_change(sample_db: Path) -> None:
    result = invoke("what-if", sample_db, "-b", "max_rounds=3", "--json", "--limit", "1")
    data = json.loads(result.output)
    assert (data["sessions"], data["changed"], data["earlier"], data["later"],
            data["other_reason"], data["unchanged"]) == (15, 7, 5, 0, 2, 8)
    assert len(data["changes"]) == 7
    assert data["changes"][0]["old"] == {
        "reason": "no_progress", "at": 3, "detail": "same observation 2 times in a row"
    }
    assert sum(c["sessions"] for c in data["task_classes"]) == 15


def test_cli_limit_cuts_the_listing_not_the_counts(sample_db: Path) -> None:
    result = invoke("what-if", sample_db, "-b", "max_rounds=3", "--limit", "2")
    assert "... and 5 more (--limit 0 lists all)" in result.output
    assert "7 would stop differently" in result.output


def test_cli_reads_a_budget_file_as_a_change(sample_db: Path, tmp_path: Path) -> None:
    toml = tmp_path / "b.toml"
    toml.write_text("[budget]\nmax_rounds = 3\n")
    by_file = invoke("what-if", sample_db, "--budget-file", toml, "--json")
    by_flag = invoke("what-if", sample_db, "--budget", "max_rounds=3", "--json")
    assert json.loads(by_file.output) == json.loads(by_flag.output)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-b", "max_round=3"], "unknown budget key 'max_round'"),
        (["-b", "max_rounds=three"], "max_rounds must be a number or 'off'"),
    ],
)
def test_cli_bad_budget_is_a_clear_error(sample_db: Path, args: list[str], message: str) -> None:
    result = invoke("what-if", sample_db, *args)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("max_rounds = true", "budget.toml: max_rounds must be a number or 'off', not True"),
        ("max_rounds = [1]", "budget.toml: max_rounds must be a number or 'off'"),
        ("bogus = 1", "budget.toml: unknown budget key 'bogus'"),
        ("max_rounds = -3", "budget.toml: max_rounds must be 0 or more"),
        ("max_cost = nan", "budget.toml: max_cost must be a finite number or 'off', not nan"),
        ("max_seconds = inf", "budget.toml: max_seconds must be a finite number"),
        ("max_rounds = 3\n[budget]\nmax_steps = 2", "budget.toml: 'max_rounds' beside [budget]"),
        ("[budget]\nmax_rounds = 3\n[other]\nx = 1", "budget.toml: 'other' beside [budget]"),
        ("max_rounds = [[", "budget.toml: not a valid TOML budget file"),
    ],
)
def test_cli_a_bad_budget_file_names_the_file_and_the_key(
    sample_db: Path, tmp_path: Path, toml: str, message: str
) -> None:
    path = tmp_path / "budget.toml"
    path.write_text(toml + "\n")
    result = invoke("what-if", sample_db, "--budget-file", path)
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_cli_not_a_ledger_database(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("create table t (x)")
    for command in ("what-if", "propose-budget"):
        result = invoke(command, other)
        assert result.exit_code == 1
        assert f"Error: {other}: not an agent-ledger database" in result.output  # named


def test_cli_missing_database_is_a_usage_error(tmp_path: Path) -> None:
    assert invoke("what-if", tmp_path / "nope.db").exit_code == 2


def test_cli_an_unknown_task_class_says_so(sample_db: Path) -> None:
    result = invoke("what-if", sample_db, "--task-class", "nope")
    assert result.exit_code == 0
    assert "note: no stored sessions of task class 'nope'" in result.output


def test_cli_does_not_write_to_the_database(sample_db: Path) -> None:
    before = sample_db.read_bytes()
    invoke("what-if", sample_db, "-b", "max_rounds=1")
    assert sample_db.read_bytes() == before


# --- max_cost ---------------------------------------------------------------------------------


def test_cli_notes_the_sessions_a_money_cap_cannot_measure(sample_db: Path) -> None:
    """The samples' rounds carry no cost: a max_cost what-if changes nothing, and says why."""
    result = CliRunner().invoke(cli, ["what-if", str(sample_db), "-b", "max_cost=0", "--json"])
    data = json.loads(result.stdout)
    assert (data["changed"], data["unpriced"]) == (0, 10)  # 15 sessions less the 5 gate runs
    assert "note: max_cost is on, but 10 of 15 sessions have no round with a cost" in (
        result.stderr)
    assert json.loads(invoke("what-if", sample_db, "--json").output)["unpriced"] == 0


def test_cli_prices_stored_rounds_with_a_prices_file(tmp_path: Path) -> None:
    """A round stored with its cost replays under a new max_cost; --prices is read and checked."""
    ledger_file = tmp_path / "costly" / "run.jsonl"
    ledger_file.parent.mkdir()
    ledger_file.write_text("".join(
        json.dumps({"session": "s", "type": "round", "cost": 0.5}) + "\n" for _ in range(4)
    ))
    db = tmp_path / "l.db"
    ingest(db, [ledger_file.parent])
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."acme"]\ninput = 1\noutput = 2\n')
    result = invoke("what-if", db, "-b", "max_cost=1", "--prices", prices, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    # Each stored round keeps its cost: at $1 the session stops at its second round, and
    # the two rounds after it ($1.00) are what the cap would have saved.
    assert (data["earlier"], data["unpriced"]) == (1, 0)
    assert data["changes"][0]["new"] == {
        "reason": "max_cost", "at": 2, "detail": "cost $1.0000 >= $1"}
    assert (data["cost_usd"], data["saved_usd"]) == (2.0, 1.0)
    text = invoke("what-if", db, "-b", "max_cost=1").output
    assert "they would have saved $1.00 (50%)" in text
    prices.write_text('[models."acme"]\ninput = -1\noutput = 2\n')
    bad = invoke("what-if", db, "-b", "max_cost=1", "--prices", prices)
    assert bad.exit_code == 1
    assert "input must be 0 or more" in bad.output
