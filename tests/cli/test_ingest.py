"""``agent-ledger ingest`` exit codes and messages (docs/bad-input.md "Exit codes"): 0 success
(files that cannot be read skipped with notes), 1 an error (one line, no traceback), 2 a usage
error, 3 ``--strict`` with lines put aside or files skipped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from tests.helpers import refuse_to_open, rows

GOOD = '{"session": "s", "type": "round"}\n'


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["ingest", *args])
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.fixture
def ledger_with_a_bad_line(tmp_path: Path) -> Path:
    path = tmp_path / "agent.jsonl"
    path.write_text(GOOD + "{oops\n" + GOOD)
    return path


def test_clean_ledgers_exit_0_and_say_nothing_was_put_aside(tmp_path: Path) -> None:
    ledger = tmp_path / "agent.jsonl"
    ledger.write_text(GOOD)
    code, output = run(str(tmp_path / "l.db"), str(ledger), "--strict")
    assert code == 0
    assert output.splitlines()[-1] == "0 lines put aside"


def test_lines_put_aside_are_counted_and_located(
    tmp_path: Path, ledger_with_a_bad_line: Path
) -> None:
    db = tmp_path / "l.db"
    code, output = run(str(db), str(ledger_with_a_bad_line))
    assert code == 0  # without --strict, lines put aside are not a failure
    assert output.splitlines()[-1] == f"1 lines put aside: see the ingest_errors table in {db}"


def test_strict_exits_3_when_any_line_was_put_aside(
    tmp_path: Path, ledger_with_a_bad_line: Path
) -> None:
    db = tmp_path / "l.db"
    code, output = run(str(db), str(ledger_with_a_bad_line), "--strict")
    assert code == 3
    assert "1 lines put aside: see the ingest_errors table" in output
    # Only this run counts: the next run reads nothing new and is clean.
    assert run(str(db), str(ledger_with_a_bad_line), "--strict")[0] == 0


def test_json_summary(tmp_path: Path, ledger_with_a_bad_line: Path) -> None:
    code, output = run(str(tmp_path / "l.db"), str(ledger_with_a_bad_line), "--json", "--strict")
    summary = json.loads(output)
    assert code == 3
    assert (summary["lines"], summary["steps"], summary["errors"]) == (3, 2, 1)
    assert (summary["redactions"], summary["passes"]) == (0, 1)


def test_a_cut_last_line_is_named_with_its_bytes_in_the_summary_and_the_json(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "agent.jsonl"
    ledger.write_text(GOOD + GOOD[:20])
    code, output = run(str(tmp_path / "l.db"), str(ledger))
    assert code == 0
    assert "1 files end in an unfinished line (left for later):" in output
    assert f"  {ledger}: 20 bytes from byte {len(GOOD)}" in output.splitlines()
    summary = json.loads(run(str(tmp_path / "l.db"), str(ledger), "--json")[1])
    assert summary["waiting"] == [{"path": str(ledger), "offset": len(GOOD), "bytes": 20}]


def test_a_missing_path_is_one_line_and_exit_1(tmp_path: Path) -> None:
    code, output = run(str(tmp_path / "l.db"), str(tmp_path / "nope"))
    assert code == 1
    assert output == f"Error: {tmp_path / 'nope'}: no such file or folder\n"
    assert not (tmp_path / "l.db").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [("[models\n", "not a valid TOML prices file"),
     ('[models."acme"]\ninput = 1\n', "needs both 'input' and 'output'")],
)
def test_a_bad_prices_file_is_one_line_and_exit_1(tmp_path: Path, text: str, message: str) -> None:
    ledger = tmp_path / "agent.jsonl"
    ledger.write_text(GOOD)
    prices = tmp_path / "prices.toml"
    prices.write_text(text)
    code, output = run(str(tmp_path / "l.db"), str(ledger), "--prices", str(prices))
    assert code == 1
    assert output.startswith(f"Error: {prices}: ") and message in output
    assert len(output.splitlines()) == 1
    assert not (tmp_path / "l.db").exists()


@pytest.fixture
def folder_with_bad_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A good ledger, one the kernel will not open, and a FIFO."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "agent.jsonl").write_text(GOOD)
    locked = runs / "locked.jsonl"
    locked.write_text(GOOD.replace('"s"', '"locked"'))
    os.mkfifo(runs / "pipe.jsonl")
    refuse_to_open(monkeypatch, locked)
    return runs


SKIPPED = {
    "locked.jsonl": "could not be read (Permission denied)",
    "pipe.jsonl": "a named pipe (FIFO), not a regular file",
}


@pytest.mark.parametrize(("strict", "code"), [([], 0), (["--strict"], 3)])
def test_files_that_cannot_be_read_are_skipped_with_notes_and_the_rest_ingested(
    tmp_path: Path, folder_with_bad_files: Path, strict: list[str], code: int
) -> None:
    db = tmp_path / "l.db"
    result = CliRunner().invoke(cli, ["ingest", str(db), str(folder_with_bad_files), *strict])
    assert result.exit_code == code, result.output
    assert sorted(result.stderr.splitlines()) == [  # found skipped when listed, or read
        f"note: {folder_with_bad_files / name}: {reason}; skipped"
        for name, reason in sorted(SKIPPED.items())
    ]
    assert "2 files skipped (see the notes above)" in result.stdout
    assert result.stdout.splitlines()[-1] == "0 lines put aside"
    assert [r["session_id"] for r in rows(db, "select * from sessions")] == ["s"]


def test_json_lists_the_files_skipped_and_why(
    tmp_path: Path, folder_with_bad_files: Path
) -> None:
    result = CliRunner().invoke(
        cli, ["ingest", str(tmp_path / "l.db"), str(folder_with_bad_files), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["skipped"] == [
        {"path": str(folder_with_bad_files / name), "reason": reason}
        for name, reason in sorted(SKIPPED.items())
    ]


def test_a_file_that_is_not_a_database_is_exit_1(tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    db.write_text("these are my notes, not a database\n" * 100)
    ledger = tmp_path / "agent.jsonl"
    ledger.write_text(GOOD)
    code, output = run(str(db), str(ledger))
    assert code == 1
    assert output.startswith(f"Error: {db}: file is not a database")
    assert len(output.splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--max-line-bytes", "10"],
        ["--interval", "0"],
        ["--jobs", "-1"],
        ["--no-such-option"],
        [],  # no paths
    ],
    ids=["line-limit-too-small", "interval-zero", "negative-jobs", "unknown-option",
         "no-paths"],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    ledger = tmp_path / "agent.jsonl"
    ledger.write_text(GOOD)
    paths = [str(ledger)] if args else []
    code, output = run(str(tmp_path / "l.db"), *paths, *args)
    assert code == 2
    assert "Usage:" in output


def test_help_documents_follow_and_has_an_example() -> None:
    output = CliRunner().invoke(cli, ["ingest", "--help"]).output
    assert "--follow" in output and "--interval" in output and "Example:" in output
    assert "--batch-size" not in output  # hidden: for tests and benchmarks


def test_jobs_change_how_fast_not_what_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over 4 MB of new files: ``--jobs 2`` starts two workers, ``--jobs 0`` none, and both
    print the same summary and store the same rows."""
    from ledger.ingest import parallel
    from tests.corpus import write_ledgers
    from tests.helpers import dump

    write_ledgers(tmp_path / "runs", events=32_000, files=4, seed=3)
    started = []
    workers = parallel.Workers
    monkeypatch.setattr(parallel, "Workers", lambda *a: started.append(a[1]) or workers(*a))
    outputs = {}
    for jobs in ("0", "2"):
        code, outputs[jobs] = run(str(tmp_path / f"{jobs}.db"), str(tmp_path / "runs"),
                                  "--jobs", jobs, "--json")
        assert code == 0
    assert started == [2]
    summaries = {jobs: json.loads(output) for jobs, output in outputs.items()}
    assert (summaries["0"].pop("workers"), summaries["2"].pop("workers")) == (0, 2)
    assert summaries["0"] == summaries["2"]
    assert dump(tmp_path / "0.db") == dump(tmp_path / "2.db")
