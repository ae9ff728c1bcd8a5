"""The brake's entries in Claude Code's settings.json: merged in and taken out, nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.live import hook_settings as hs

CMD = "/usr/bin/agent-ledger hook claude-code --db /tmp/l.db"
THEIRS = {"type": "command", "command": "jq -r .tool_input.command >> ~/bash.log"}
SETTINGS: dict[str, dict[str, Any]] = {
    "empty": {},
    "other settings": {"model": "opus", "permissions": {"deny": ["Bash(rm:*)"]}},
    "their PreToolUse hook": {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [THEIRS]}]}},
    "their other events": {"hooks": {"Stop": [{"hooks": [THEIRS]}],
                                      "PostToolUse": [{"matcher": "Write", "hooks": [THEIRS]}]}},
    "ours beside theirs in one group": {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
        THEIRS, {"type": "command", "command": "agent-ledger hook claude-code --fail-open"}]}]}},
}


def ours(settings: dict[str, Any]) -> list[str]:
    return [h["command"] for groups in settings.get("hooks", {}).values() for g in groups
            for h in g.get("hooks", []) if hs.is_ours(h)]


def theirs(settings: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(event, h) for event, groups in settings.get("hooks", {}).items() for g in groups
            for h in g.get("hooks", []) if not hs.is_ours(h)]


@pytest.mark.parametrize("before", SETTINGS.values(), ids=SETTINGS.keys())
def test_install_adds_one_entry_and_keeps_everything_else(before: dict[str, Any]) -> None:
    after = hs.installed(before, CMD)
    assert ours(after) == [CMD]
    assert after["hooks"]["PreToolUse"][-1] == {
        "matcher": "*", "hooks": [{"type": "command", "command": CMD, "timeout": hs.TIMEOUT_S}]}
    assert hs.installed(after, CMD) == after  # idempotent
    assert hs.uninstalled(after) == hs.uninstalled(before)  # only ours taken out
    assert theirs(after) == theirs(before)
    assert {k: v for k, v in after.items() if k != "hooks"} == {
        k: v for k, v in before.items() if k != "hooks"}


def test_uninstall_of_settings_without_it_changes_nothing() -> None:
    for before in SETTINGS.values():
        if not ours(before):
            assert hs.uninstalled(before) == before


@given(st.lists(st.sampled_from(["Bash", "*", "Write|Edit"]), max_size=4), st.booleans())
def test_install_then_uninstall_is_the_identity(matchers: list[str], with_other: bool) -> None:
    before: dict[str, Any] = {"hooks": {"PreToolUse": [
        {"matcher": m, "hooks": [THEIRS]} for m in matchers]}} if matchers else {}
    if with_other:
        before["env"] = {"X": "1"}
    assert hs.uninstalled(hs.installed(before, CMD)) == before


@pytest.mark.parametrize(
    ("scope", "where"),
    [("project", "proj/.claude/settings.json"), ("local", "proj/.claude/settings.local.json"),
     ("user", "home/.claude/settings.json")],
)
def test_where_settings_live(scope: str, where: str, tmp_path: Path) -> None:
    assert hs.settings_path(scope, tmp_path / "proj", tmp_path / "home") == tmp_path / where


@pytest.mark.parametrize(
    ("text", "error"),
    [("[1]", "must be a JSON object"), ("{", "not valid JSON"),
     ('{"hooks": []}', "'hooks' must be an object")],
)
def test_bad_settings_are_refused(text: str, error: str, tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(hs.SettingsError, match=error):
        hs.installed(hs.read(path), CMD)


def test_write_keeps_a_backup_of_each_change(tmp_path: Path) -> None:
    path = tmp_path / ".claude" / "settings.json"
    assert hs.write(path, {"a": 1}) is None  # nothing to back up
    first = hs.write(path, {"a": 2})
    second = hs.write(path, {"a": 3})
    assert first is not None and second is not None and first != second
    assert [hs.read(p) for p in (first, second, path)] == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_client_sockets_are_those_of_the_resident_entries() -> None:
    client = ("/v/bin/python -S '/site/ledger/live/hook_client.py' '/h/l.db.hook/hook-ab.sock' "
              "--db '/h/l.db' --fail-open")
    settings = hs.installed({"hooks": {"PreToolUse": [{"hooks": [THEIRS]}]}}, client)
    assert hs.client_sockets(settings) == [("/h/l.db.hook/hook-ab.sock", "/h/l.db")]
    assert hs.client_sockets(hs.installed(settings, CMD)) == []  # the plain hook: none
    assert ours(hs.installed(settings, client)) == [client]  # a quoted path is ours too
