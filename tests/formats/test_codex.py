"""Codex CLI rollouts: cumulative token counts, exit codes in two shapes, turn ends
(ledger/importers/codex.py)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
import yaml

from tests.helpers import REAL_LOGS, ROOT, real_log, rows
from tests.helpers import session_row as session
from tests.helpers import step_rows as steps

EXEC = REAL_LOGS / "04_codex_rollout_v0.77.0_codex_exec_full.jsonl"
TUI = REAL_LOGS / "05_codex_rollout_v0.125.0_first_turn_lines1-19.jsonl"
EXEC_ID = "019b7f94-51b4-7593-922e-ba12b5b73b52"
TUI_ID = "019e1625-789d-76c0-80ab-3724b5ddb799"

_clock = iter(range(10**6))


def rec(kind: str, **payload: Any) -> dict[str, Any]:
    n = next(_clock)
    return {"timestamp": f"2026-05-11T08:{n // 60 % 60:02d}:{n % 60:02d}.000Z", "type": kind,
            "payload": payload}


def meta(session: str = "s1", **fields: Any) -> dict[str, Any]:
    return rec("session_meta", id=session, cwd="/home/u/repos/shop", cli_version="0.125.0",
               **fields)


def event(kind: str, **fields: Any) -> dict[str, Any]:
    return rec("event_msg", type=kind, **fields)


def item(kind: str, **fields: Any) -> dict[str, Any]:
    return rec("response_item", type=kind, **fields)


def call(call_id: str, name: str = "exec_command", cmd: str = "make") -> dict[str, Any]:
    return item("function_call", name=name, arguments=json.dumps({"cmd": cmd}), call_id=call_id)


def output(call_id: str, text: str) -> dict[str, Any]:
    return item("function_call_output", call_id=call_id, output=text)


def tokens(total_output: int) -> dict[str, Any]:
    usage = {"input_tokens": 1000, "output_tokens": total_output, "reasoning_output_tokens": 0}
    return event("token_count", info={"total_token_usage": usage, "last_token_usage": usage})


def wrapped(text: str, exit_code: int) -> str:
    """The older output shape: JSON text with metadata.exit_code."""
    return json.dumps({"output": text, "metadata": {"exit_code": exit_code,
                                                   "duration_seconds": 0.1}})


@pytest.fixture
def fold(ingest_logs):
    """Ingest lines (or real sample files) as Codex rollouts; returns the database path."""
    return functools.partial(ingest_logs, dialect="codex")


# --- token counts -----------------------------------------------------------------------------


def test_token_counts_are_cumulative_so_rounds_take_the_growth(fold) -> None:
    # Sample 04: six token_count events. Line 8 has info null; lines 14 and 20 re-emit the
    # total before them (115, 175). The growth is 115, 60, 125: 300 output tokens, of which
    # 128 are reasoning tokens already inside (total_tokens 7381 = 7266 input + 115 output).
    db = fold(EXEC)
    grown = [r["output_tokens"] for r in steps(db, EXEC_ID) if r["output_tokens"]]
    assert grown == [115, 60, 125]
    assert session(db, EXEC_ID)["output_tokens"] == 300


def test_a_restarted_counter_is_a_new_baseline(fold) -> None:
    lines = [meta(), item("reasoning"), tokens(500), item("reasoning"), tokens(20),
             item("reasoning"), tokens(70)]
    assert session(fold(lines))["output_tokens"] == 550


def test_a_response_is_one_round_whatever_it_holds(fold) -> None:
    lines = [meta(), item("reasoning"), call("c1"), call("c2", cmd="ls"), tokens(40),
             output("c1", "ok"), output("c2", "ok"), item("message", role="assistant"),
             tokens(60)]
    s = session(fold(lines))
    assert (s["rounds"], s["tool_calls"], s["output_tokens"]) == (2, 2, 60)


def test_without_token_counts_tool_outputs_and_prompts_end_a_response(fold) -> None:
    def reasoning() -> dict[str, Any]:  # (each its own line: a line twice is one record)
        return item("reasoning", summary=[])

    def answer() -> dict[str, Any]:
        return item("message", role="assistant", content=[])

    lines = [meta(), event("user_message", message="go"), reasoning(), call("c1"), call("c2"),
             output("c1", "a"), output("c2", "b"), reasoning(), call("c3"), output("c3", "c"),
             answer(), event("user_message", message="more"), answer()]
    db = fold(lines)
    assert (session(db)["rounds"], session(db)["tool_calls"]) == (4, 3)


def test_once_token_counts_are_read_they_alone_close_rounds(fold) -> None:
    # token_count comes after the response's items and before the tool outputs (0.104)
    lines = [meta(), call("c1"), tokens(10), output("c1", "a"), call("c2"), output("c2", "b"),
             tokens(20)]
    assert session(fold(lines))["rounds"] == 2


def test_the_real_rollout_without_token_counts(fold) -> None:
    # more/codex cx_codemie (0.128, no token_count, no exec_command_end), counted by hand:
    # 20 runs of model output items between tool outputs and prompts, 38 function calls, and
    # one plain-text "Process exited with code 1" among 34 exits with code 0.
    db = fold(real_log("more/codex/" + "cx_codemie__rollout-2026-05-11T13-28-45-019e1695-0522-7c83-"
                                "8b39-0dd379793f80.jsonl"))
    got = session(db, "019e1695-0522-7c83-8b39-0dd379793f80")
    assert (got["rounds"], got["tool_calls"], got["tool_errors"]) == (20, 38, 1)


def test_prompts_sent_to_the_model_are_not_rounds(fold) -> None:
    lines = [meta(), item("message", role="developer"), item("message", role="user")]
    assert session(fold(lines + [item("reasoning")]))["rounds"] == 1


# --- tool errors ------------------------------------------------------------------------------


def test_older_builds_report_the_exit_code_in_the_output_json(fold) -> None:
    lines = [meta(), call("c1"), tokens(10), output("c1", wrapped("make: *** [all] Error 2", 2)),
             call("c2"), tokens(20), output("c2", wrapped("ok", 0))]
    db = fold(lines)
    results = [(r["tool"], r["tool_error"], r["detail"])
               for r in steps(db) if r["observation_hash"]]
    assert results == [("exec_command", 1, "make: *** [all] Error 2"), ("exec_command", 0, None)]


def test_the_real_older_outputs_exit_zero(fold) -> None:
    db = fold(EXEC)
    assert [r["tool_error"] for r in steps(db, EXEC_ID) if r["observation_hash"]] == [0, 0, 0]


def test_newer_builds_report_it_in_exec_command_end(fold) -> None:
    lines = [meta(), call("c1"), tokens(10), output("c1", "Process exited with code 1"),
             event("exec_command_end", call_id="c1", exit_code=1, status="failed",
                   stderr="boom\nmore")]
    db = fold(lines)
    assert [(r["tool_error"], r["detail"]) for r in steps(db)[-2:]] == [(None, None), (1, "boom")]
    assert session(db)["tool_errors"] == 1


def plain(exit_line: str, printed: str = "hello") -> str:
    """The plain-text output shape of Codex 0.12x: a header, then the command's output."""
    return f"Chunk ID: bd7d7c\nWall time: 0.0 seconds\n{exit_line}\nOutput:\n{printed}"


@pytest.mark.parametrize(("text", "failed"), [
    (plain("Process exited with code 1"), 1),
    (plain("Process exited with code 0"), 0),
    (plain("Process exited with code -9"), 1),
    # the phrase printed by the command, not its header, says nothing
    (plain("Wall time: 0.1 seconds", "Process exited with code 1"), None),
    ("Process exited with code 1", None),  # no header: the end event will say
])
def test_builds_without_end_events_give_it_in_the_text_header(fold, text: str, failed) -> None:
    db = fold([meta(), call("c1"), output("c1", text)])
    assert [r["tool_error"] for r in steps(db) if r["observation_hash"]] == [failed]


def test_a_call_status_is_counted_once(fold) -> None:
    end = event("exec_command_end", call_id="c1", exit_code=1, status="failed")
    first = [meta(), call("c1"), tokens(10), output("c1", wrapped("bad", 1)), end]
    second = [meta("r2"), call("c1"), tokens(10), end, output("c1", wrapped("bad", 1))]
    db = fold(first, second)
    assert (session(db)["tool_errors"], session(db, "r2")["tool_errors"]) == (1, 1)


@pytest.mark.parametrize(
    ("end", "failed"),
    [({"type": "patch_apply_end", "success": False}, 1),
     ({"type": "patch_apply_end", "success": True}, 0),
     ({"type": "mcp_tool_call_end", "result": {"Err": "timeout"}}, 1),
     ({"type": "mcp_tool_call_end", "result": {"Ok": {"isError": True}}}, 1),
     ({"type": "mcp_tool_call_end", "result": {"Ok": {"content": []}}}, 0)],
)
def test_patch_and_mcp_ends_are_tool_status(fold, end: dict, failed: int) -> None:
    db = fold([meta(), call("c1", "apply_patch"), tokens(5),
               rec("event_msg", call_id="c1", **end)])
    assert steps(db)[-1]["tool_error"] == failed


def test_a_declined_command_is_a_user_cancel(fold) -> None:
    db = fold([meta(), call("c1"), tokens(5),
               event("exec_command_end", call_id="c1", exit_code=-1, status="declined")])
    assert (session(db)["recorded_stop"], session(db)["tool_errors"]) == ("user_cancel", 0)


# --- turns and stops --------------------------------------------------------------------------


def test_task_complete_is_the_recorded_stop(fold) -> None:
    s = session(fold(TUI), TUI_ID)
    assert (s["recorded_stop"], s["vendor_stop"]) == ("task_complete", "task_complete")


def test_a_rollout_without_a_turn_end_is_flagged_on_the_paid_path(fold) -> None:
    db = fold(EXEC)
    s = session(db, EXEC_ID)
    assert (s["stop_reason"], s["recorded_stop"]) == ("task_complete", None)
    metadata = yaml.safe_load((ROOT / "metadata.yml").read_text())
    sql = metadata["databases"]["ledger"]["queries"]["paid_path"]["sql"]
    (flagged,) = rows(db, sql)
    assert flagged["task_class"] == "codemie-code"
    assert "no_terminal_signal" in flagged["reason_kinds"].split(",")
    assert any(EXEC_ID in reason and "terminal" in reason
               for reason in json.loads(flagged["reasons"]))


@pytest.mark.parametrize(
    ("reason", "recorded", "stop"),
    [("interrupted", "user_cancel", "task_complete"),
     ("replaced", "user_cancel", "task_complete"),
     ("budget_limited", "max_cost", "task_complete")],
)
def test_an_aborted_turn_records_its_reason(fold, reason: str, recorded: str, stop: str) -> None:
    db = fold([meta(), event("task_started", turn_id="t1"), item("reasoning"), tokens(3),
               event("turn_aborted", reason=reason)])
    s = session(db)
    assert (s["recorded_stop"], s["vendor_stop"], s["stop_reason"]) == (recorded, reason, stop)


def test_a_new_turn_reopens_the_session(fold) -> None:
    lines = [meta(), event("user_message", message="hi"), item("reasoning"), tokens(3),
             event("task_complete", turn_id="t1"), event("user_message", message="more"),
             item("reasoning")]
    db = fold(lines)
    assert session(db)["recorded_stop"] is None
    assert [r["action"] for r in steps(db) if r["action"] != "round"] == ["start", "end", "start"]


def test_task_started_and_its_user_message_start_one_turn(fold) -> None:
    db = fold(TUI)
    assert [r["detail"] for r in steps(db, TUI_ID) if r["action"] == "start"] == ["turn started"]


def test_an_error_event_is_a_failed_model_call(fold) -> None:
    errors = [event("error", message="stream disconnected before completion") for _ in range(3)]
    db = fold([meta(), *errors])
    storm = rows(db, "select key, length from incidents where kind = 'retry_storm'")
    assert storm == [{"key": "api", "length": 3}]


# --- sessions and drift -----------------------------------------------------------------------


def test_the_session_and_task_class_come_from_session_meta(fold) -> None:
    s = session(fold(TUI), TUI_ID)
    assert (s["task_class"], s["parent_session_id"]) == ("codemie-code", None)


def test_a_sub_agent_rollout_links_to_its_parent_thread(fold) -> None:
    spawned = meta("child", source={"subagent": {"thread_spawn": {"parent_thread_id": "p1"}}})
    forked = [meta("fork"), meta("p2")]
    db = fold([spawned, item("reasoning")], [*forked, item("reasoning")])
    assert session(db, "child")["parent_session_id"] == "p1"
    assert session(db, "fork")["parent_session_id"] == "p2"


def test_records_before_session_meta_use_the_file(fold) -> None:
    db = fold([item("reasoning"), tokens(4)])
    (only,) = rows(db, "select session_id, source_id from sessions")
    assert only["session_id"] == only["source_id"]


def test_unknown_record_types_are_counted_not_errors(fold) -> None:
    lines = [meta(), rec("hologram"), event("quantum_leap"), item("teleport_call"),
             event("collab_agent_spawn_end"), item("reasoning")]
    db = fold(lines)
    unknown = json.loads(rows(db, "select unknown_records from sources")[0]["unknown_records"])
    assert unknown == {"event_msg/quantum_leap": 1, "hologram": 1, "response_item/teleport_call": 1}
    assert rows(db, "select count(*) n from ingest_errors")[0]["n"] == 0
