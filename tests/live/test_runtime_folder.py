"""The resident servers' short folder: a folder of this user's alone, or none."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.live.runtime_folder import is_private


def private(path: Path) -> Path:
    path.mkdir(mode=0o700)
    return path


def open_to(mode: int) -> Callable[[Path], Path]:
    def make(path: Path) -> Path:
        path.mkdir()
        path.chmod(mode)
        return path
    return make


def link_to_private(path: Path) -> Path:
    target = private(path.with_name("target"))
    path.symlink_to(target)
    return path


def a_file(path: Path) -> Path:
    path.write_text("")
    path.chmod(0o600)
    return path


def another_users(path: Path) -> Path:
    if os.getuid() != 0:
        pytest.skip("only root can give a folder to another user")
    private(path)
    os.chown(path, 65534, 65534)
    return path


@pytest.mark.parametrize(("make", "expected"), [
    (private, True),
    (open_to(0o777), False),
    (open_to(0o750), False),  # others of the group may read it
    (open_to(0o702), False),
    (link_to_private, False),  # a link someone could point elsewhere
    (a_file, False),
    (lambda path: path, False),  # not there
    (another_users, False),
], ids=["0700", "0777", "0750", "0702", "link", "file", "missing", "another user's"])
def test_only_a_folder_of_this_users_alone_is_private(
    tmp_path: Path, make: Callable[[Path], Path], expected: bool
) -> None:
    assert is_private(str(make(tmp_path / "agent-ledger"))) is expected
