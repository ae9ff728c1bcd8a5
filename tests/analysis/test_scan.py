"""The leftovers walk over a code base, the leftovers table, and the command."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from ledger.analysis.leftovers import CATEGORIES, Patterns, to_markdown
from ledger.analysis.scan import scan, store_findings
from ledger.cli import cli
from ledger.cli.options import EXIT_STRICT
from ledger.db import connection, migrations
from tests.helpers import FIXTURES, ROOT, rows

#: Everything the fixture repository holds, as (path, line, category).
EXPECTED = {
    (".env.example", 2, "paid_agent_path"),
    (".env.example", 3, "paid_agent_path"),
    (".github/workflows/agent.yml", 8, "ci_retry"),
    (".github/workflows/agent.yml", 10, "ci_retry"),
    (".github/workflows/agent.yml", 11, "ci_retry"),
    (".gitlab-ci.yml", 3, "ci_retry"),
    (".gitlab-ci.yml", 5, "ci_retry"),
    (".vscode/extensions.json", 3, "ide_extension"),
    (".vscode/settings.json", 3, "ide_extension"),
    ("app/prompts.py", 1, "continue_prompt"),
    ("app/prompts.py", 5, "continue_prompt"),
    ("app/resume.py", 5, "resume_webhook"),
    ("app/resume.py", 6, "resume_webhook"),
    ("app/resume.py", 12, "resume_webhook"),
    ("config/agent.yaml", 2, "loop_setting"),
    ("config/agent.yaml", 3, "loop_setting"),
    ("config/agent.yaml", 4, "loop_setting"),
    ("dashboards/agent.json", 4, "vendor_dashboard"),
    ("tools/watch.py", 1, "file_watcher"),
    ("tools/watch.py", 9, "file_watcher"),
}
FIXTURE_FILES = 12


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The fixture repository plus what the walk must skip: .git, node_modules, a virtualenv,
    a binary file, a symbolic link and (with a small limit) a large file."""
    target = tmp_path / "service"
    shutil.copytree(FIXTURES / "leftovers_repo", target)
    for skipped in (".git/config", "node_modules/agent/index.js", ".venv/lib/agent.py"):
        (target / skipped).parent.mkdir(parents=True)
        (target / skipped).write_text("PAID_AGENT=1\nmax_iterations = 3\n")
    (target / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0max_iterations PAID_AGENT")
    (target / "app" / "big.log").write_text("max_iterations\n" + "x" * 5000)
    (target / "link.yaml").symlink_to(target / "config" / "agent.yaml")
    return target


def found(result) -> set[tuple[str, int, str]]:
    return {(f.path, f.line, f.category) for f in result.findings}


def test_the_walk_finds_every_leftover_and_skips_what_it_must(repo: Path) -> None:
    result = scan(repo, max_bytes=4096)
    assert found(result) == EXPECTED
    assert result.tally.to_dict() == {
        "files": FIXTURE_FILES, "binary": 1, "too_large": 1, "unreadable": 0, "links": 1,
        "checklists": 0,
    }
    assert result.repo == str(repo.resolve())


def test_more_folders_can_be_skipped_and_the_output_file_is_never_read(repo: Path) -> None:
    out = repo / "leftovers.md"
    out.write_text("max_iterations everywhere\n")
    result = scan(repo, Patterns(skip_dirs=("app", "tools")), exclude=out)
    assert {p for p, _, _ in found(result)} & {"app/resume.py", "tools/watch.py", "leftovers.md"} \
        == set()
    # .venv is searched once it is no longer in skip_dirs
    assert (".venv/lib/agent.py", 2, "loop_setting") in found(result)


def test_an_earlier_runs_checklist_is_not_searched_again(repo: Path) -> None:
    (repo / "app" / "big.log").unlink()  # (the checklist is larger than its limit)
    first = scan(repo)
    checklist = to_markdown(first.repo, first.findings, first.categories, first.tally)
    (repo / "docs").mkdir()
    (repo / "docs" / "leftovers.md").write_text(checklist)  # written with --output elsewhere
    (repo / "notes.md").write_text(f"About the checklist:\n{checklist}")  # not one: searched
    again = scan(repo)
    assert again.tally.checklists == 1 and again.tally.files == FIXTURE_FILES + 1
    assert {f for f in found(again) if f[0] != "notes.md"} == EXPECTED
    assert any(f[0] == "notes.md" for f in found(again))
    assert ", 1 leftover checklists)" in to_markdown(
        again.repo, again.findings, again.categories, again.tally
    )


def test_a_latin1_file_is_still_searched(tmp_path: Path) -> None:
    (tmp_path / "old.py").write_bytes("# caf\xe9\nmax_iterations = 1\n".encode("latin-1"))
    assert found(scan(tmp_path)) == {("old.py", 2, "loop_setting")}


# --- the leftovers table ----------------------------------------------------------------------


def test_the_migration_adds_the_leftovers_table(db_path: Path) -> None:
    connection.connect(db_path).conn.close()
    with closing(sqlite3.connect(db_path)) as conn:
        assert conn.execute("pragma user_version").fetchone()[0] == len(migrations.MIGRATIONS)
        columns = [r[1] for r in conn.execute("pragma table_info(leftovers)")]
    assert columns == [
        "repo", "path", "line", "category", "matched", "text", "action", "scanned_at",
    ]


def test_a_second_scan_replaces_the_rows_of_that_repository_only(
    repo: Path, tmp_path: Path, db_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_text("PAID_AGENT = 1\n")
    assert store_findings(db_path, scan(repo, max_bytes=4096)) == len(EXPECTED)
    store_findings(db_path, scan(other))
    (repo / "config" / "agent.yaml").write_text("model: local\n")
    store_findings(db_path, scan(repo, max_bytes=4096))
    stored = rows(db_path, "select repo, path, line, category, action from leftovers")
    mine = {(r["path"], r["line"], r["category"]) for r in stored if r["repo"] == str(repo)}
    assert mine == {f for f in EXPECTED if f[0] != "config/agent.yaml"}
    assert [r["path"] for r in stored if r["repo"] == str(other)] == ["a.py"]
    actions = {c.name: c.action for c in CATEGORIES}
    assert all(r["action"] == actions[r["category"]] for r in stored)


def test_metadata_describes_the_table_and_its_query_runs(repo: Path, db_path: Path) -> None:
    store_findings(db_path, scan(repo, max_bytes=4096))
    metadata = yaml.safe_load((ROOT / "metadata.yml").read_text())["databases"]["ledger"]
    table = metadata["tables"]["leftovers"]
    assert "delete it or pass the same LoopBudget" in table["description"]
    with closing(sqlite3.connect(db_path)) as conn:
        columns = [r[1] for r in conn.execute("pragma table_info(leftovers)")]
        assert set(table["columns"]) == set(columns)
        query = metadata["queries"]["leftover_checklist"]["sql"]
        result = conn.execute(query, {"category": "", "repo": ""}).fetchall()
        assert len(result) == len(EXPECTED)
        only = conn.execute(query, {"category": "ci_retry", "repo": ""}).fetchall()
        assert len(only) == 5


# --- the command ----------------------------------------------------------------------------


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_writes_leftovers_md_into_the_repository_and_the_table(
    repo: Path, db_path: Path
) -> None:
    result = invoke("leftovers", repo, "--db", db_path)
    assert result.exit_code == 0, result.output
    # At the default size limit app/big.log is read too (one more file, one more leftover).
    assert result.output.splitlines() == [
        f"{FIXTURE_FILES + 1} files searched, {len(EXPECTED) + 1} leftovers found "
        "(loop_setting 4, paid_agent_path 2, ide_extension 2, ci_retry 5, resume_webhook 3, "
        "continue_prompt 2, file_watcher 2, vendor_dashboard 1)",
        f"wrote {repo / 'leftovers.md'} and the leftovers table of {db_path}",
    ]
    text = (repo / "leftovers.md").read_text()
    assert "- [ ] `config/agent.yaml:2`: `max_iterations: 40`" in text
    again = invoke("leftovers", repo, "--db", db_path)  # leftovers.md itself is not searched
    assert again.output == result.output
    assert len(rows(db_path, "select * from leftovers")) == len(EXPECTED) + 1  # app/big.log


def test_cli_json_strict_and_standard_output(repo: Path, tmp_path: Path) -> None:
    result = invoke("leftovers", repo, "--json", "--strict", "-o", tmp_path / "l.md",
                    "--max-file-bytes", 4096)
    assert result.exit_code == EXIT_STRICT
    data = json.loads(result.stdout)
    assert {(f["path"], f["line"], f["category"]) for f in data["findings"]} == EXPECTED
    assert data["searched"]["binary"] == 1
    printed = invoke("leftovers", repo, "-o", "-")
    assert printed.stdout.startswith("# Leftovers: second control planes")
    assert not (repo / "leftovers.md").exists()


def test_cli_clean_repository_with_strict_exits_0(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print('hello')\n")
    result = invoke("leftovers", tmp_path, "--strict")
    assert result.exit_code == 0
    assert "1 files searched, 0 leftovers found" in result.output


def test_cli_patterns_file(repo: Path, tmp_path: Path) -> None:
    patterns = tmp_path / "p.toml"
    patterns.write_text('replace = true\n[categories.fixture]\npatterns = ["Example service"]\n')
    result = invoke("leftovers", repo, "--patterns", patterns, "--json", "-o", tmp_path / "x.md")
    assert [(f["path"], f["category"]) for f in json.loads(result.stdout)["findings"]] == [
        ("README.md", "fixture")
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("replace = [", "not a valid TOML patterns file"),
        ('[categories.x]\npatterns = ["("]\n', "bad pattern '('"),
    ],
)
def test_cli_bad_patterns_file(repo: Path, tmp_path: Path, content: str, message: str) -> None:
    patterns = tmp_path / "p.toml"
    patterns.write_text(content)
    result = invoke("leftovers", repo, "--patterns", patterns)
    assert result.exit_code == 1
    assert message in result.output
    assert not (repo / "leftovers.md").exists()


def test_cli_json_and_standard_output_conflict(repo: Path) -> None:
    assert invoke("leftovers", repo, "--json", "-o", "-").exit_code == 2


def _refused(monkeypatch: pytest.MonkeyPatch, refused: Path) -> None:
    """``refused`` cannot be read (as root, chmod 000 would not stop the test)."""
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == refused:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p, _m: os.mkfifo(p), "not a regular file"),  # was waited on, forever
        (lambda p, m: (p.write_text("x\n"), _refused(m, p)), "Permission denied"),
        (lambda p, _m: p.write_text("plain text\n"), None),
    ],
    ids=["fifo", "unreadable", "regular"],
)
def test_a_file_that_cannot_be_read_is_counted_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Any, why: str | None
) -> None:
    """Before: a FIFO hung the walk, and an unreadable file was counted but never named."""
    (tmp_path / "a.py").write_text("x = 1\n")
    make(tmp_path / "b.py", monkeypatch)
    done: list = []
    worker = threading.Thread(target=lambda: done.append(scan(tmp_path)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert done, "the walk waited on the FIFO"
    expected = [] if why is None else [f"{tmp_path.resolve() / 'b.py'}: {why}"]
    assert done[0].unreadable == expected
    assert done[0].tally.unreadable == len(expected)
    assert done[0].tally.files == 2 - len(expected)
    result = invoke("leftovers", tmp_path, "-o", tmp_path / "l.md")
    assert result.exit_code == 0
    assert result.stderr == "".join(f"{note}; not searched\n" for note in expected)


def test_cli_db_that_is_no_ledger_is_refused_and_left_as_it_was(
    repo: Path, tmp_path: Path
) -> None:
    """Before: a foreign SQLite file given as --db was migrated into a ledger (20 tables)."""
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute("create table mine (x)")
        conn.commit()
    before = other.read_bytes()
    result = invoke("leftovers", repo, "--db", other, "-o", tmp_path / "l.md")
    assert result.exit_code == 1
    assert "other.db: not an agent-ledger database" in result.output
    assert other.read_bytes() == before
