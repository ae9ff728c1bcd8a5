"""The docs cannot drift from the code: README.md is the front door, docs/ the reference.

* docs/cli.md is what scripts/cli_reference.py renders from every command's --help now;
* every command and every option is explained in a subject page of docs/ (not only in the
  generated reference), every exit code in the table of docs/bad-input.md;
* every relative link of README.md and docs/*.md reaches a file (and its heading, if any), and
  every path of the repository named in backticks exists;
* the examples run: SQL, TOML, the dialects' JSON, and the tour's output in the README is what
  the commands print on the public sample logs;
* the overview screenshot the README shows is committed (tests/dashboard/test_browser.py
  takes it).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shutil
import sqlite3
import struct
import tomllib
from pathlib import Path
from types import ModuleType

import click
import pytest
from click.testing import CliRunner

from ledger.cli import cli
from tests.helpers import REAL_LOGS, ROOT, SAMPLES

DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = sorted(DOCS.glob("*.md"))
#: The subject pages: the prose, without the generated command reference.
SUBJECT_PAGES = [p for p in PAGES if p.name != "cli.md"]
SCREENSHOT = DOCS / "images" / "overview.png"
SCREENSHOT_SIZE = (1280, 900)


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def reference_module() -> ModuleType:
    path = ROOT / "scripts" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def commands() -> list[tuple[str, click.Command]]:
    """Every command, and every sub-command of a group (``hook install``)."""
    found: list[tuple[str, click.Command | None]] = []
    with click.Context(cli, info_name="agent-ledger") as ctx:
        for name in cli.list_commands(ctx):
            command = cli.get_command(ctx, name)
            found.append((name, command))
            if isinstance(command, click.Group):
                with click.Context(command, parent=ctx, info_name=name) as sub:
                    found += [(f"{name} {n}", command.get_command(sub, n))
                              for n in command.list_commands(sub)]
    return [(name, command) for name, command in found if command is not None]


COMMANDS = commands()
IDS = [name for name, _ in COMMANDS]


# --- the command reference -----------------------------------------------------------------


def test_the_command_reference_is_generated_from_help() -> None:
    reference = reference_module()
    current = text(DOCS / "cli.md")
    assert current == reference.updated(current), (
        "docs/cli.md is out of date with the commands' --help: run "
        ".venv/bin/python scripts/cli_reference.py and commit docs/cli.md"
    )
    for name, _ in COMMANDS:
        assert f"## agent-ledger {name}\n" in current


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=IDS)
def test_every_command_help_shows_an_example(name: str, command: click.Command) -> None:
    assert "Example" in (command.help or ""), f"agent-ledger {name} --help has no Example block"


# --- every command, option and exit code is explained --------------------------------------


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=IDS)
def test_every_command_and_option_is_in_the_docs(name: str, command: click.Command) -> None:
    docs = "\n".join(text(p) for p in SUBJECT_PAGES)
    assert f"agent-ledger {name}" in text(README), f"the README does not list {name}"
    assert f"agent-ledger {name}" in docs
    options = [
        opt for param in command.params if isinstance(param, click.Option) and not param.hidden
        for opt in param.opts + param.secondary_opts if opt.startswith("--")
    ]
    missing = [opt for opt in options if opt not in docs]
    assert not missing, f"{name}: {missing} are explained in no page of docs/"


def exit_codes() -> set[int]:
    """The EXIT_ constants of the command line (ledger.cli, or its options module)."""
    codes: set[int] = set()
    for name in ("ledger.cli", "ledger.cli.options"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        codes |= {v for k, v in vars(module).items() if k.startswith("EXIT_")}
    return codes


def test_every_exit_code_in_the_cli_is_in_the_exit_code_table() -> None:
    page = text(DOCS / "bad-input.md")
    table = page.split("## Exit codes\n", 1)[1]
    codes = exit_codes()
    assert codes >= {1, 3, 4, 5, 6}
    for code in codes | {0, 2}:
        assert f"\n| {code} |" in table, code


# --- links and paths -----------------------------------------------------------------------


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    found: set[str] = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in found:
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found


LINK = re.compile(r"\]\(([^)\s]+)\)")
DOCUMENTS = [README, *PAGES]


def prose(markdown: str) -> str:
    """The text outside fenced code blocks."""
    return "".join(part for i, part in enumerate(re.split(r"^```.*$", markdown, flags=re.M))
                   if i % 2 == 0)


@pytest.mark.parametrize("document", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_every_relative_link_reaches_a_file_and_heading(document: Path) -> None:
    broken = []
    for target in LINK.findall(prose(text(document))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(text(file)):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{document.relative_to(ROOT)}: {broken}"


#: A path of the repository named in backticks: `ledger/core/budget.py`, `tests/fixtures/`.
REPO_PATH = re.compile(r"`((?:ledger|plugins|tests|bench|scripts|docs|sample_ledgers)/[^`\s]*)`")


#: Folders git ignores, made by a run, and what lies in them (the benchmark's corpus and venvs,
#: the browser tests' screenshots).
GENERATED = frozenset({"bench/data/", "tests/screenshots/"})


def test_every_repository_path_named_in_the_docs_exists() -> None:
    """Modules, tests and scripts named in backticks in the README and docs/ exist."""
    named = {
        (document.name, path.split("::")[0].rstrip(".,:;"))
        for document in DOCUMENTS for path in REPO_PATH.findall(text(document))
    }
    missing = sorted(
        f"{doc}: {path}" for doc, path in named
        if "*" not in path and "<" not in path and not path.startswith(tuple(GENERATED))
        and not (ROOT / path).exists()
    )
    assert not missing, missing


# --- the README is a front door ------------------------------------------------------------


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = text(README).splitlines()
    assert len(lines) <= 200
    first_screen = "\n".join(lines[:30])
    assert "    scripts/demo\n" in first_screen and "    scripts/test\n" in first_screen
    assert "](docs/images/overview.png)" in text(README)


def test_the_overview_screenshot_is_committed() -> None:
    """A PNG of the viewport (1280x900); tests/dashboard/test_browser.py rewrites it with
    AGENT_LEDGER_UPDATE_SCREENSHOT=1."""
    data = SCREENSHOT.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == SCREENSHOT_SIZE
    assert len(data) > 20_000  # a page, not a blank


# --- the examples run ----------------------------------------------------------------------


def blocks(language: str) -> list[tuple[str, str]]:
    """(page, code) of every fenced block of ``language`` in README.md and docs/."""
    found = []
    for document in DOCUMENTS:
        for code in re.findall(rf"^```{language}\n(.*?)^```", text(document), flags=re.M | re.S):
            found.append((document.name, code))
    return found


def run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def samples_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("docs") / "ledger.db"
    run("ingest", str(db), str(SAMPLES))
    return db


@pytest.mark.parametrize(("page", "sql"), blocks("sql"), ids=lambda v: v[:40])
def test_the_sql_examples_run(samples_db: Path, page: str, sql: str) -> None:
    conn = sqlite3.connect(samples_db)
    try:
        found = conn.execute(sql).fetchall()
    finally:
        conn.close()
    assert found, f"{page}: {sql!r} found nothing in the samples"


@pytest.mark.parametrize(("page", "toml"), blocks("toml"), ids=lambda v: v[:40])
def test_the_toml_examples_parse(page: str, toml: str) -> None:
    assert tomllib.loads(toml)


def test_the_vendor_map_example_loads(tmp_path: Path) -> None:
    page = text(DOCS / "budget.md").split("## Vendor stop strings", 1)[1]
    example = page.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "map.toml").write_text(example)
    out = run("ingest", str(tmp_path / "l.db"), str(SAMPLES), "--vendor-map",
              str(tmp_path / "map.toml"), "--json")
    assert json.loads(out)["stop_reasons"].get("unknown_vendor") is None


def test_the_dialect_examples_are_read_without_error(tmp_path: Path) -> None:
    page = text(DOCS / "dialects.md")
    examples = re.findall(r"^```json\n(.*?)^```", page, flags=re.M | re.S)
    assert len(examples) == 3  # trace, gate, native
    trace, gate, native = examples
    (tmp_path / "trace.json").write_text(trace)
    (tmp_path / "gate.jsonl").write_text(gate)
    (tmp_path / "native.jsonl").write_text(native)
    for name, dialect, sessions in (
        ("trace.json", "trace", 1), ("gate.jsonl", "gate", 1), ("native.jsonl", "native", 1),
    ):
        result = CliRunner().invoke(cli, ["replay", str(tmp_path / name), "--json"])
        assert result.exit_code == 0, result.output
        found = json.loads(result.stdout)
        assert len(found) == sessions and found[0]["dialect"] == dialect, name
        assert "put aside" not in result.stderr, name


def home_layout(home: Path) -> None:
    """The public sample logs, laid out as in a home folder (the README's tour)."""
    project = home / ".claude" / "projects" / "-home-marco-projects-spotter"
    codex = home / ".codex" / "sessions"
    layout = {
        "01_": project / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl",
        "02_": project / "8463c716-a2ea-4c14-9efa-87158ebd9f20/subagents/agent-a7be2f0.jsonl",
        "03_": project / "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
        "04_": codex / "2026/01/02/rollout-2026-01-02T18-39-45-019b7f94.jsonl",
        "05_": codex / "2026/05/11/rollout-2026-05-11T11-26-55-019e1625.jsonl",
    }
    for prefix, target in layout.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(next(REAL_LOGS.glob(f"{prefix}*")), target)


def shown_output(readme: str, command: str) -> list[str]:
    """The lines the README shows after ``$ command``, up to the end of the indented block."""
    block = readme.split(f"    $ {command}\n", 1)[1]
    lines = []
    for line in block.splitlines():
        if not line.startswith("    "):
            break
        lines.append(line[4:])
    return lines


def test_the_tour_shows_what_the_commands_print(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the summary names the database as given: ledger.db
    home_layout(Path("home"))
    logs = ("home/.claude/projects", "home/.codex/sessions")
    readme = text(README)
    ingest = run("ingest", "ledger.db", *logs)
    command = "agent-ledger ingest ledger.db ~/.claude/projects ~/.codex/sessions"
    shown = shown_output(readme, command)
    assert ingest.splitlines() == shown
    paid = run("paid-path", "ledger.db").splitlines()
    shown = shown_output(readme, "agent-ledger paid-path ledger.db")
    assert shown[0] == paid[0]
    for line in shown[1:]:  # an excerpt: every line shown is printed ("..." elides)
        assert line.strip() == "..." or line in paid, f"paid-path does not print {line!r}"
    rerun = run("ingest", "ledger.db", *logs)
    assert "0 sessions updated" in rerun
    # Step 4: the proposal, then every file folded again under it.
    # The README shows stdout (`>` takes it too); the notes go to stderr.
    proposal = CliRunner().invoke(cli, ["propose-budget", "ledger.db"], catch_exceptions=False)
    Path("budget.toml").write_text(proposal.stdout)
    measured = CliRunner().invoke(
        cli, ["ingest", "ledger.db", *logs, "--budget-file", "budget.toml"], catch_exceptions=False
    )
    command = f"{command} --budget-file budget.toml"
    assert measured.stdout.splitlines() == shown_output(readme, command)
    assert measured.stderr.count("read again from the start") == 5
