"""The command line: what a user types and what comes back, exit codes included."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from tests.helpers import rows


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_ingest_prints_a_summary(runner: CliRunner, samples: Path, db_path: Path) -> None:
    result = runner.invoke(cli, ["ingest", str(db_path), str(samples)])
    assert result.exit_code == 0, result.output
    assert "6 files (6 new, 0 grown, 0 unchanged), 56 lines read" in result.output
    assert "15 sessions updated, 80 steps added" in result.output
    assert "unknown_vendor 1" in result.output
    assert "1 lines put aside: see the ingest_errors table in" in result.output


def test_ingest_json_summary(runner: CliRunner, samples: Path, db_path: Path) -> None:
    result = runner.invoke(cli, ["ingest", str(db_path), str(samples), "--json"])
    summary = json.loads(result.output)
    assert (summary["files"], summary["sessions"], summary["steps"], summary["errors"]) == (
        6, 15, 80, 1)
    assert summary["stop_reasons"]["task_complete"] == 4
    again = json.loads(runner.invoke(cli, ["ingest", str(db_path), str(samples), "--json"]).output)
    assert (again["unchanged_files"], again["steps"]) == (6, 0)


def test_ingest_strict_exits_3_when_lines_were_put_aside(
    runner: CliRunner, samples: Path, db_path: Path
) -> None:
    result = runner.invoke(cli, ["ingest", str(db_path), str(samples), "--strict"])
    assert result.exit_code == 3
    clean = runner.invoke(cli, ["ingest", str(db_path), str(samples / "docs"), "--strict"])
    assert clean.exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ingest", "{db}", "{tmp}/missing"], "Error: {tmp}/missing: no such file or folder"),
        (["ingest", "{db}", "{samples}", "--budget", "max_round=3"],
         "Error: unknown budget key 'max_round'"),
        (["ingest", "{db}", "{samples}", "--budget", "max_rounds=lots"],
         "Error: max_rounds must be a number or 'off'"),
        (["replay", "{tmp}/missing"], "Error: {tmp}/missing: no such file or folder"),
    ],
)
def test_errors_are_one_clear_line_and_exit_1(
    runner: CliRunner, samples: Path, db_path: Path, tmp_path: Path, args, message
) -> None:
    fill = {"db": str(db_path), "tmp": str(tmp_path), "samples": str(samples)}
    result = runner.invoke(cli, [a.format(**fill) for a in args])
    assert result.exit_code == 1
    assert result.output.strip() == message.format(**fill) or result.output.startswith(
        message.format(**fill))
    assert "Traceback" not in result.output


def test_a_file_that_is_not_a_database_is_a_clear_error(
    runner: CliRunner, samples: Path, tmp_path: Path
) -> None:
    not_db = tmp_path / "notes.db"
    not_db.write_text("this is not sqlite\n" * 100)
    result = runner.invoke(cli, ["ingest", str(not_db), str(samples)])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {not_db}: file is not a database")


def test_budget_file(runner: CliRunner, samples: Path, db_path: Path, tmp_path: Path) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text("[budget]\nmax_rounds = 2\nmax_seconds = 'off'\n")
    result = runner.invoke(
        cli, ["replay", str(samples / "seed-trace.json"), "--budget-file", str(budget), "--json"]
    )
    (session,) = json.loads(result.stdout)
    assert (session["stop_reason"], session["stop_at"]) == ("max_rounds", 2)
    assert json.loads(session["budget"])["max_seconds"] is None


def test_replay_the_seed_trace(runner: CliRunner, samples: Path) -> None:
    result = runner.invoke(
        cli, ["replay", str(samples / "seed-trace.json"), "--budget", "no_progress_rounds=2"]
    )
    assert result.exit_code == 0
    header, rule, line = result.output.splitlines()
    assert header.split() == [
        "session_id", "task_class", "dialect", "stop_reason", "stop_at", "rounds", "steps",
        "tool_calls", "output_tokens", "writes", "recorded_stop", "vendor_stop"]
    assert line.split()[1:] == [
        "refactor", "trace", "no_progress", "3", "3", "3", "4", "1500", "0", "no_progress",
        "empty_assistant"]


def test_replay_json_matches_what_ingest_stores(
    runner: CliRunner, samples: Path, sample_db: Path
) -> None:
    result = runner.invoke(cli, ["replay", str(samples), "--json"])
    replayed = {s["session_id"]: s for s in json.loads(result.stdout)}
    stored = {s["session_id"]: s for s in rows(sample_db, "select * from sessions")}
    assert set(replayed) == set(stored)
    for session_id, session in stored.items():
        for column in ("stop_reason", "stop_at", "rounds", "steps", "tool_calls",
                       "output_tokens", "recorded_stop", "task_class", "meters"):
            assert replayed[session_id][column] == session[column], (session_id, column)


def test_replay_reports_put_aside_lines_on_stderr(samples: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "replay", str(samples / "bugfix")],
        capture_output=True, text=True, check=True,
    )
    assert "put aside: " in done.stderr
    assert "night-run.jsonl:13: invalid JSON" in done.stderr
    assert "bf-0003" in done.stdout


def test_a_name_that_is_not_utf8_is_a_note_not_a_traceback(samples: Path, db_path: Path) -> None:
    folder = os.fsencode(samples / "bugfix")
    shutil.copy(folder + b"/night-run.jsonl", folder + b"/night-run-\xe9.jsonl")  # Latin-1
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "ingest", str(db_path), str(samples)],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "night-run-\\xe9.jsonl: the path is not valid UTF-8" in done.stderr
    assert "6 files (6 new, 0 grown, 0 unchanged)" in done.stdout


@pytest.mark.parametrize("command", ["ingest", "replay", "what-if", "propose-budget", "record"])
def test_a_task_class_that_is_not_utf8_is_a_usage_error(
    command: str, samples: Path, sample_db: Path, tmp_path: Path
) -> None:
    arguments = {
        "ingest": [str(sample_db), str(samples)],
        "replay": [str(samples)],
        "what-if": [str(sample_db)],
        "propose-budget": [str(sample_db)],
        "record": [str(tmp_path / "run.jsonl"), "--session", "s", "--type", "start"],
    }[command]
    done = subprocess.run(
        [sys.executable, "-m", "ledger", command, *arguments, "--task-class"]
        + [os.fsdecode(b"\xff")],  # as a shell passes an argument of that byte
        capture_output=True, text=True,
    )
    assert done.returncode == 2
    assert "Invalid value for '--task-class': not valid UTF-8" in done.stderr
    assert "Traceback" not in done.stderr


def test_every_command_has_help_with_an_example(runner: CliRunner) -> None:
    for name in cli.commands:
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0, name
        assert "Example:" in result.output, name


def test_python_dash_m_ledger_works() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ledger", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("agent-ledger, version ")


def test_serve_get_runs_a_canned_query(runner: CliRunner, sample_db: Path) -> None:
    path = "/ledger/paid_path.json?_shape=objects"
    result = runner.invoke(cli, ["serve", str(sample_db), "--get", path])
    assert result.exit_code == 0, result.output
    classes = {r["task_class"] for r in json.loads(result.output)["rows"]}
    assert classes == {"bugfix", "docs", "refactor"}



def _busy_port() -> socket.socket:
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


def _written(data: bytes) -> Any:
    def make(folder: Path, _ledger: Path) -> Path:
        (folder / "bad.db").write_bytes(data)
        return folder / "bad.db"
    return make


def _not_utf8_name(folder: Path, ledger: Path) -> Path:
    shutil.copy(ledger, os.path.join(os.fsencode(folder), b"b\xe9.db"))
    return folder / os.fsdecode(b"b\xe9.db")


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (_written(b"not a database at all" * 10), ["--get", "/"],
         "not a SQLite database (file is not a database)"),
        (_written(b"SQLite format 3\0" + b"\1" * 200), ["--get", "/"], "not a SQLite database"),
        (_not_utf8_name, ["--get", "/"], "b\\xe9.db: the path is not valid UTF-8"),
        (lambda _f, ledger: ledger, ["--port", "BUSY"], "cannot listen on 127.0.0.1:"),
    ],
    ids=["not-sqlite", "truncated", "path-not-utf8", "port-in-use"],
)
def test_serve_bad_input_is_one_line_and_exit_1(
    runner: CliRunner, sample_db: Path, tmp_path: Path, make: Any, args: list[str],
    message: str,
) -> None:
    """Before: a traceback for a file that is no database or a path that is not UTF-8, and
    uvicorn's exit 3 (--strict's code) for a port in use."""
    folder = tmp_path / "served"
    folder.mkdir()
    db = make(folder, sample_db)
    with _busy_port() as busy:
        port = str(busy.getsockname()[1])
        result = runner.invoke(cli, ["serve", str(db), *(port if a == "BUSY" else a for a in args)])
    assert result.exit_code == 1, result.output
    assert message in result.output
    assert "Traceback" not in result.output
