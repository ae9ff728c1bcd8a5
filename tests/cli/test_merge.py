"""``agent-ledger merge DB SOURCE_DB...``: its summary, its progress and its exit codes
(0 every database merged; 3 some were not, the others were; 1 none could be, or DB cannot
be opened; 2 a usage error), one line per problem and never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import FIXTURES, rows

SPANS = FIXTURES / "otlp" / "genai_spans.jsonl"
LOGS = FIXTURES / "otlp" / "agent_logs.jsonl"


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["merge", *args])
    assert "Traceback" not in result.output + result.stderr
    assert not isinstance(result.exception, Exception) or isinstance(
        result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def hosts(tmp_path: Path) -> list[Path]:
    paths = []
    for host, logs in (("host-a", SPANS), ("host-b", SPANS), ("host-c", LOGS)):
        path = tmp_path / f"{host}.db"
        ingest(path, [logs], Options(host=host))
        paths.append(path)
    return paths


def test_it_merges_and_says_what_each_database_brought(tmp_path: Path, hosts: list[Path]) -> None:
    code, out, _ = run(str(tmp_path / "team.db"), *map(str, hosts))
    assert code == 0
    for path in hosts:  # (the counts below are these databases' own)
        assert rows(path, "select count(*) as n from steps")[0]["n"] in (9, 13)
    assert out.splitlines() == [
        f"{hosts[0]}: hosts host-a; 1 sources written, 0 unchanged; 2 sessions, 9 steps, "
        "1 incidents",
        f"{hosts[1]}: hosts host-b; 1 sources written, 0 unchanged; 2 sessions, 9 steps, "
        "1 incidents, 2 kept apart as ID@HOST",
        f"{hosts[2]}: hosts host-c; 1 sources written, 0 unchanged; 2 sessions, 13 steps, "
        "0 incidents",
        "6 sessions in the merged database",
    ]


def test_the_json_summary(tmp_path: Path, hosts: list[Path]) -> None:
    target = tmp_path / "team.db"
    run(str(target), *map(str, hosts))
    code, out, _ = run(str(target), *map(str, hosts), "--json")
    assert code == 0
    summary = json.loads(out)
    assert (summary["database"], summary["sessions"], summary["refused"]) == (str(target), 6, [])
    assert [(m["hosts"], m["sources"], m["unchanged_sources"], m["sessions"])
            for m in summary["merged"]] == [(["host-a"], 0, 1, 0), (["host-b"], 0, 1, 0),
                                            (["host-c"], 0, 1, 0)]


def test_a_database_that_is_no_ledger_is_reported_and_the_others_merge(
    tmp_path: Path, hosts: list[Path]
) -> None:
    junk = tmp_path / "notes.db"
    junk.write_bytes(b"these are my notes, not a database" * 50)
    target = tmp_path / "team.db"
    code, out, err = run(str(target), str(hosts[0]), str(junk), str(hosts[2]), "--json")
    assert code == 3
    assert err == f"{junk}: not a SQLite database (file is not a database); not merged\n"
    summary = json.loads(out)
    assert summary["refused"] == [{"path": str(junk), "reason":
                                   "not a SQLite database (file is not a database)"}]
    assert summary["sessions"] == 4
    assert {r["host"] for r in rows(target, "select host from sources")} == {"host-a", "host-c"}


def test_when_nothing_can_be_merged_it_exits_1(tmp_path: Path) -> None:
    junk = tmp_path / "notes.db"
    junk.write_text("nothing here")
    code, out, err = run(str(tmp_path / "team.db"), str(junk))
    assert code == 1
    assert "not merged" in err
    assert out.splitlines()[-2:] == ["1 databases not merged (see above)",
                                     "0 sessions in the merged database"]


@pytest.mark.parametrize(("args", "code", "message"), [
    (["team.db"], 2, "Missing argument 'SOURCE_DB...'"),
    (["team.db", "missing.db"], 2, "'missing.db' does not exist"),
])
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], code: int, message: str,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    got, _, err = run(*args)
    assert (got, message in err) == (code, True), err


def test_a_target_that_is_no_database_is_an_error(tmp_path: Path, hosts: list[Path]) -> None:
    target = tmp_path / "team.db"
    target.write_text("not sqlite")
    code, _, err = run(str(target), str(hosts[0]))
    assert code == 1
    assert err.startswith(f"Error: {target}: ")


def test_progress_is_shown_when_asked(tmp_path: Path, hosts: list[Path]) -> None:
    _, _, err = run(str(tmp_path / "team.db"), *map(str, hosts), "--progress")
    assert "Merging" in err
    _, _, quiet = run(str(tmp_path / "other.db"), *map(str, hosts))
    assert quiet == ""


def test_the_help_shows_examples() -> None:
    result = CliRunner().invoke(cli, ["merge", "--help"])
    assert result.exit_code == 0
    assert "agent-ledger merge team.db laptop-1.db laptop-2.db ci.db" in result.output
    assert "ID@HOST" in result.output


def test_a_database_in_a_folder_that_cannot_be_written_is_merged(
    tmp_path: Path, hosts: list[Path]
) -> None:
    """A WAL database on a read-only mount, or in another user's folder: ``mode=ro`` alone
    cannot make its ``-shm`` file, so it was refused as 'not a SQLite database'. Run without
    the capability that lets root write anywhere, so the folder's mode counts."""
    import shutil
    import subprocess
    import sys

    folder = tmp_path / "mount"
    folder.mkdir()
    shutil.copy(hosts[0], folder / "host-a.db")
    folder.chmod(0o555)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search"]
    result = subprocess.run(
        [*drop, sys.executable, "-m", "ledger", "merge", str(tmp_path / "team.db"),
         str(folder / "host-a.db")],
        capture_output=True, text=True, check=False,
    )
    folder.chmod(0o755)
    assert result.returncode == 0, result.stderr
    assert "host-a.db: hosts host-a; 1 sources written" in result.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["host-a.db"]
