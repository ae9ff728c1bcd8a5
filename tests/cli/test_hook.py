"""``agent-ledger hook``: install, uninstall, status, and the hook command itself."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from ledger.live import hook_server, hook_settings
from ledger.live.hook_main import hook_args
from tests.helpers import REAL_LOGS
from tests.live.test_hook_server import DEADLINE_S, poll

SIDECHAIN = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"


def invoke(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["hook", *args], input=stdin)
    return result.exit_code, result.output


def test_install_shows_the_diff_backs_up_and_is_idempotent(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "echo hi"}]}]}, "model": "x"}
    settings.write_text(json.dumps(theirs))
    budget = tmp_path / "b.toml"
    budget.write_text("max_steps = 40\n")
    db = tmp_path / "l.db"
    code, out = invoke("install", "--dir", str(tmp_path), "--budget-file", str(budget),
                       "--db", str(db))
    assert code == 0, out
    assert "+            \"command\":" in out and "backup:" in out
    after = json.loads(settings.read_text())
    command = after["hooks"]["PreToolUse"][1]["hooks"][0]["command"]
    # the default: the self-starting client of the resident server
    assert " -S " in command and "hook_client.py" in command
    assert command.endswith(f" --db {db} --budget-file {budget}")
    assert after["hooks"]["PreToolUse"][0] == theirs["hooks"]["PreToolUse"][0]
    assert [json.loads(p.read_text()) for p in settings.parent.glob("settings.json.bak-*")] == [
        theirs]
    code, out = invoke("install", "--dir", str(tmp_path), "--budget-file", str(budget),
                       "--db", str(db))
    assert (code, "already up to date" in out) == (0, True)
    code, out = invoke("uninstall", "--dir", str(tmp_path))
    assert code == 0 and json.loads(settings.read_text()) == theirs


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    code, out = invoke("install", "--local", "--dir", str(tmp_path), "--dry-run")
    assert code == 0 and "dry run" in out
    assert not (tmp_path / ".claude").exists()


def _folder(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("command", ["install", "uninstall"])
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("{not json", "settings.json: not valid JSON"),
        ("[1, 2]", "settings.json: a settings file must be a JSON object"),
        ('{"hooks": 5}', "settings.json: 'hooks' must be an object"),
        (_folder, "settings.json: cannot be read (Is a directory)"),
    ],
    ids=["not-json", "not-an-object", "hooks-not-an-object", "a-folder"],
)
def test_a_broken_settings_file_is_an_error_naming_it_not_a_traceback(
    tmp_path: Path, command: str, settings: Any, message: str
) -> None:
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    settings(path) if callable(settings) else path.write_text(settings)
    code, out = invoke(command, "--dir", str(tmp_path))
    assert code == 1 and message in out and "Traceback" not in out
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_a_settings_file_that_cannot_be_written_is_an_error_and_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only .claude folder (as root, chmod would not stop the test: os.replace says
    what the kernel says to everybody else)."""
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{}")

    def refused(*_args: Any) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(hook_settings.os, "replace", refused)
    code, out = invoke("install", "--dir", str(tmp_path))
    assert code == 1 and "settings.json: cannot be written (Permission denied)" in out
    assert "Traceback" not in out and path.read_text() == "{}"
    assert not list(path.parent.glob(".settings.json.*.tmp"))


def test_claude_code_then_status(tmp_path: Path) -> None:
    """The hook as Claude Code runs it (stdin in, JSON out), then what status shows."""
    lines = SIDECHAIN.read_bytes().splitlines(keepends=True)[:30]
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"".join(lines))
    last = json.loads(lines[25])
    block = next(b for b in last["message"]["content"] if b.get("type") == "tool_use")
    call = {"hook_event_name": "PreToolUse", "session_id": last["sessionId"],
            "agent_id": last["agentId"], "transcript_path": str(transcript), "cwd": str(tmp_path),
            "tool_name": block["name"], "tool_input": block["input"], "tool_use_id": block["id"]}
    (tmp_path / ".agent-ledger.toml").write_text("[budget]\nmax_steps = 3\n")
    db = str(tmp_path / "l.db")
    code, out = invoke("claude-code", "--db", db, stdin=json.dumps(call))
    assert code == 0
    answer = json.loads(out)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "max_steps (steps 4 > 3)" in answer["permissionDecisionReason"]
    code, out = invoke("claude-code", "--db", db, "--budget", "max_steps=off",
                       "--budget", "max_seconds=off", stdin=json.dumps(call))
    assert (code, out) == (0, "")
    code, out = invoke("status", "--db", db, "--dir", str(tmp_path), "--json")
    status = json.loads(out)
    assert status["budget"]["max_steps"] == 3
    assert status["budget_file"] == str(tmp_path / ".agent-ledger.toml")
    assert [s["session"] for s in status["sessions"]] == [
        f"{last['sessionId']}:agent-{last['agentId']}"]
    code, out = invoke("status", "--db", db, "--session", "nope")
    assert code == 1 and "has seen no session 'nope'" in out


INSTALLS = {
    "default": ((), "resident"),
    "--resident": (("--resident",), "resident"),
    "--plain": (("--plain",), "plain"),
    "--resident --fail-open --idle-seconds": (
        ("--resident", "--fail-open", "--idle-seconds", "60"), "resident"),
}


@pytest.mark.parametrize(("flags", "kind"), INSTALLS.values(), ids=INSTALLS.keys())
def test_install_writes_the_client_or_the_plain_hook(
    tmp_path: Path, flags: tuple[str, ...], kind: str
) -> None:
    db = tmp_path / "l.db"
    code, out = invoke("install", "--dir", str(tmp_path), "--db", str(db), *flags)
    assert code == 0, out
    settings = tmp_path / ".claude" / "settings.json"
    command = json.loads(settings.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    args = f" --db {db}" + (" --fail-open --idle-seconds=60" if "--fail-open" in flags else "")
    if kind == "resident":
        assert " -S -P " in command and "hook_client.py" in command
        sock = hook_server.socket_path(db, hook_args(db, fail_open="--fail-open" in flags))
        assert command.endswith(f" {sock}{args}")
        assert sock.parent == db.with_name("l.db.hook")
    else:
        assert command.endswith(f" claude-code{args}")
        assert "hook_client.py" not in command
    other = ("--plain",) if kind == "resident" else ()  # then the other kind: one entry
    invoke("install", "--dir", str(tmp_path), "--db", str(db), *other)
    commands = [h["command"] for g in json.loads(settings.read_text())["hooks"]["PreToolUse"]
                for h in g["hooks"]]
    assert len(commands) == 1 and commands[0] != command
    invoke("uninstall", "--dir", str(tmp_path))
    assert json.loads(settings.read_text()) == {}


def test_idle_seconds_is_not_for_the_plain_hook(tmp_path: Path) -> None:
    code, out = invoke("install", "--dir", str(tmp_path), "--plain", "--idle-seconds", "5")
    assert code == 2 and "not with --plain" in out


def test_uninstall_stops_the_server_the_client_started(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    # An idle time no slow machine gets to between the server being up and the uninstall (a
    # server that ended by itself would not be stopped by it); it is killed at the end.
    code, out = invoke("install", "--dir", str(tmp_path), "--db", str(db), "--idle-seconds",
                       "600")
    assert code == 0, out
    settings = tmp_path / ".claude" / "settings.json"
    command = json.loads(settings.read_text())["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    [(sock, _)] = hook_settings.client_sockets(json.loads(settings.read_text()))
    words = shlex.split(command)
    args = words[words.index(sock) + 1:]
    server = subprocess.Popen([sys.executable, "-m", "ledger.live.hook_main", "serve",
                               "--socket", sock, *args])
    try:
        [info] = poll(lambda: hook_server.running(db))
        assert (info.pid, info.socket) == (server.pid, sock)
        code, out = invoke("status", "--db", str(db), "--json")
        assert [s["pid"] for s in json.loads(out)["servers"]] == [server.pid]
        code, out = invoke("uninstall", "--dir", str(tmp_path))
        assert code == 0 and f"Stopped the resident server (pid {server.pid})" in out
        assert server.wait(timeout=DEADLINE_S) == 0
    finally:
        server.kill()
        server.wait()
    code, out = invoke("status", "--db", str(db))
    assert f"No resident server running for {db}" in out


def test_status_shows_the_familys_counters(tmp_path: Path) -> None:
    """With subagents_count_in_parent on, the family counted together, besides each session."""
    lines = SIDECHAIN.read_bytes().splitlines(keepends=True)[:30]
    (tmp_path / "t.jsonl").write_bytes(b"")
    agent = tmp_path / "t" / "subagents" / "agent-x.jsonl"
    agent.parent.mkdir(parents=True)
    agent.write_bytes(b"".join(lines))
    last = json.loads(lines[25])
    block = next(b for b in last["message"]["content"] if b.get("type") == "tool_use")
    call = {"hook_event_name": "PreToolUse", "session_id": last["sessionId"],
            "agent_id": last["agentId"], "transcript_path": str(tmp_path / "t.jsonl"),
            "cwd": str(tmp_path), "tool_name": block["name"], "tool_input": block["input"],
            "tool_use_id": block["id"]}
    (tmp_path / ".agent-ledger.toml").write_text(
        "[budget]\nsubagents_count_in_parent = true\nmax_steps = 3\nmax_seconds = 'off'\n")
    db = str(tmp_path / "l.db")
    invoke("claude-code", "--db", db, stdin=json.dumps(call))
    code, out = invoke("status", "--db", db, "--dir", str(tmp_path), "--json")
    status = json.loads(out)
    assert status["subagents_count_in_parent"] is True
    family = status["family"]
    assert family["session"] == f"{last['sessionId']} and its sub-agents"
    assert family["steps"] >= 4 and family["stop"] == "max_steps"
    code, out = invoke("status", "--db", db, "--dir", str(tmp_path))
    assert "The family, counted together:" in out and "and its sub-agents" in out
