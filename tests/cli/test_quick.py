"""The console script's quick answer (ledger.cli.quick): a re-ingest with nothing to read says
exactly what the full command says, with its exit code, and imports none of the command line;
a plain ingest with something to read is run without click, and says the same too; anything
else is the full command's to answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import ingest_report, quick
from ledger.cli.group import cli
from ledger.ingest.options import Options
from ledger.ingest.unchanged import DEFAULT_FOLD_DIGEST, suffix
from tests.helpers import REAL_LOGS

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
#: The console script, as pip writes it from pyproject.toml's entry point.
SCRIPT = "import sys\nfrom ledger.cli.quick import main\nsys.exit(main())"
FULL = "from ledger.cli.group import cli\ncli()"
HEAVY = ("click", "datasette", "kingfisher_sdk", "msgspec", "sqlite_utils", "pandas", "numpy",
         "typing")  # (typing, with the re, enum and contextlib it imports: 12 ms of 35)


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


def _not_a_database(folder: Path) -> None:
    (folder.parent / "ledger.db").write_bytes(b"not a database" * 100)


QUICK, PLAIN, FULL_COMMAND = "quick answer", "plain ingest", "full command"
SCENARIOS = {
    # name: (what changes, options, who answers)
    "unchanged": (_nothing, (), QUICK),
    "unchanged --strict": (_nothing, ("--strict",), QUICK),
    "unchanged --json": (_nothing, ("--json",), PLAIN),
    "unchanged, another budget": (_nothing, ("--budget", "max_rounds=5"), FULL_COMMAND),
    "unchanged --no-progress": (_nothing, ("--no-progress",), QUICK),
    "unchanged --progress": (_nothing, ("--progress",), PLAIN),
    "one file grown": (_grow, (), PLAIN),
    "one file grown --strict": (_grow, ("--strict",), PLAIN),
    "one file grown --json --no-progress": (_grow, ("--json", "--no-progress"), PLAIN),
    "one file grown --no-progress --progress": (_grow, ("--no-progress", "--progress"), PLAIN),
    "a bad file new --json --strict": (_add_bad, ("--json", "--strict"), PLAIN),
    "one file grown -j 0 --json": (_grow, ("-j", "0", "--json"), FULL_COMMAND),
    "one file grown, --strict first": (_grow, (), PLAIN),
    "one file new": (_add, (), PLAIN),
    "a bad file new": (_add_bad, (), PLAIN),
    "a bad file new --strict": (_add_bad, ("--strict",), PLAIN),
    "a bad file new --strict -j 0": (_add_bad, ("--strict", "-j", "0"), FULL_COMMAND),
    "a line still being written": (_cut, (), PLAIN),
    "a file touched": (_touch, (), PLAIN),
    "a path not there": (_nothing, ("no/such/folder",), PLAIN),
    "not a database": (_not_a_database, (), PLAIN),
}
EXITS = {"a bad file new --strict": 3, "a bad file new --strict -j 0": 3, "a path not there": 1,
         "not a database": 1, "a bad file new --json --strict": 3}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_script_says_what_the_full_command_says(
    ingested: tuple[Path, Path], scenario: str
) -> None:
    db, folder = ingested
    change, options, answers = SCENARIOS[scenario]
    change(folder)
    argv = ["ingest", str(db), str(folder), *options]
    if "first" in scenario:
        argv.insert(1, "--strict")
    quick_answers = answers == QUICK
    assert (quick.noop_summary(argv) is not None) is quick_answers
    assert (quick.plain_ingest_args(argv) is not None) is (answers != FULL_COMMAND)
    saved = db.read_bytes()  # the full command may write: both start from the same database
    script = run(SCRIPT, *argv)
    assert db.read_bytes() == saved or not quick_answers  # the quick answer writes nothing
    db.write_bytes(saved)
    full = run(FULL, *argv)
    assert script == full
    assert full[0] == EXITS.get(scenario, 0)
    assert full[2].startswith("Error: ") is (full[0] == 1)
    if change is _nothing and "--budget" not in options:
        assert db.read_bytes() == saved  # nothing migrated, nothing recomputed, by either
    if options == ("--json",):
        assert json.loads(full[1])["unchanged_files"] == 7


@pytest.mark.parametrize(("change", "first_line", "heavy"), [
    (_nothing, "7 files (0 new, 0 grown, 7 unchanged), 0 lines read", HEAVY),
    (_grow, "7 files (0 new, 1 grown, 6 unchanged), 1 lines read", ("click", "datasette")),
])
def test_the_quick_answer_imports_no_command_line(
    ingested: tuple[Path, Path], change: Callable[[Path], None], first_line: str,
    heavy: tuple[str, ...],
) -> None:
    db, folder = ingested
    change(folder)
    code, out, err = run(
        SCRIPT.replace("sys.exit(main())", "code = main()\n"
                       "import gc; print(gc.isenabled(), file=sys.stderr)\n"
                       "print(sorted({m.split('.')[0] for m in sys.modules}), file=sys.stderr)\n"
                       "sys.exit(code)"),
        "ingest", db, folder,
    )
    assert (code, out.splitlines()[0]) == (0, first_line)
    assert err.splitlines()[-2] == "True"  # the collector, held off while importing, is back
    loaded = set(json.loads(err.splitlines()[-1].replace("'", '"')))
    assert loaded.isdisjoint(heavy), loaded & set(heavy)


#: What a plain ingest of a few new lines in a known file leaves unimported, and what would
#: import it: its start is most of its time, so it imports what its lines need (issue 22).
GROWN_LEAVES_OUT = {
    "click": "the command line (the plain ingest prints its summary itself)",
    "sqlite_utils": "a migration to apply",
    "ledger.ingest.parallel": "workers, for new files of PARALLEL_MIN_BYTES or more",
    "multiprocessing": "workers",
    "ledger.ingest.memory": "workers (what is given back before they fork)",
    "ledger.ingest.copies": "a piece of a transcript that other files hold too",
    "ledger.core.family": "family stops (subagents_count_in_parent)",
    "socket": "--host's default (read from uname)",
    "tempfile": "the command line",
    "pickle": "workers (a message marshal cannot write)",
    "threading": "--follow (the event that stops it)",
    # The records made at import are msgspec structs: dataclasses cost a process ~2 ms of
    # imports (itself, copy, weakref) and 0.5-0.9 ms a class. (inspect is imported still, by
    # msgspec: it imports typing_extensions, which imports inspect.)
    "dataclasses": "a record made at import that is a dataclass",
    "copy": "a cursor MessagePack cannot copy (a lone surrogate, a huge integer)",
}


def test_a_grown_ingest_imports_only_what_its_lines_need(ingested: tuple[Path, Path]) -> None:
    db, folder = ingested
    _grow(folder)
    code, out, err = run(
        SCRIPT.replace("sys.exit(main())", "code = main()\n"
                       "print(sorted(sys.modules), file=sys.stderr)\nsys.exit(code)"),
        "ingest", db, folder,
    )
    assert (code, out.splitlines()[0]) == (0, "7 files (0 new, 1 grown, 6 unchanged), 1 lines read")
    loaded = set(json.loads(err.splitlines()[-1].replace("'", '"')))
    assert {"ledger.core.fold", "ledger.ingest.ingester"} <= loaded  # (what it does need)
    imported = {name: why for name, why in GROWN_LEAVES_OUT.items() if name in loaded}
    assert imported == {}


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


@pytest.mark.parametrize(("db", "paths", "plain"), [
    ("l.db", ["logs"], True),
    ("l.db", ["logs", "missing"], True),  # the ingest says it, as the command does
    ("logs", ["logs"], False),  # a folder for the database: click refuses it
    ("l.db", ["locked"], False),  # a file it may not read: click refuses it
])
def test_what_click_refuses_is_left_to_click(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: str, paths: list[str], plain: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "logs").mkdir()
    (tmp_path / "locked").write_text("")
    access = os.access  # (root reads every file: the refusal is made up here)
    monkeypatch.setattr(os, "access", lambda p, mode: p != "locked" and access(p, mode))
    assert (quick.plain_ingest_args(["ingest", db, *paths]) is not None) is plain


def test_shell_completion_is_left_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_AGENT_LEDGER_COMPLETE", "bash_complete")
    assert quick.plain_ingest_args(["ingest", "l.db", "logs"]) is None


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
    monkeypatch.setattr(ingest_report, "BAR_AFTER", after)
    db = samples.parent / "l.db"
    result = CliRunner().invoke(cli, ["ingest", str(db), str(samples), "--progress"])
    assert result.exit_code == 0
    assert ("Ingesting" in result.output) is drawn


def test_files_named_one_by_one_are_answered_as_their_folder(ingested: tuple[Path, Path]) -> None:
    db, folder = ingested
    files = sorted(str(p) for p in folder.rglob("*") if suffix(p.name) in quick.SUFFIXES)
    by_folder = quick.noop_summary(["ingest", str(db), str(folder)])
    assert by_folder is not None
    assert quick.noop_summary(["ingest", str(db), *files]) == by_folder
    os.symlink(files[0], folder / "link.jsonl")  # a link named: the full command notes it
    assert quick.noop_summary(["ingest", str(db), *files, str(folder / "link.jsonl")]) is None
