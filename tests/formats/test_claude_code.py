"""Claude Code transcripts: the traps other tools fell into, on the real samples and on lines
shaped like them (ledger/importers/claude_code.py)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.core.reasons import StopReason
from tests.helpers import REAL_LOGS, real_log, rows
from tests.helpers import session_row as session
from tests.helpers import step_rows as steps

MAIN = REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl"
SIDECHAIN = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"
TAIL = REAL_LOGS / "03_claude_code_main_session_tail_lines1781-1863_v2.1.39.jsonl"
PARENT = "8463c716-a2ea-4c14-9efa-87158ebd9f20"  # sample 02's sessionId

_clock = iter(range(10**6))


def line(kind: str, session: str = "s1", **fields: Any) -> dict[str, Any]:
    n = next(_clock)
    return {"type": kind, "sessionId": session, "uuid": f"u{n}", "cwd": "/work/shop",
            "timestamp": f"2026-02-10T21:{n // 60 % 60:02d}:{n % 60:02d}.000Z", **fields}


def assistant(msg: str, *blocks: dict[str, Any], out: int | None = 5, stop: str | None = None,
              **fields: Any) -> dict[str, Any]:
    usage = {"input_tokens": 3, "output_tokens": out} if out is not None else None
    message = {"id": msg, "model": "claude-opus-4-6", "role": "assistant",
               "content": list(blocks) or [{"type": "text", "text": "ok"}],
               "stop_reason": stop, "usage": usage}
    return line("assistant", message=message, requestId=f"req-{msg}", **fields)


def tool_use(call: str, name: str = "Bash", command: str = "ls") -> dict[str, Any]:
    return {"type": "tool_use", "id": call, "name": name, "input": {"command": command}}


def result(call: str, text: str = "done", error: bool | None = None, **fields: Any) -> dict:
    block = {"type": "tool_result", "tool_use_id": call, "content": text}
    if error is not None:
        block["is_error"] = error
    return line("user", message={"role": "user", "content": [block]}, **fields)


def prompt(text: str = "fix the build", **fields: Any) -> dict[str, Any]:
    return line("user", message={"role": "user", "content": text}, **fields)


def system(subtype: str, **fields: Any) -> dict[str, Any]:
    return line("system", subtype=subtype, **fields)


def api_error_line(status: int = 529) -> dict[str, Any]:
    message = {"id": f"synthetic-{next(_clock)}", "model": "<synthetic>", "role": "assistant",
               "content": [{"type": "text", "text": f"API Error: {status} Overloaded"}],
               "stop_reason": "stop_sequence", "usage": {"input_tokens": 0, "output_tokens": 0}}
    return line("assistant", message=message, isApiErrorMessage=True, error="rate_limit",
                apiErrorStatus=status)


@pytest.fixture
def fold(ingest_logs):
    """Ingest lines (or real sample files) as Claude Code; returns the database path."""
    return functools.partial(ingest_logs, dialect="claude-code")


# --- a round is one API response ----------------------------------------------------------


def test_a_round_is_one_response_not_one_line(fold) -> None:
    # Sample 01: 5 assistant lines share message ...u8pYiiQa, each repeating output_tokens 13.
    # One round, and a step for each of its 2 tool calls (seed 002: every action is a step).
    s = session(fold(MAIN), "55604662-cf2a-4331-851a-ec234028f8ca")
    assert (s["rounds"], s["steps"], s["tool_calls"], s["output_tokens"]) == (1, 3, 2, 13)


def test_usage_is_taken_once_per_response_the_fullest(fold) -> None:
    lines = [assistant("m1", out=2), assistant("m1", tool_use("t1"), out=99),
             assistant("m1", tool_use("t2"), out=50), assistant("m2", out=7)]
    db = fold(lines)
    got = [(r["same_round"], r["tool_calls"], r["output_tokens"]) for r in steps(db)
           if r["action"] == "round"]
    assert got == [(0, 0, 2), (1, 1, 97), (1, 1, 0), (0, 0, 7)]
    assert (session(db)["rounds"], session(db)["output_tokens"]) == (2, 106)


@pytest.mark.parametrize(("count", "taken"), [
    (7, 7), (0, 0), ("12", 12), (-3, None), (True, None), (2.0, None), ("x", None), (None, None),
])
def test_a_usage_count_is_a_whole_number_or_none(fold, count: Any, taken: int | None) -> None:
    line = assistant("m1")
    line["message"]["usage"] = {"input_tokens": 3, "output_tokens": count}
    assert [r["output_tokens"] for r in steps(fold([line]))] == [taken]


def test_usage_that_is_no_object_counts_nothing(fold) -> None:
    line = assistant("m1")
    line["message"]["usage"] = [3, 5]
    got = steps(fold([line]))
    assert [(r["output_tokens"], r["input_tokens"]) for r in got] == [(None, None)]


def test_usage_growth_on_the_real_tail(fold) -> None:
    # Sample 03, message ...Wot8tf58: output_tokens 2 on line 17, then 99 on line 18.
    db = fold(TAIL)
    got = rows(db, "select output_tokens from steps where source_line in (17, 18) "
                   "and action = 'round' order by idx")
    assert [r["output_tokens"] for r in got] == [2, 97]


def test_blocks_that_add_nothing_are_not_steps(fold) -> None:
    db = fold([assistant("m1"), assistant("m1"), assistant("m1")])
    assert (len(steps(db)), session(db)["events"]) == (1, 1)


def test_a_replayed_response_is_not_counted_again(fold) -> None:
    lines = [assistant("m1", out=10), assistant("m2", out=20), assistant("m1", out=10)]
    db = fold(lines)
    assert (session(db)["rounds"], session(db)["output_tokens"]) == (2, 30)
    cursor = json.loads(rows(db, "select cursor from sources")[0]["cursor"])
    assert cursor["reader"]["s1"]["replayed"] == 1


# --- stop reasons -------------------------------------------------------------------------


def test_a_null_stop_reason_is_not_a_stop(fold) -> None:
    db = fold(TAIL)
    assert rows(db, "select count(*) n from steps where vendor_stop is not null")[0]["n"] == 0
    assert rows(db, "select count(*) n from incidents where kind = 'unknown_vendor'")[0]["n"] == 0
    assert session(db, "258c7280-ae70-4798-800f-63464d01a85d")["recorded_stop"] == "task_complete"


@pytest.mark.parametrize(
    ("stop", "recorded"),
    [("end_turn", "task_complete"), ("tool_use", None), ("max_tokens", "max_output_tokens"),
     ("refusal", "unknown_vendor")],
)
def test_a_stop_reason_that_is_there_is_read(fold, stop: str, recorded: str | None) -> None:
    assert session(fold([assistant("m1", stop=stop)]))["recorded_stop"] == recorded


def test_synthetic_api_errors_are_retries_not_completions(fold) -> None:
    db = fold([prompt(), api_error_line(), api_error_line(), api_error_line(429)])
    s = session(db)
    assert (s["rounds"], s["recorded_stop"], s["vendor_stop"]) == (0, None, None)
    assert [(r["action"], r["tool"], r["detail"]) for r in steps(db)[1:]] == [
        ("retry", "api", "rate_limit 529"), ("retry", "api", "rate_limit 529"),
        ("retry", "api", "rate_limit 429")]
    storm = rows(db, "select * from incidents where kind = 'retry_storm'")
    assert [(i["key"], i["length"]) for i in storm] == [("api", 3)]


def test_api_retry_lines_are_retries(fold) -> None:
    retry = system("api_error", level="error", retryAttempt=2, maxRetries=10,
                   error={"status": 529, "message": "overloaded"})
    db = fold([assistant("m1"), retry])
    assert (steps(db)[-1]["action"], steps(db)[-1]["detail"]) == (
        "retry", "api_error 529 attempt 2/10")


def test_a_turn_end_is_the_recorded_stop(fold) -> None:
    db = fold([prompt(), assistant("m1"), system("turn_duration", durationMs=1200)])
    assert session(db)["recorded_stop"] == "task_complete"
    assert steps(db)[-1]["detail"] == "turn_duration 1200 ms"


def test_a_log_that_ends_mid_turn_records_no_stop(fold, tmp_path: Path) -> None:
    # Sample 03 without its last line: the last turn ("did you push?") has no end.
    cut = tmp_path / "cut" / "tail.jsonl"
    cut.parent.mkdir()
    cut.write_bytes(b"".join(TAIL.read_bytes().splitlines(keepends=True)[:-1]))
    s = session(fold(cut), "258c7280-ae70-4798-800f-63464d01a85d")
    assert (s["recorded_stop"], s["rounds"]) == (None, 10)


def test_a_new_prompt_reopens_the_session(fold) -> None:
    turns = [prompt(), assistant("m1"), system("stop_hook_summary", preventedContinuation=False),
             prompt("and now the docs"), assistant("m2")]
    assert session(fold(turns))["recorded_stop"] is None


def test_a_hook_that_stops_the_agent_fails_closed(fold) -> None:
    hook = system("stop_hook_summary", preventedContinuation=True, stopReason="tests red")
    db = fold([prompt(), assistant("m1"), hook])
    s = session(db)
    assert (s["recorded_stop"], s["stop_reason"], s["vendor_stop"]) == (
        "unknown_vendor", "unknown_vendor", "stop_hook_prevented")
    assert steps(db)[-1]["detail"] == "stop hook prevented continuation: tests red"


def test_an_interrupt_is_a_user_cancel(fold) -> None:
    stop = line("user", message={"role": "user", "content": [
        {"type": "text", "text": "[Request interrupted by user]"}]})
    assert session(fold([prompt(), assistant("m1"), stop]))["recorded_stop"] == "user_cancel"


# --- tool results ---------------------------------------------------------------------------


def test_a_rejected_tool_use_is_a_cancel_not_a_tool_error(fold) -> None:
    # Sample 01: both tool_result lines are is_error: true rejections by the user.
    db = fold(MAIN)
    sid = "55604662-cf2a-4331-851a-ec234028f8ca"
    assert (session(db, sid)["tool_errors"], session(db, sid)["recorded_stop"]) == (
        0, StopReason.USER_CANCEL.value)
    assert [(r["action"], r["tool"], r["outcome"]) for r in steps(db, sid)[-3:]] == [
        ("end", "Bash", "user_cancel"), ("end", "Glob", "user_cancel"),
        ("end", None, "user_cancel")]


def test_a_rejection_with_feedback_is_a_result_not_a_cancel(fold) -> None:
    # Real (Entire 84-324d6610f2): the user rejects an Edit and types an instruction; the model
    # reads it and goes on, so the turn is not cancelled and the tool did not fail.
    said = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg."
            " if it was a file edit, the new_string was NOT written to the file). To tell you how"
            " to proceed, the user said:\nwhat happens now once we do this?")
    db = fold([prompt(), assistant("m1", tool_use("t1", "Edit")), result("t1", said, True),
               assistant("m2")])
    assert (session(db)["recorded_stop"], session(db)["tool_errors"], session(db)["rounds"]) == (
        None, 0, 2)
    assert [(r["action"], r["tool_error"]) for r in steps(db)] == [
        ("start", None), ("round", None), ("write", None), ("round", 0), ("round", None)]


def test_tool_errors_keep_a_short_excerpt_and_results_only_a_hash(fold) -> None:
    db = fold(TAIL)
    failed = rows(db, "select * from steps where tool_error = 1")
    assert [(r["tool"], r["detail"], r["source_line"]) for r in failed] == [
        ("Read", "<tool_use_error>File does not exist.</tool_use_error>", 71)]
    fine = rows(db, "select * from steps where tool_error = 0")
    assert fine and all(r["detail"] is None and len(r["observation_hash"]) == 16 for r in fine)


def test_results_continue_the_round_that_called_the_tool(fold) -> None:
    db = fold([assistant("m1", tool_use("t1"), tool_use("t2", "Read")), result("t2", error=True),
               result("t1")])
    got = [(r["action"], r["same_round"], r["tool"], r["tool_error"], r["total_rounds"])
           for r in steps(db)]
    assert got == [("round", 0, "Bash,Read", None, 1), ("read", 0, "Bash", None, 1),
                   ("read", 0, "Read", None, 1), ("round", 1, "Read", 1, 1),
                   ("round", 1, "Bash", 0, 1)]
    assert (session(db)["tool_errors"], session(db)["rounds"]) == (1, 1)


def test_the_same_call_with_the_same_result_is_no_progress(fold) -> None:
    lines = [assistant("m1", tool_use("t1")), result("t1", "1 failed"),
             assistant("m2", tool_use("t2")), result("t2", "1 failed"),
             assistant("m3", tool_use("t3", command="pytest -x")), result("t3", "1 failed")]
    db = fold(lines)
    repeats = rows(db, "select * from incidents where kind = 'no_progress'")
    assert [(i["start_idx"], i["length"]) for i in repeats] == [(3, 2)]  # (each call a step)
    assert session(db)["stop_reason"] == "no_progress"


def test_tool_secrets_in_an_error_excerpt_are_redacted(fold) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4" * 6
    db = fold([assistant("m1", tool_use("t1")), result("t1", f"auth failed for {key}", True)])
    detail = steps(db)[-1]["detail"]
    assert key not in detail and "[REDACTED:anthropic-key]" in detail


# --- sub-agents -------------------------------------------------------------------------------


def test_a_sidechain_file_is_its_own_session_linked_to_its_parent(fold) -> None:
    task_result = result("task-1", "the sub-agent's report",
                         session=PARENT, toolUseResult={"totalTokens": 48_000,
                                                        "usage": {"output_tokens": 5_000}})
    parent = [prompt(session=PARENT), assistant("p1", tool_use("task-1", "Task"), out=40,
                                                session=PARENT), task_result]
    db = fold(parent, SIDECHAIN)
    child = session(db, f"{PARENT}:agent-a7be2f0")
    assert (child["parent_session_id"], child["rounds"], child["output_tokens"]) == (PARENT, 13, 33)
    main = session(db, PARENT)
    assert (main["parent_session_id"], main["rounds"], main["output_tokens"]) == (None, 1, 40)


def test_sidechain_lines_inside_a_main_file_are_split_off(fold) -> None:
    lines = [assistant("m1", out=10), assistant("x1", out=500, isSidechain=True, agentId="a1"),
             assistant("x2", out=500, isSidechain=True, parentUuid="not-read"),
             assistant("m2", out=10)]
    db = fold(lines)
    assert (session(db)["rounds"], session(db)["output_tokens"]) == (2, 20)
    assert session(db, "s1:agent-a1")["parent_session_id"] == "s1"
    assert session(db, "s1:sidechain")["output_tokens"] == 500  # its parent line was not read


def test_each_inline_sub_agent_is_its_own_session(fold) -> None:
    # Claude Code 1.0.x: sub-agents are inline (isSidechain, no agentId), side by side; a
    # sidechain line with no parentUuid starts one, each later line follows its parentUuid.
    a1 = prompt("task a", isSidechain=True, parentUuid=None)
    b1 = prompt("task b", isSidechain=True, parentUuid=None)
    a2 = assistant("a2", out=7, isSidechain=True, parentUuid=a1["uuid"])
    b2 = assistant("b2", out=9, isSidechain=True, parentUuid=b1["uuid"])
    a3 = assistant("a3", out=7, isSidechain=True, parentUuid=a2["uuid"])
    db = fold([prompt(), assistant("m1", tool_use("t1", "Task"), out=1), a1, b1, a2, b2, a3])
    got = rows(db, "select session_id, parent_session_id, rounds, output_tokens from sessions "
                   "where parent_session_id is not null order by rounds")
    assert [tuple(r.values()) for r in got] == [
        (f"s1:sidechain-{b1['uuid']}", "s1", 1, 9), (f"s1:sidechain-{a1['uuid']}", "s1", 2, 14)]
    assert (session(db)["rounds"], session(db)["output_tokens"]) == (1, 1)


@pytest.mark.parametrize(("name", "rounds"), [
    ("cc_ccviewer__fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", [9, 25, 34, 40, 53]),
    ("cc_kiliman__test2.jsonl", [7, 13, 14, 27]),
    ("cc_ccviewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl", [3, 7]),
])
def test_real_old_format_sub_agents_are_split(fold, name: str, rounds: list[int]) -> None:
    # Counted by hand: each sidechain line with parentUuid null starts a sub-agent (5, 4, 2);
    # its rounds are the distinct message ids of the assistant lines of its chain.
    db = fold(real_log("more/claude-code/" + name))
    got = rows(db, "select rounds from sessions where parent_session_id is not null "
                   "order by rounds")
    assert [r["rounds"] for r in got] == rounds
    assert not rows(db, "select 1 from sessions where session_id like '%:sidechain'")


# --- drift and bad input ----------------------------------------------------------------------


def test_unknown_record_types_are_counted_not_errors(fold) -> None:
    lines = [assistant("m1"), line("hologram", beam=True), line("hologram"),
             system("quantum_note"), assistant("m2")]
    db = fold(lines)
    source = rows(db, "select unknown_records from sources")[0]
    assert json.loads(source["unknown_records"]) == {"hologram": 2, "system/quantum_note": 1}
    assert rows(db, "select count(*) n from ingest_errors")[0]["n"] == 0
    assert session(db)["rounds"] == 2


def test_a_broken_line_is_put_aside_and_the_rest_read(fold) -> None:
    db = fold([assistant("m1"), line("assistant", message="oops"), line("user"), assistant("m2")])
    reasons = [r["reason"] for r in rows(db, "select reason from ingest_errors order by line")]
    assert reasons == ["expected the field 'message' to be a JSON object"] * 2
    assert session(db)["rounds"] == 2


def test_the_task_class_is_the_project_folder(fold) -> None:
    assert session(fold([assistant("m1")]))["task_class"] == "shop"
