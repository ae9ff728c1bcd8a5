"""The console script's quick answer (ledger.cli.quick): a re-ingest with nothing to read says
exactly what the full command says, with its exit code, and imports none of the command line;
anything else is the full command's to answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import ingest as ingest_cli
from ledger.cli import quick
from ledger.cli.group import cli
from ledger.ingest.options import Options
from ledger.ingest.unchanged import DEFAULT_FOLD_DIGEST, suffix
from tests.helpers import REAL_LOGS

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
#: The console script, as pip writes it from pyproject.toml's entry point.
SCRIPT = "import sys\nfrom ledger.cli.quick import main\nsys.exit(main())"
FULL = "from ledger.cli.group import cli\ncli()"
HEAVY = ("click", "datasette", "kingfisher_sdk", "msgspec", "sqlite_utils", "pandas", "numpy")


def run(code: str, *args: str | Path) -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=ENV,
                          capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def ingested(samples: Path) -> tuple[Path, Path]:
    """A folder of ledgers (the seeds' samples and a real Claude Code log), ingested once."""
    shutil.copy(REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl", samples)
    db = samples.parent / "ledger.db"
    assert run(FULL, "ingest", db, samples)[0] == 0
    return db, samples


GROWN = "bugfix/night-run.jsonl"  # native events, one session after another


def _grow(folder: Path) -> None:
    with (folder / GROWN).open("a") as f:
        f.write('{"session": "s9", "type": "round"}\n')


def _add(folder: Path) -> None:
    (folder / "new.jsonl").write_text('{"session": "n1", "type": "round"}\n')


def _add_bad(folder: Path) -> None:
    (folder / "bad.jsonl").write_text('{"session": "b1", "type": "round"}\n{oops\n')


def _cut(folder: Path) -> None:
    with (folder / GROWN).open("a") as f:
        f.write('{"session": "s9", "ty')  # a line still being written


def _touch(folder: Path) -> None:
    path = folder / GROWN
    os.utime(path, (1.0, 1.0))  # the same bytes, another time: the full claim tells


def _nothing(_folder: Path) -> None:
    pass


SCENARIOS = {
    # name: (what changes, options, whether the quick answer gives it)
    "unchanged": (_nothing, (), True),
    "unchanged --strict": (_nothing, ("--strict",), True),
    "unchanged --json": (_nothing, ("--json",), False),
    "unchanged, another budget": (_nothing, ("--budget", "max_rounds=5"), False),
    "unchanged --no-progress": (_nothing, ("--no-progress",), False),
    "one file grown": (_grow, (), False),
    "one file new": (_add, (), False),
    "a bad file new": (_add_bad, ("--strict",), False),
    "a line still being written": (_cut, (), False),
    "a file touched": (_touch, (), False),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_script_says_what_the_full_command_says(
    ingested: tuple[Path, Path], scenario: str
) -> None:
    db, folder = ingested
    change, options, quick_answers = SCENARIOS[scenario]
    change(folder)
    argv = ["ingest", str(db), str(folder), *options]
    assert (quick.noop_summary(argv) is not None) is quick_answers
    saved = db.read_bytes()  # the full command may write: both start from the same database
    script = run(SCRIPT, *argv)
    assert db.read_bytes() == saved or not quick_answers  # the quick answer writes nothing
    db.write_bytes(saved)
    full = run(FULL, *argv)
    assert script == full
    if change is _nothing and "--budget" not in options:
        assert db.read_bytes() == saved  # nothing migrated, nothing recomputed, by either
    if options == ("--json",):
        assert json.loads(full[1])["unchanged_files"] == 7


def test_the_quick_answer_imports_no_command_line(ingested: tuple[Path, Path]) -> None:
    db, folder = ingested
    code, out, err = run(
        SCRIPT.replace("sys.exit(main())", "code = main()\n"
                       "print(sorted({m.split('.')[0] for m in sys.modules}), file=sys.stderr)\n"
                       "sys.exit(code)"),
        "ingest", db, folder,
    )
    assert (code, out.splitlines()[0]) == (0, "7 files (0 new, 0 grown, 7 unchanged), 0 lines read")
    loaded = set(json.loads(err.replace("'", '"')))
    assert loaded.isdisjoint(HEAVY), loaded & set(HEAVY)


@pytest.mark.parametrize("argv", [
    [], ["ingest"], ["ingest", "db"], ["--help"], ["ingest", "--help"], ["ingest", "-h", "x"],
    ["serve", "db", "x"], ["ingest", "db", "x", "--json"], ["ingest", "db", "-"],
])
def test_what_is_not_a_bare_ingest_goes_to_the_full_command(argv: list[str]) -> None:
    assert quick.noop_summary(argv) is None


def test_a_database_not_there_is_the_full_commands_to_make(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"session": "s", "type": "round"}\n')
    assert quick.noop_summary(["ingest", str(tmp_path / "l.db"), str(tmp_path)]) is None
    assert not (tmp_path / "l.db").exists()


def test_the_default_fold_digest_is_current() -> None:
    assert Options().fold_digest == DEFAULT_FOLD_DIGEST


def test_the_price_data_named_is_the_pinned_one_installed() -> None:
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "genai-prices==0.2.3" in pins
    assert quick.PRICES_DIST == f"genai_prices-{version('genai-prices')}.dist-info"


@pytest.mark.parametrize("name", [
    "a.jsonl", "a.json", ".json", "..json", "a.json.", "a.tar.json", ".hidden.jsonl", "a.JSON",
    "jsonl", "a.jsonl~",
])
def test_ledger_names_are_told_as_the_full_command_tells_them(name: str) -> None:
    assert suffix(name) == Path(name).suffix


@pytest.mark.parametrize(("after", "drawn"), [(3600.0, False), (0.0, True)])
def test_the_progress_bar_is_drawn_once_an_ingest_has_run_a_while(
    samples: Path, monkeypatch: pytest.MonkeyPatch, after: float, drawn: bool
) -> None:
    monkeypatch.setattr(ingest_cli, "BAR_AFTER", after)
    db = samples.parent / "l.db"
    result = CliRunner().invoke(cli, ["ingest", str(db), str(samples), "--progress"])
    assert result.exit_code == 0
    assert ("Ingesting" in result.output) is drawn
