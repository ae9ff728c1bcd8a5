"""The light hook entry (``agent-ledger-hook``) and the prices it remembers between calls."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ledger.cli.options import make_options
from ledger.live import hook_main
from ledger.live.hook import HookInputError
from ledger.live.hook_main import (
    RACY_NS,
    Arguments,
    kept,
    main,
    options_for,
    parse,
    serve_main,
)
from tests.helpers import REAL_LOGS, rows

SOURCE = REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["claude-code"], Arguments()),
        (["claude-code", "--db", "/x.db", "--fail-open"], Arguments(db="/x.db", fail_open=True)),
        (["--db=/x.db", "--budget", "max_steps=3", "--budget=max_writes=off"],
         Arguments(db="/x.db", budget_pairs=["max_steps=3", "max_writes=off"])),
        (["claude-code", "--budget-file", "b.toml", "--prices", "p.toml", "--vendor-map", "v"],
         Arguments(budget_file="b.toml", prices="p.toml", vendor_map="v")),
        # the server's idle time rides along in the client's arguments: a call ignores it
        (["claude-code", "--db", "/x.db", "--idle-seconds=60"],
         Arguments(db="/x.db", idle_seconds="60")),
        (["serve", "--db", "/x.db", "--socket", "/s.sock", "--idle-seconds", "5"],
         Arguments(db="/x.db", socket="/s.sock", idle_seconds="5")),
    ],
)
def test_parse(argv: list[str], expected: Arguments) -> None:
    assert parse(argv) == expected


@pytest.mark.parametrize("argv", [["--verbose"], ["--db"], ["claude-code", "--budget"],
                                  ["claude-code", "--socket", "/s.sock"]])
def test_a_bad_argument_is_refused(argv: list[str]) -> None:
    with pytest.raises(HookInputError):
        parse(argv)


def _main(argv: list[str], stdin: bytes, monkeypatch: pytest.MonkeyPatch) -> str:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    monkeypatch.setattr(sys, "stdout", out)
    main(argv)
    return out.getvalue()


def test_a_bad_argument_fails_closed_or_open(monkeypatch: pytest.MonkeyPatch) -> None:
    denied = json.loads(_main(["claude-code", "--bogus"], b"{}", monkeypatch))
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    reason = denied["hookSpecificOutput"]["permissionDecisionReason"]
    assert "unknown argument '--bogus'" in reason
    assert _main(["claude-code", "--bogus", "--fail-open"], b"{}", monkeypatch) == ""


def test_folds_under_the_options_the_command_line_makes(tmp_path: Path) -> None:
    budget = tmp_path / "b.toml"
    budget.write_text("max_steps = 40\n[task_classes]\n'*/x' = 'x'\n")
    for found in (None, str(budget)):
        light = options_for(["max_writes=3"], None, None)(found)
        full = make_options(("max_writes=3",), found, None)
        assert light.fold_digest == full.fold_digest
        assert light.budget == full.budget


def test_hook_args_are_one_spelling_of_the_arguments(tmp_path: Path) -> None:
    """What names a server: files absolute, in one order, whoever wrote them."""
    (tmp_path / "b.toml").write_text("")
    by_hand = Arguments(db=str(tmp_path / "l.db"), budget_file=str(tmp_path / "b.toml"),
                        budget_pairs=["max_steps=3"], fail_open=True, idle_seconds="9")
    assert by_hand.hook_args() == [
        "--db", str(tmp_path / "l.db"), "--budget-file", str(tmp_path / "b.toml"),
        "--budget=max_steps=3", "--fail-open"]
    assert parse(["serve", *by_hand.hook_args()]).hook_args() == by_hand.hook_args()


def test_serve_refuses_a_bad_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve_main(["serve", "--idle-seconds", "soon"]) == 2
    assert "could not convert" in capsys.readouterr().err


def test_a_bad_budget_file_is_a_hook_input_error(tmp_path: Path) -> None:
    budget = tmp_path / "b.toml"
    budget.write_text("max_steps = 'many'\n")
    with pytest.raises(HookInputError, match="max_steps"):
        options_for([], None, None)(str(budget))


def _call(transcript: Path) -> dict[str, Any]:
    for raw in reversed(transcript.read_bytes().splitlines()):
        obj = json.loads(raw)
        for block in (obj.get("message") or {}).get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                return {"hook_event_name": "PreToolUse", "session_id": obj["sessionId"],
                        "transcript_path": str(transcript), "cwd": obj.get("cwd"),
                        "tool_name": block["name"], "tool_input": block["input"],
                        "tool_use_id": block["id"]}
    raise AssertionError("no tool call")


#: What a call once its state is saved does not import: the command line, the secret scanner,
#: sqlite-utils, the price library, and the modules only some functions need (a TOML file
#: read, a bad value's suggestion, a host name, package data by importlib), each some ms; nor
#: dataclasses (the hook's and the fold's records are msgspec structs).
HEAVY = ("click", "kingfisher_sdk", "sqlite_utils", "genai_prices", "ledger.cli",
         "importlib.metadata", "importlib.resources", "tomllib", "difflib", "socket",
         "ledger.ingest.summary", "ledger.db.connection", "ledger.db.migrations", "dataclasses")
LOADED = (
    "import sys\n"
    "from ledger.live.hook_main import main\n"
    "main(sys.argv[1:])\n"
    f"heavy = {HEAVY!r}\n"
    "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
)


def test_a_plain_call_imports_only_what_the_hook_needs(tmp_path: Path) -> None:
    """None of :data:`HEAVY` once the state is saved: the price library and the action map's
    TOML only until their answers are remembered (the first call)."""
    transcript, db = tmp_path / "t.jsonl", tmp_path / "l.db"
    transcript.write_bytes(SOURCE.read_bytes())
    stdin = json.dumps(_call(transcript)).encode()
    argv = [sys.executable, "-c", LOADED, "claude-code", "--db", str(db),
            "--budget=max_steps=off", "--budget=max_seconds=off", "--budget=max_writes=off"]
    loaded = []
    for _ in range(2):
        done = subprocess.run(argv, input=stdin, capture_output=True, check=True)
        last = done.stderr.decode().strip().splitlines()[-1]
        loaded.append(json.loads(last.replace("'", '"')))
    # the first call made the database (with sqlite-utils, which imports click)
    assert "kingfisher_sdk" not in loaded[0] and "ledger.cli" not in loaded[0]
    assert loaded[1] == []
    assert [r["decision"] for r in rows(db, "select decision from hook_decisions")] == [
        "allow", "allow"]


WARMED = (
    "from ledger.core import secret_rules\n"
    "from ledger.live.hook_main import options_for, warm_up\n"
    "warm_up(options_for([], None, None), None)\n"
    "print(secret_rules._scanner.cache_info().currsize)\n"
)


def test_a_server_loads_the_rule_set_before_it_listens() -> None:
    """Not in a call (a fresh process: this one may hold the rules already)."""
    done = subprocess.run([sys.executable, "-c", WARMED], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "1"


def counted(built: list[str | None]):
    light = options_for([], None, None)
    return lambda found: (built.append(found), light(found))[1]


@pytest.mark.parametrize(("age_s", "builds"), [
    (60, 1),  # changed long ago: built once, kept for the next calls
    (0, 3),  # changed just now: read again at every call until the stamp is old enough
])
def test_options_are_kept_once_the_budget_file_is_no_longer_racy(
    tmp_path: Path, age_s: int, builds: int
) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text("max_steps = 4\n")
    now = budget.stat().st_mtime_ns + age_s * 1_000_000_000
    built: list[str | None] = []
    get = kept(counted(built), clock=lambda: now)
    for _ in range(3):
        assert get(str(budget)).budget.max_steps == 4
    assert len(built) == builds


def test_an_edit_that_keeps_every_field_of_the_stamp_is_still_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two writes in one tick of a coarse file system clock leave inode, size, mtime and
    ctime as they were (made so here: the stamp is fixed). The first build happened within
    RACY_NS of the file's change, so it was not kept, and the edit is read; once the stamp is
    old enough the options are kept."""
    budget = tmp_path / "budget.toml"
    budget.write_text("max_steps = 4\n")
    at = budget.stat().st_mtime_ns
    monkeypatch.setattr(hook_main, "_stamp", lambda path: path and (1, 14, at, at))
    clock = [at + RACY_NS // 2]
    built: list[str | None] = []
    get = kept(counted(built), clock=lambda: clock[0])
    assert get(str(budget)).budget.max_steps == 4
    budget.write_text("max_steps = 5\n")  # the same size, the same stamp
    assert get(str(budget)).budget.max_steps == 5
    clock[0] += RACY_NS  # now kept
    assert [get(str(budget)).budget.max_steps for _ in range(3)] == [5, 5, 5]
    assert len(built) == 3
