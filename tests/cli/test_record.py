"""``agent-ledger record``: one event appended, the session replayed, exit 5 when it is stopped."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from ledger.cli.options import EXIT_BUDGET
from ledger.core.budget import Budget
from ledger.ingest.options import Options
from ledger.ingest.replay import replay
from ledger.live.recorder import iso
from tests.helpers import ROOT


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "run.jsonl"


def record(ledger: Path, *args: str, stdin: str | None = None):
    runner = CliRunner()
    return runner.invoke(cli, ["record", str(ledger), "--session", "s1", *args], input=stdin)


def events(ledger: Path) -> list[dict]:
    return [json.loads(line) for line in ledger.read_text().splitlines()]


def test_a_shell_loop_is_stopped_with_exit_5_and_the_reason(ledger: Path) -> None:
    codes = []
    for i in range(1, 6):
        result = record(ledger, "--action", "read", "--detail", f"step {i}", "-b", "max_steps=3")
        codes.append(result.exit_code)
        if result.exit_code:
            break
    assert codes == [0, 0, 0, EXIT_BUDGET] and EXIT_BUDGET == 5
    assert result.stdout == "max_steps\n"
    assert result.stderr == "budget exceeded: steps 4 > 3 (session s1, event 4)\n"
    assert [e["detail"] for e in events(ledger)] == [f"step {i}" for i in range(1, 5)]
    [(rows, _)] = replay([ledger], Options(budget=Budget(max_steps=3)))
    assert (rows[0]["stop_reason"], rows[0]["stop_at"]) == ("max_steps", 4)


def test_rounds_with_the_same_observation_stop_for_no_progress(ledger: Path) -> None:
    assert record(ledger, "--type", "start", "--task-class", "bugfix").exit_code == 0
    args = ["--type", "round", "--tool-calls", "1", "--output-tokens", "300", "--no-tool-error"]
    assert record(ledger, *args, "--observation", "1 failed").exit_code == 0
    result = record(ledger, *args, "--observation-file", "-", stdin="1 failed")
    assert (result.exit_code, result.stdout) == (EXIT_BUDGET, "no_progress\n")
    assert record(ledger, "--type", "end", "--outcome", "no_progress").exit_code == 0
    assert [e["type"] for e in events(ledger)] == ["start", "round", "round", "end"]
    assert events(ledger)[0]["task_class"] == "bugfix"
    assert events(ledger)[1]["tool_calls"] == 1 and events(ledger)[1]["tool_error"] is False


def test_json_prints_the_session_row(ledger: Path) -> None:
    result = record(ledger, "--action", "write", "--detail", "patch", "--json")
    row = json.loads(result.stdout)
    assert result.exit_code == 0
    assert (row["session_id"], row["writes"], row["stop_reason"]) == ("s1", 1, "task_complete")


def test_elapsed_time_is_measured_from_the_sessions_first_timestamp(ledger: Path) -> None:
    long_ago = iso(datetime.now(UTC) - timedelta(seconds=100))
    ledger.write_text(json.dumps({"ts": long_ago, "session": "s1", "type": "start"}) + "\n")
    result = record(ledger, "--action", "think", "--detail", "still here?")
    assert result.exit_code == EXIT_BUDGET and result.stdout == "max_seconds\n"
    # The decision is the replay under the budget given: the same session, a larger cap.
    assert record(ledger, "--action", "think", "-b", "max_seconds=200").exit_code == 0


def test_only_this_session_counts(ledger: Path) -> None:
    runner = CliRunner()
    for session in ("a", "b", "a", "b", "a"):
        result = runner.invoke(cli, ["record", str(ledger), "--session", session, "--action",
                                     "write", "-b", "max_writes=2"])
    assert result.exit_code == EXIT_BUDGET
    assert result.stderr.endswith("(session a, event 3)\n")


def test_secrets_are_redacted(ledger: Path) -> None:
    record(ledger, "--action", "read", "--detail", "export GITHUB_TOKEN=ghp_" + "a1" * 18)
    assert "ghp_" not in ledger.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give --type, or --action for an action event"),
        (["--type", "action"], "an action event needs --action"),
        (["--action", "read", "--tool-calls", "2"], "--tool-calls does not go with --type action"),
        (["--type", "round", "--outcome", "task_complete"], "--outcome does not go with"),
        (["--type", "end", "--action", "read"], "--action does not go with --type end"),
        (["--type", "round", "--observation", "x", "--observation-file", "-"], "not both"),
        (["--action", "deploy"], "'deploy' is not one of"),
    ],
)
def test_usage_errors_exit_2_and_write_nothing(ledger: Path, args, message) -> None:
    result = record(ledger, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert not ledger.exists()


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ('{"step": 1, "action": "think", "writes": 0}\n', ["--action", "read"], "a gate ledger"),
        ("", ["--action", "read", "-b", "max_step=3"], "unknown budget key 'max_step'"),
    ],
)
def test_errors_exit_1_and_write_nothing(ledger: Path, content, args, message) -> None:
    ledger.write_text(content)
    result = record(ledger, *args)
    assert result.exit_code == 1
    assert message in result.stderr
    assert ledger.read_text() == content


LOOP = """
for i in $(seq 1 20); do
  if ! reason=$(agent-ledger record run.jsonl --session s --action read --detail "step $i" \\
      --budget max_steps=3); then
    echo "stopped at step $i: $reason"; break
  fi
done
"""


def test_a_real_shell_loop_gates_on_the_exit_code(tmp_path: Path) -> None:
    bin_dir = ROOT / ".venv" / "bin"
    if not (bin_dir / "agent-ledger").exists():
        bin_dir = Path(shutil.which("agent-ledger") or "").parent
    result = subprocess.run(
        ["bash", "-c", LOOP], cwd=tmp_path, capture_output=True, text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, timeout=60,
    )
    assert result.stdout == "stopped at step 4: max_steps\n"
    assert "budget exceeded: steps 4 > 3" in result.stderr


@pytest.mark.parametrize(
    "money",
    [["--cost", "0.5"],
     ["--model", "claude-opus-4-6", "--input-tokens", "0", "--output-tokens", "20000"]],
    ids=["cost", "tokens+model"],
)
def test_record_stops_at_max_cost(ledger: Path, money: list[str]) -> None:
    """$0.50 a round (20,000 output tokens of claude-opus-4-6 at $25 per million)."""
    args = ["--type", "round", *money, "-b", "max_cost=1", "-b", "max_output_tokens=off"]
    assert record(ledger, *args).exit_code == 0
    stopped = record(ledger, *args)
    assert stopped.exit_code == EXIT_BUDGET
    assert stopped.stdout == "max_cost\n"
    assert "cost $1.0000 >= $1" in stopped.stderr


def test_record_refuses_money_on_an_action(ledger: Path) -> None:
    result = record(ledger, "--action", "read", "--cost", "0.1")
    assert result.exit_code == 2
    assert "--cost does not go with --type action" in result.stderr


def test_an_event_after_a_last_line_without_its_newline_is_a_line_of_its_own(
    ledger: Path,
) -> None:
    """A writer that died mid-line: the event was glued to its half line, both one bad line."""
    ledger.write_text('{"ts": "2026-01-01T00:00:00Z", "session": "s1", "type": "start"')
    assert record(ledger, "--action", "read").exit_code == 0
    head, last = ledger.read_text().splitlines()
    assert head == '{"ts": "2026-01-01T00:00:00Z", "session": "s1", "type": "start"'
    assert json.loads(last)["action"] == "read"


def test_a_fifo_in_the_ledgers_place_is_refused_not_waited_on(ledger: Path) -> None:
    import os
    import threading

    os.mkfifo(ledger)
    results: list = []
    worker = threading.Thread(target=lambda: results.append(record(ledger, "--action", "read")),
                              daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert results, "record waited on the FIFO"
    assert results[0].exit_code == 1
    assert "a named pipe (FIFO), not a regular file" in results[0].output
