"""The live brake: Claude Code's hook calls answered by the ingest's own fold and machine.

Live equals replay: driven call by call over real transcripts that grow line by line, the
first denied call is the step at which ``ingest`` of the whole transcript records the stop.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.core.budget import Budget
from ledger.core.reasons import DECISIONS, StopReason
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.live import hook_store
from ledger.live.hook_run import run
from tests.helpers import REAL_LOGS, rows

TRANSCRIPTS = sorted(REAL_LOGS.glob("*claude_code*.jsonl"))
NO_CAPS = Budget(**{key: None for key in Budget.keys()})
BUDGETS = {
    "defaults": Budget(),
    "no caps": NO_CAPS,
    "max_writes=0": Budget(max_writes=0, max_steps=None, max_seconds=None),
    "max_tool_calls=3": Budget(max_tool_calls=3, max_steps=None, max_seconds=None),
    "max_steps=20": Budget(max_steps=20, max_seconds=None, max_writes=None),
    "max_output_tokens=200": Budget(max_output_tokens=200, max_steps=None, max_seconds=None,
                                    max_writes=None),
    "max_cost=0.05": Budget(max_cost=0.05, max_steps=None, max_seconds=None, max_writes=None),
    "max_seconds=30": Budget(max_seconds=30.0, max_steps=None, max_writes=None),
    "no_progress_rounds=1": Budget(no_progress_rounds=1, max_steps=None, max_seconds=None,
                                   max_writes=None),
    "max_rounds=5": Budget(max_rounds=5, max_steps=None, max_seconds=None, max_writes=None),
}
#: Steps that are tool calls (an API retry is a retry of the tool ``api``, never a call).
TOOL_STEPS = ("think", "read", "write", "retry")


def calls_of(raw: bytes) -> Iterator[dict[str, Any]]:
    """The hook inputs Claude Code sends for the ``tool_use`` blocks of one transcript line."""
    obj = json.loads(raw)
    if obj.get("type") != "assistant":
        return
    for block in obj["message"].get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            payload = {
                "hook_event_name": "PreToolUse", "session_id": obj["sessionId"],
                "cwd": obj.get("cwd"), "permission_mode": "default",
                "tool_name": block["name"], "tool_input": block["input"],
                "tool_use_id": block["id"],
            }
            if obj.get("isSidechain"):
                payload["agent_id"] = obj["agentId"]
            yield payload


def drive(source: Path, options: Options, work: Path) -> tuple[Path, list[dict[str, Any]]]:
    """Grow a copy of ``source`` line by line, calling the hook for each tool call as it
    lands; the decisions recorded, in order."""
    transcript, db = work / "transcript.jsonl", work / "ledger.db"
    with transcript.open("wb") as out:
        for raw in source.read_bytes().splitlines(keepends=True):
            out.write(raw)
            out.flush()
            for payload in calls_of(raw):
                payload["transcript_path"] = str(transcript)
                answer = run(json.dumps(payload).encode(), db, lambda _f: options)
                assert answer == "" or json.loads(answer)["hookSpecificOutput"]
    return transcript, rows(db, "select * from hook_decisions order by id")


def ingest_stops(transcript: Path, options: Options, db: Path) -> dict[str, Any]:
    """Per session: ingest's stop, and the first tool call at or after it."""
    ingest(db, [transcript], options)
    out = {}
    for s in rows(db, "select session_id, stop_reason, stop_at from sessions"):
        first = rows(
            db,
            "select min(idx) as idx from steps where session_id = ? and idx >= ? "
            f"and action in {TOOL_STEPS} and tool is not 'api'",
            (s["session_id"], s["stop_at"] or 10**9),
        )[0]["idx"]
        out[s["session_id"]] = (s["stop_reason"], first)
    return out


@pytest.mark.parametrize("budget", BUDGETS.values(), ids=BUDGETS.keys())
@pytest.mark.parametrize("source", TRANSCRIPTS, ids=lambda p: p.name[:2])
def test_first_denied_call_is_the_step_ingest_stops_at(
    source: Path, budget: Budget, tmp_path: Path
) -> None:
    options = Options(budget=budget)
    transcript, decisions = drive(source, options, tmp_path)
    expected = ingest_stops(transcript, options, tmp_path / "ingested.db")
    assert decisions, "the transcript has tool calls"
    for session, (stop_reason, first_call) in expected.items():
        mine = [d for d in decisions if d["session_id"] == session]
        denied = [d for d in mine if d["decision"] == "deny"]
        if first_call is None:  # no stop, or none before the session's last call
            assert denied == []
            continue
        assert denied, f"{session}: ingest stops ({stop_reason}) before call {first_call}"
        assert (denied[0]["stop_reason"], denied[0]["event_idx"]) == (stop_reason, first_call)
        # every call before it was allowed, every call after it denied
        assert [d["decision"] for d in mine] == (
            ["allow"] * mine.index(denied[0]) + ["deny"] * (len(mine) - mine.index(denied[0]))
        )


def test_a_denied_call_says_why_what_and_the_safe_action(tmp_path: Path) -> None:
    source = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"
    _, decisions = drive(source, Options(budget=Budget(max_steps=3)), tmp_path)
    denied = next(d for d in decisions if d["decision"] == "deny")
    assert denied["stop_reason"] == "max_steps"
    assert denied["stop_detail"] == "steps 4 > 3"
    assert "max_steps (steps 4 > 3)" in denied["reason"]
    assert DECISIONS[StopReason.MAX_STEPS].safe_action in denied["reason"]
    assert json.loads(denied["counters"])["steps"] == 4
    assert {d["action"] for d in decisions} <= {"think", "read", "write", "retry"}


def payload(transcript: Path, **extra: Any) -> bytes:
    base = {
        "hook_event_name": "PreToolUse", "session_id": "s1", "transcript_path": str(transcript),
        "cwd": str(transcript.parent), "tool_name": "Bash",
        "tool_input": {"command": "ls"}, "tool_use_id": "toolu_new",
    }
    return json.dumps({**base, **extra}).encode()


def decision(text: str) -> dict[str, Any]:
    return json.loads(text)["hookSpecificOutput"]


@pytest.mark.parametrize(
    ("stdin", "why"),
    [
        (b"not json", "hook input is not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"hook_event_name": "PreToolUse"}', "no 'session_id'"),
        (None, "No such file"),  # the transcript does not exist
    ],
)
def test_fails_closed_with_a_clear_reason(stdin: bytes | None, why: str, tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    text = run(stdin or payload(tmp_path / "missing.jsonl"), db, lambda _f: Options())
    out = decision(text)
    assert out["permissionDecision"] == "deny"
    assert "fail closed" in out["permissionDecisionReason"]
    assert why in out["permissionDecisionReason"]
    assert "Traceback" not in text
    assert "Traceback" in (hook_store.state_dir(db) / hook_store.LOG_NAME).read_text()
    assert rows(db, "select decision from hook_decisions") == [{"decision": "deny"}]


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: (os.mkfifo(p), p)[1], "a named pipe (FIFO), not a regular file"),
        (lambda _p: Path("/dev/zero"), "a character device, not a regular file"),
    ],
    ids=["fifo", "device"],
)
def test_a_transcript_that_is_no_regular_file_is_denied_not_waited_on(
    tmp_path: Path, make: Any, why: str
) -> None:
    """A FIFO was waited on for a writer, /dev/zero read until memory ran out."""
    transcript = make(tmp_path / "t.jsonl")
    answer: list[str] = []
    call = payload(transcript)
    worker = threading.Thread(
        target=lambda: answer.append(run(call, tmp_path / "l.db", lambda _f: Options())),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=20)
    assert answer, "the hook did not answer"
    out = decision(answer[0])
    assert out["permissionDecision"] == "deny"
    assert why in out["permissionDecisionReason"]


def test_fail_open_allows_what_it_cannot_check(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    assert run(payload(tmp_path / "missing.jsonl"), db, lambda _f: Options(),
               fail_open=True) == ""
    assert rows(db, "select decision from hook_decisions") == [{"decision": "allow"}]


def test_a_corrupt_state_fails_closed(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes((REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl")
                           .read_bytes())
    db = tmp_path / "ledger.db"
    state = hook_store.state_file(db, "s1")
    state.parent.mkdir(parents=True)
    state.write_text("{broken")
    out = decision(run(payload(transcript), db, lambda _f: Options()))
    assert out["permissionDecision"] == "deny"
    assert "cannot read the hook state" in out["permissionDecisionReason"]


def test_a_bad_budget_file_fails_closed(tmp_path: Path) -> None:
    """The project's budget file is found from the session's folder, and a bad one denies."""
    from ledger.config.budget_file import read_budget_file

    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"")
    (tmp_path / ".agent-ledger.toml").write_text("max_steps = 'many'\n")
    found: list[str | None] = []

    def options_for(path: str | None) -> Options:
        found.append(path)
        return Options(budget=Budget.from_mapping(read_budget_file(path or "")))

    reason = decision(run(payload(transcript), tmp_path / "l.db", options_for))
    assert found == [str(tmp_path / ".agent-ledger.toml")]
    assert "max_steps must be a number or 'off', not 'many'" in reason["permissionDecisionReason"]


def first_session(path: Path) -> tuple[str, list[bytes]]:
    lines = path.read_bytes().splitlines(keepends=True)
    return next(json.loads(x)["sessionId"] for x in lines if b'"sessionId"' in x), lines


def test_each_call_reads_only_new_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.live import hook

    source = REAL_LOGS / "03_claude_code_main_session_tail_lines1781-1863_v2.1.39.jsonl"
    sid, lines = first_session(source)
    transcript, db = tmp_path / "t.jsonl", tmp_path / "ledger.db"
    starts: list[int] = []
    real = hook.read_new_lines
    monkeypatch.setattr(hook, "read_new_lines",
                        lambda p, offset, m: (starts.append(offset), real(p, offset, m))[1])
    size = 0
    for raw in lines[:40]:
        with transcript.open("ab") as f:
            f.write(raw)
        run(payload(transcript, session_id=sid, hook_event_name="PostToolUse"), db,
            lambda _f: Options())
        assert starts[-1] == size  # read from where the last call stopped
        size += len(raw)
    state = json.loads(hook_store.state_file(db, sid).read_text())
    assert state["files"][str(transcript)]["offset"] == size


def test_other_events_are_read_never_answered(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes((REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl")
                           .read_bytes())
    sid, _ = first_session(transcript)
    db = tmp_path / "ledger.db"
    for event in ("SessionStart", "PostToolUse", "Stop", "SubagentStop"):
        assert run(payload(transcript, session_id=sid, hook_event_name=event), db,
                   lambda _f: Options(budget=Budget(max_steps=0))) == ""
    assert not db.exists() or rows(db, "select * from hook_decisions") == []


def test_a_call_not_in_the_transcript_yet_is_folded_as_its_line_would_be(tmp_path: Path) -> None:
    """The pending call's answer, before its line is written, is the answer after."""
    source = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"
    lines = source.read_bytes().splitlines(keepends=True)
    options = Options(budget=Budget(max_steps=5))
    seen = 0
    for n, raw in enumerate(lines):
        for call in calls_of(raw):
            before, after = tmp_path / f"b{n}", tmp_path / f"a{n}"
            for folder, upto in ((before, n), (after, n + 1)):
                folder.mkdir()
                (folder / "t.jsonl").write_bytes(b"".join(lines[:upto]))
                call["transcript_path"] = str(folder / "t.jsonl")
                run(json.dumps(call).encode(), folder / "l.db", lambda _f: options)
            got = [rows(f / "l.db", "select decision, stop_reason, event_idx, action "
                        "from hook_decisions") for f in (before, after)]
            assert got[0] == got[1]
            seen += 1
        if seen >= 6:
            break
    assert seen >= 6


def test_a_sub_agent_is_denied_once_its_parent_has_stopped(tmp_path: Path) -> None:
    parent = REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl"
    child = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"
    sid, _ = first_session(parent)
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(parent.read_bytes())
    agent = tmp_path / "t" / "subagents" / "agent-a7be2f0.jsonl"
    agent.parent.mkdir(parents=True)
    # the sub-agent's first lines, as if it ran in this session
    head = [json.loads(x) for x in child.read_bytes().splitlines()[:3]]
    agent.write_text("".join(json.dumps({**x, "sessionId": sid}) + "\n" for x in head))
    call = next(calls_of(json.dumps(head[2]).encode()))
    call.update(session_id=sid, transcript_path=str(transcript))
    db = tmp_path / "l.db"
    # the parent stops under max_tool_calls=2; the sub-agent has made 1 call
    options = Options(budget=Budget(max_tool_calls=2, max_steps=None, max_seconds=None))
    out = decision(run(json.dumps(call).encode(), db, lambda _f: options))
    assert out["permissionDecision"] == "deny"
    assert f"parent session {sid}" in out["permissionDecisionReason"]
    free = Options(budget=NO_CAPS)
    assert run(json.dumps(call).encode(), tmp_path / "free.db", lambda _f: free) == ""


def test_another_budget_reads_the_transcript_again(tmp_path: Path) -> None:
    source = REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl"
    sid, _ = first_session(source)
    transcript, db = tmp_path / "t.jsonl", tmp_path / "l.db"
    transcript.write_bytes(source.read_bytes())
    assert run(payload(transcript, session_id=sid), db, lambda _f: Options(budget=NO_CAPS)) == ""
    strict = Options(budget=Budget(max_steps=0))
    assert decision(run(payload(transcript, session_id=sid), db,
                        lambda _f: strict))["permissionDecision"] == "deny"


def test_the_matrix_stops_every_transcript_somewhere(tmp_path: Path) -> None:
    """The live-equals-replay table is not all allows: these budgets deny a call of each
    transcript (01 is 15 lines with few calls), and no caps deny nothing."""
    expected = {
        "01": {"max_writes=0", "max_cost=0.05"},
        "02": set(BUDGETS) - {"no caps"},
        "03": set(BUDGETS) - {"no caps", "max_steps=20"},
    }
    for source in TRANSCRIPTS:
        denying = set()
        for name, budget in BUDGETS.items():
            work = tmp_path / f"{source.name[:2]}-{name}"
            work.mkdir()
            _, decisions = drive(source, Options(budget=budget), work)
            if any(d["decision"] == "deny" for d in decisions):
                denying.add(name)
        assert denying == expected[source.name[:2]]


def test_the_saved_state_is_redacted_like_the_readers_state_in_the_database(tmp_path: Path) -> None:
    """A secret in the hook's reader state (a tool name of a call still open) is written
    redacted, as ``sources.cursor`` is in the database."""
    from ledger.live import hook_store
    from ledger.live.hook import FileState, HookState

    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    cursor = {"reader": {"s": {"tools": {"toolu_1": [secret, "digest"]}}}}
    path = tmp_path / "state.json"
    hook_store.save(path, HookState("digest", {"/t.jsonl": FileState(0, cursor)}))
    written = path.read_text()
    assert secret not in written and "[REDACTED" in written
    assert json.loads(written)["fold_digest"] == "digest"
