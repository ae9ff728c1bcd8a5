"""Task classes: the repository a log names (worktrees and temporary folders resolved), and
the budget file's ``[task_classes]`` globs over it (ledger/core/task_classes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.cli.options import make_options
from ledger.config.budget_file import read_budget_file, read_task_classes
from ledger.core.budget import BudgetError
from ledger.core.task_classes import TEMP_CLASS, TaskClasses, repo_name
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options, task_class_for
from tests.helpers import REAL_LOGS, rows


@pytest.mark.parametrize(
    ("folder", "url", "expected"),
    [
        ("/home/marco/projects/spotter", None, "spotter"),  # sample 01
        ("/home/USER/projects/spotter-worktrees/spotter-fum", None, "spotter"),  # sample 02
        ("/Users/alex/workspace/cli/.worktrees/1", None, "cli"),  # more/cc_entire__1a
        ("/x/api/.claude/worktrees/2", None, "api"),  # Claude Code's own worktrees
        ("/x/api/.claude/worktrees/2/src", None, "api"),  # a folder inside one
        ("/x/api/.git/worktrees/feature", None, "api"),
        ("/tmp/tmp74wiyiny", None, TEMP_CLASS),  # more/cc_reliability__hello-world-script
        ("/var/folders/k2/T/tmpw6sk2trg", None, TEMP_CLASS),
        ("/tmp/private", None, "private"),  # a named folder is a name, even under /tmp
        ("C:\\src\\api\\", None, "api"),
        ("/Users/u/repos/clone", "git@github.com:codemie-ai/codemie-code.git", "codemie-code"),
        (None, "https://github.com/org/api.git", "api"),
        (None, "https://github.com/org/api/", "api"),
        ("/", None, None),
        (None, None, None),
        ("/x/.worktrees", None, ".worktrees"),  # a marker with nothing after it is a folder
    ],
)
def test_the_repository_a_log_names(folder: str | None, url: str | None, expected: str) -> None:
    assert repo_name(folder, url) == expected


RULES = TaskClasses((("*/tmp*", "scratch"), ("/home/me/src/api*", "api"), ("*", "other")))


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        ("/tmp/tmp74wiyiny", "scratch"),
        ("/home/me/src/api-v2", "api"),
        ("/home/me/src/api/", "api"),  # a trailing separator does not count
        ("C:\\tmp\\x", "scratch"),  # Windows separators match as /
        ("/home/me/src/web", "other"),  # first match wins: the catch-all last
        (None, None),
    ],
)
def test_the_first_glob_that_matches_names_the_class(folder: str | None, expected: str) -> None:
    assert RULES.name_for(folder) == expected


@given(st.text())
def test_no_rules_name_nothing(folder: str) -> None:
    assert TaskClasses().name_for(folder) is None


def test_the_rules_are_part_of_the_fold_digest() -> None:
    assert Options(task_classes=RULES).fold_digest != Options().fold_digest
    assert Options(task_classes=RULES).fold_digest == Options(task_classes=RULES).fold_digest


def test_a_budget_file_holds_budget_keys_and_task_classes(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text('max_steps = 40\n\n[task_classes]\n"*/tmp*" = "scratch"\n"*/api*" = "api"\n')
    assert read_budget_file(path) == {"max_steps": 40}
    assert read_task_classes(path).rules == (("*/tmp*", "scratch"), ("*/api*", "api"))
    options = make_options((), str(path), None)
    assert (options.budget.max_steps, options.task_classes) == (40, read_task_classes(path))


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("task_classes = 3\n", "[task_classes] must be a table"),
        ('[task_classes]\n"*" = 3\n', "'*': the task class must be a non-empty string"),
        ('[task_classes]\n"*" = " "\n', "'*': the task class must be a non-empty string"),
    ],
)
def test_a_bad_task_classes_table_is_named(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "budget.toml"
    path.write_text(text)
    with pytest.raises(BudgetError, match=r"budget\.toml: .*" + error.replace("[", r"\[")):
        read_task_classes(path)


def test_the_real_samples_are_classed_by_their_repository(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    ingest(db, sorted(REAL_LOGS.glob("0[1-5]_*.jsonl")), Options())
    found = {r["task_class"] for r in rows(db, "select task_class from sessions")}
    assert found == {"spotter", "codemie-code"}  # not "spotter-fum", "spotter-gqc"


def test_a_budget_file_rule_overrides_the_repository(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    rules = TaskClasses((("*/spotter-worktrees/*", "spotter-worktree"),))
    ingest(db, sorted(REAL_LOGS.glob("0[1-3]_*.jsonl")), Options(task_classes=rules))
    found = sorted(r["task_class"] for r in rows(db, "select task_class from sessions"))
    assert found == ["spotter", "spotter-worktree", "spotter-worktree"]


def test_a_seed_ledger_is_classed_by_the_rule_for_its_folder(tmp_path: Path) -> None:
    log = tmp_path / "tmpabc" / "run.jsonl"
    log.parent.mkdir()
    assert task_class_for(log, Options()) == "tmpabc"
    assert task_class_for(log, Options(task_classes=TaskClasses((("*/tmpabc", "x"),)))) == "x"
    assert task_class_for(log, Options(task_class="given")) == "given"
