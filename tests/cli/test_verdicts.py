"""``agent-ledger paid-path`` and ``agent-ledger verdicts``: reports, JSON and exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ledger.cli import cli
from ledger.cli.options import EXIT_STAY
from ledger.core.budget import Budget
from ledger.db import connection
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import rows


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_paid_path_prints_each_class_with_its_reasons(sample_db: Path) -> None:
    result = run("paid-path", sample_db)
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("3 task classes: 0 ready, 3 stay on the paid path")
    assert "\nrefactor: stay_on_paid_path\n  4 sessions; 4 with a recorded stop: 3 match" in out
    assert "the log ends after 14, the replay stops after 12 (2 apart; tolerance 1)" in out
    assert "unknown vendor stops: 'policy_hidden_v3' x1 in 1 session (bf-0003)" in out
    assert "too few sessions to judge: 0 of 5 carry a recorded stop" in out
    assert "select task_class from task_classes where verdict = 'stay_on_paid_path'" in out



@pytest.mark.parametrize(
    ("extra", "ready"),
    [({}, False), ({"cost": 0.01}, True)],
    ids=["unpriced rounds: stay", "priced rounds: ready"],
)
def test_paid_path_holds_a_money_cap_to_its_cost_meter(
    samples: Path, db_path: Path, extra: dict, ready: bool
) -> None:
    """The refactor traces, ready under max_rounds=13, with max_cost on: ready only where every
    round carries a cost (seed 000 step 4: a cap whose meter is absent cannot be honoured)."""
    traces = [*(samples / "refactor").glob("*.json"), samples / "seed-trace.json"]
    for path in traces:
        doc = json.loads(path.read_text())
        doc["rounds"] = [{**r, **extra} for r in doc["rounds"]]
        path.write_text(json.dumps(doc))
    ingest(db_path, traces, Options(budget=Budget(max_rounds=13, max_cost=1000.0)))
    result = run("paid-path", db_path)
    assert result.output.startswith(f"1 task class: {int(ready)} ready")
    assert ("max_cost is in force but its meter, cost, is missing" in result.output) != ready


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ((), 0),
        (("--fail-on-stay",), EXIT_STAY),
        (("--fail-on-stay", "--json"), EXIT_STAY),
    ],
)
def test_fail_on_stay_exits_4_when_a_class_must_stay(
    sample_db: Path, args: tuple[str, ...], code: int
) -> None:
    assert EXIT_STAY == 4
    assert run("paid-path", sample_db, *args).exit_code == code


def test_fail_on_stay_passes_when_every_class_is_ready(samples: Path, db_path: Path) -> None:
    # The refactor traces alone, under a round cap one notch tighter than the paid loop's 14.
    refactor = [samples / "refactor", samples / "seed-trace.json"]
    ingest(db_path, refactor, Options(budget=Budget(max_rounds=13)))
    result = run("paid-path", db_path, "--fail-on-stay")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("1 task class: 1 ready, 0 stay on the paid path")
    assert "In SQL" not in result.output


def test_a_larger_tolerance_can_make_a_class_ready(sample_db: Path) -> None:
    data = json.loads(run("paid-path", sample_db, "--tolerance", "2", "--json").output)
    assert data["ready"] == ["refactor"]
    assert data["stay_on_paid_path"] == ["bugfix", "docs"]


def test_fail_on_stay_fails_closed_on_an_empty_database(db_path: Path) -> None:
    connection.connect(db_path).conn.close()
    result = run("paid-path", db_path, "--fail-on-stay")
    assert result.exit_code == EXIT_STAY
    assert "nothing can be judged ready" in result.output


def test_paid_path_json_spells_out_the_evidence(sample_db: Path) -> None:
    result = run("paid-path", sample_db, "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["settings"] == {"tolerance": 1, "min_sessions": 3}
    classes = {c["task_class"]: c for c in data["task_classes"]}
    assert classes["bugfix"]["reason_kinds"] == [
        "unknown_vendor", "missing_meter", "replay_mismatch"]
    assert classes["bugfix"]["unknown_vendor_stops"] == {"policy_hidden_v3": 1}
    assert [m["session_id"] for m in classes["bugfix"]["parity_mismatches"]] == ["bf-0003"]
    assert classes["docs"]["completes_without_signal"] == 1


def test_paid_path_writes_nothing(sample_db: Path) -> None:
    before = rows(sample_db, "select * from task_classes order by task_class")
    assert run("paid-path", sample_db, "--tolerance", "5", "--min-sessions", "1").exit_code == 0
    assert rows(sample_db, "select * from task_classes order by task_class") == before


def test_verdicts_recomputes_and_keeps_its_settings(sample_db: Path) -> None:
    result = run("verdicts", sample_db, "--tolerance", "2")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "3 task classes: 1 ready, 2 stay on the paid path",
        "15 sessions: 7 match their log's stop, 1 mismatch, 7 have no recorded stop "
        "(tolerance 2)",
        "5 caps in force without their meter (see meter_gaps)",
    ]
    ready = rows(sample_db, "select task_class from task_classes where verdict = 'ready'")
    assert ready == [{"task_class": "refactor"}]
    # paid-path now defaults to the stored settings.
    data = json.loads(run("paid-path", sample_db, "--json").output)
    assert data["settings"] == {"tolerance": 2, "min_sessions": 3}


def test_verdicts_json(sample_db: Path) -> None:
    data = json.loads(run("verdicts", sample_db, "--json", "--min-sessions", "5").output)
    assert data == {
        "task_classes": 3, "ready": 0, "stay_on_paid_path": 3, "sessions": 15,
        "match": 6, "mismatch": 2, "no_recorded_stop": 7, "meter_gaps": 5,
        "tolerance": 1, "min_sessions": 5,
    }


@pytest.mark.parametrize("command", ["paid-path", "verdicts"])
def test_bad_input_is_a_clear_error(command: str, tmp_path: Path) -> None:
    missing = run(command, tmp_path / "nope.db")
    assert missing.exit_code == 2
    assert "does not exist" in missing.output
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database, just text" * 100)
    result = run(command, junk)
    assert result.exit_code == 1
    assert "Error:" in result.output and "Traceback" not in result.output
    assert run(command, junk, "--tolerance", "-1").exit_code == 2
    assert run(command, junk, "--min-sessions", "0").exit_code == 2


@pytest.mark.parametrize("command", ["paid-path", "verdicts"])
def test_help_has_an_example(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0
    assert "Example:" in result.output


def test_paid_path_gives_each_class_its_share_of_the_spend(tmp_path: Path) -> None:
    from tests.dashboard import spend_data

    db = spend_data.build(tmp_path)
    out = run("paid-path", db).output
    assert "  spend: $1.50, 75.0% of all (1 of 1 sessions priced)" in out
    assert "  spend: $0.50, 25.0% of all (1 of 2 sessions priced)" in out
    found = json.loads(run("paid-path", db, "--json").output)
    assert {c["task_class"]: c["spend"] for c in found["task_classes"]} == {
        "docs": {"cost_usd": 0.5, "share_of_spend": 0.25, "priced_sessions": 1, "sessions": 2},
        "refactor": {"cost_usd": 1.5, "share_of_spend": 0.75, "priced_sessions": 1,
                     "sessions": 1},
    }


def test_paid_path_of_a_database_without_money_prints_no_spend(sample_db: Path) -> None:
    assert "spend:" not in run("paid-path", sample_db).output
    found = json.loads(run("paid-path", sample_db, "--json").output)
    assert all(c["spend"]["cost_usd"] is None for c in found["task_classes"])


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("create table mine (x)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("command", ["verdicts", "paid-path"])
@pytest.mark.parametrize(
    ("make_db", "message"),
    [
        (_foreign, "not an agent-ledger database (no incidents, sessions, sources, steps"),
        (lambda p: p.write_bytes(b""), "not an agent-ledger database"),
        (lambda p: p.write_bytes(b"not sqlite" * 20), "not a SQLite database"),
    ],
    ids=["foreign-sqlite", "empty-file", "not-sqlite"],
)
def test_a_file_that_is_no_ledger_is_refused_and_left_as_it_was(
    tmp_path: Path, command: str, make_db: Any, message: str
) -> None:
    """Before: a foreign SQLite file (or an empty one) was migrated into a ledger, 20 tables
    added, and judged with exit 0 ('0 task classes')."""
    db = tmp_path / "other.db"
    make_db(db)
    before = db.read_bytes()
    result = run(command, db)
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output
    assert db.read_bytes() == before
