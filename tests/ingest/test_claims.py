"""What the claims of one ingest pass share (:class:`ledger.ingest.claims.Settings`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger.core.task_classes import TaskClasses
from ledger.ingest.claims import Settings
from ledger.ingest.options import Options, task_class_for

OPTIONS = {
    "default": Options(),
    "a budget file rule": Options(task_classes=TaskClasses((("*/real", "by-rule"),))),
    "--task-class": Options(task_class="given"),
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Files of one folder, a folder linked to it, a file linked into another folder, and a
    relative path, each named twice so that the second is answered from memory."""
    real, other = tmp_path / "real", tmp_path / "other-folder"
    real.mkdir()
    other.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (real / name).write_text("{}\n")
    (tmp_path / "linked").symlink_to(real)
    (other / "c.jsonl").symlink_to(real / "a.jsonl")
    (other / "d.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    named = [real / "a.jsonl", real / "b.jsonl", tmp_path / "linked" / "b.jsonl",
             other / "c.jsonl", other / "d.jsonl", Path("real") / "a.jsonl",
             Path(os.path.relpath(other / "c.jsonl"))]
    return [*named, *reversed(named)]


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS.keys())
def test_a_pass_gives_each_file_the_task_class_of_task_class_for(
    files: list[Path], options: Options
) -> None:
    settings = Settings(options)
    assert [settings.task_class(p) for p in files] == [task_class_for(p, options) for p in files]


def test_a_file_linked_into_another_folder_is_classed_by_its_target(files: list[Path]) -> None:
    settings = Settings(Options())
    linked, beside = files[3], files[4]
    assert (settings.task_class(linked), settings.task_class(beside)) == ("real", "other-folder")


def test_the_settings_hold_the_fold_digest() -> None:
    assert Settings(Options()).digest == Options().fold_digest
