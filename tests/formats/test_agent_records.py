"""Real agent logs end to end (ledger/importers/): each public sample's import pinned, counted
by hand from the file; detection; the real folder layouts; incremental reads; privacy."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from ledger.formats.agent_records import excerpt, task_class_of, whole
from ledger.formats.detect import detect_any
from ledger.ingest.files import sniff
from ledger.ingest.ingester import ingest
from tests.helpers import REAL_LOGS, dump, rows

SAMPLES = sorted(p.name for p in REAL_LOGS.glob("0*"))

# What the import of each sample must produce, counted by hand from the file:
# (session_id, parent_session_id, dialect, rounds, tool_calls, tool_errors, output_tokens,
#  recorded_stop, stop_reason under the default budget).
EXPECTED: dict[str, tuple[Any, ...]] = {
    # 15 lines. Line 4 is the prompt. Lines 5-8 and 10 are 5 assistant lines of ONE response
    # (message ...u8pYiiQa), each repeating output_tokens 13: 1 round, 13 tokens (not 65);
    # tool_use blocks on lines 8 (Bash) and 10 (Glob): 2 tool calls. Lines 11-12 are
    # is_error tool_results that are user rejections ("The user doesn't want to proceed"):
    # user_cancel, 0 tool errors; line 13 "[Request interrupted by user for tool use]". Lines
    # 1-3, 9 (snapshot, hook progress) and 14-15 (/model, system/local_command) add nothing.
    "01_claude_code_main_session_short_v2.1.38.jsonl": (
        "55604662-cf2a-4331-851a-ec234028f8ca", None, "claude-code", 1, 2, 0, 13,
        "user_cancel", "task_complete"),
    # 131 lines: 79 progress, 20 user (line 1 the sub-agent's prompt, 19 tool_results), 32
    # assistant lines in 13 responses whose largest output_tokens are 3, 4, 1, 3, 1, 1, 6, 4,
    # 1, 6, 1, 1, 1 = 33; 19 tool_use blocks (11 Bash, 7 Read, 1 Glob); is_error on lines 23
    # (EISDIR) and 24 (sibling tool call errored). A sub-agent transcript has no turn end:
    # no recorded stop. 32 steps (13 rounds, 19 tool calls) > max_steps 8 stops it at the 9th.
    "02_claude_code_subagent_sidechain_v2.1.39.jsonl": (
        "8463c716-a2ea-4c14-9efa-87158ebd9f20:agent-a7be2f0",
        "8463c716-a2ea-4c14-9efa-87158ebd9f20", "claude-code", 13, 19, 2, 33,
        None, "max_steps"),
    # 83 lines (a session's tail): 14 assistant lines in 10 responses, largest output_tokens
    # 357, 99 (line 17 says 2, line 18 says 99), 82, 132, 87, 77, 318, 121, 1, 85 = 1359;
    # tool_use: 6 Bash, 1 Read = 7; one tool error (line 71, Read: File does not exist); lines
    # 1 and 8 are results of calls made before the excerpt. Turns end on lines 65-66
    # (stop_hook_summary, turn_duration), 76 and 83 (stop_hook_summary): task_complete. The
    # wall clock (13.5 minutes) passes max_seconds 45 at the second response.
    "03_claude_code_main_session_tail_lines1781-1863_v2.1.39.jsonl": (
        "258c7280-ae70-4798-800f-63464d01a85d", None, "claude-code", 10, 7, 1, 1359,
        "task_complete", "max_seconds"),
    # 26 lines: 3 responses (reasoning + function_call "shell" on lines 9-10, 15-16, 22-23);
    # 3 function_call_outputs with metadata.exit_code 0: no tool errors. token_count totals
    # (lines 8, 11, 14, 17, 20, 24): null, 115, 115, 175, 175, 300: 300 output tokens (the
    # 128 reasoning tokens are inside). No task_complete: no recorded stop.
    "04_codex_rollout_v0.77.0_codex_exec_full.jsonl": (
        "019b7f94-51b4-7593-922e-ba12b5b73b52", None, "codex", 3, 3, 0, 300,
        None, "task_complete"),
    # 19 lines: task_started (line 2); responses: reasoning + exec_command (lines 8-9,
    # total 167), write_stdin (13, total 204), assistant message (17, total 374): 3 rounds,
    # 2 tool calls, 374 tokens; exec_command_end exit_code 0 (line 12): no tool errors;
    # task_complete on line 19.
    "05_codex_rollout_v0.125.0_first_turn_lines1-19.jsonl": (
        "019e1625-789d-76c0-80ab-3724b5ddb799", None, "codex", 3, 2, 0, 374,
        "task_complete", "task_complete"),
    # 4 GENERATION observations (usageDetails.output 29, 53, 56, 94 = 232; toolCallNames
    # 0, 1, 1, 0 = 2), 2 TOOL observations at level DEFAULT, 1 SPAN; trace metadata
    # langsmith.metadata.is_error "false": task_complete.
    "06_langfuse_export_claude_agent_sdk_via_otel_2025-12-22.trace.json": (
        "097f1d8982fa909b8cffb14a166ec272", None, "langfuse", 4, 2, 0, 232,
        "task_complete", "task_complete"),
}


@pytest.fixture(scope="module")
def real_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("real") / "ledger.db"
    summary = ingest(db, [REAL_LOGS])
    assert (summary.files, summary.errors, summary.unknown_records) == (6, 0, {})
    return db


def test_every_sample_is_pinned() -> None:
    assert sorted(EXPECTED) == SAMPLES


@pytest.mark.parametrize("name", SAMPLES)
def test_each_sample_imports_as_counted_by_hand(real_db: Path, name: str) -> None:
    (s,) = rows(real_db, "select * from sessions where source_path like ?", [f"%{name}"])
    got = tuple(s[k] for k in ("session_id", "parent_session_id", "dialect", "rounds",
                               "tool_calls", "tool_errors", "output_tokens", "recorded_stop",
                               "stop_reason"))
    assert got == EXPECTED[name]


@pytest.mark.parametrize("name", SAMPLES)
def test_each_sample_is_detected(name: str) -> None:
    assert sniff(REAL_LOGS / name).dialect == EXPECTED[name][2]


def test_the_steps_add_up_to_the_sessions(real_db: Path) -> None:
    sums = rows(real_db, "select s.session_id, s.tool_calls, s.output_tokens, "
                "sum(t.tool_calls) as calls, sum(t.output_tokens) as tokens, "
                "sum(t.action = 'round' and not t.same_round) as rounds, s.rounds as r "
                "from sessions s join steps t using (session_id) group by s.session_id")
    for s in sums:
        assert (s["calls"], s["tokens"], s["rounds"]) == (s["tool_calls"], s["output_tokens"],
                                                          s["r"]), s["session_id"]


def test_the_dialect_can_be_forced(tmp_path: Path) -> None:
    copy = tmp_path / "anything.log.jsonl"
    shutil.copy(REAL_LOGS / SAMPLES[3], copy)
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "l.db"), str(copy),
                                      "--dialect", "codex", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["sessions"] == 1
    assert rows(tmp_path / "l.db", "select dialect from sources")[0]["dialect"] == "codex"


# --- the real folder layouts, read incrementally ---------------------------------------------


def claude_home(root: Path) -> Path:
    """~/.claude/projects: <cwd slug>/<sessionId>.jsonl and <sessionId>/subagents/agent-*.jsonl."""
    project = root / "projects" / "-home-marco-projects-spotter"
    parent = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    (project / parent / "subagents").mkdir(parents=True)
    shutil.copy(REAL_LOGS / SAMPLES[0], project / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl")
    shutil.copy(REAL_LOGS / SAMPLES[1], project / parent / "subagents" / "agent-a7be2f0.jsonl")
    shutil.copy(REAL_LOGS / SAMPLES[2], project / "258c7280-ae70-4798-800f-63464d01a85d.jsonl")
    return root / "projects"


def codex_home(root: Path) -> Path:
    """~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl."""
    sessions = root / "sessions"
    for sample, day in ((SAMPLES[3], "2026/01/02"), (SAMPLES[4], "2026/05/11")):
        (sessions / day).mkdir(parents=True)
        shutil.copy(REAL_LOGS / sample, sessions / day / f"rollout-{sample[:2]}.jsonl")
    return sessions


def test_the_cli_reads_the_real_folder_layouts(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    result = CliRunner().invoke(cli, ["ingest", str(db), str(claude_home(tmp_path / "claude")),
                                      str(codex_home(tmp_path / "codex"))])
    assert result.exit_code == 0, result.output
    assert "5 files (5 new" in result.output
    got = rows(db, "select dialect, count(*) n from sessions group by dialect order by dialect")
    assert got == [{"dialect": "claude-code", "n": 3}, {"dialect": "codex", "n": 2}]


def strip_paths(dumped: dict[str, list[dict]]) -> dict[str, list[dict]]:
    for table in dumped.values():
        for row in table:
            row.pop("path", None)
            row.pop("source_path", None)
            if "state" in row:
                row["state"] = json.loads(row["state"])
                row["state"].pop("source_path")
    return dumped


@pytest.mark.parametrize("name", SAMPLES[:5])
def test_a_growing_transcript_folds_as_if_read_at_once(tmp_path: Path, name: str) -> None:
    data = (REAL_LOGS / name).read_bytes()
    whole_db, pieces_db = tmp_path / "whole.db", tmp_path / "pieces.db"
    ingest(whole_db, [REAL_LOGS / name])
    growing = tmp_path / "growing" / name
    growing.parent.mkdir()
    cuts = sorted(random.Random(name).sample(range(1, len(data)), 15)) + [len(data)]
    for cut in cuts:
        growing.write_bytes(data[:cut])
        ingest(pieces_db, [growing])
    assert strip_paths(dump(whole_db)) == strip_paths(dump(pieces_db))


def test_only_new_bytes_are_read(tmp_path: Path) -> None:
    data = (REAL_LOGS / SAMPLES[2]).read_bytes()
    half = data.index(b"\n", len(data) // 2) + 1
    log = tmp_path / "projects" / "p" / "s.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(data[:half])
    db = tmp_path / "ledger.db"
    first = ingest(db, [tmp_path / "projects"])
    log.write_bytes(data)
    second = ingest(db, [tmp_path / "projects"])
    assert (first.bytes_read, second.bytes_read) == (half, len(data) - half)
    assert second.updated_files == 1


def test_unknown_records_are_reported_per_file(tmp_path: Path) -> None:
    log = tmp_path / "rollout.jsonl"
    lines = (REAL_LOGS / SAMPLES[4]).read_text().splitlines()
    future = {"timestamp": "2026-05-11T08:27:33.000Z", "type": "event_msg",
              "payload": {"type": "goal_progress", "percent": 40}}
    log.write_text("\n".join([*lines, json.dumps(future)]) + "\n")
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "l.db"), str(log)])
    assert "1 records of unknown types skipped in 1 files" in result.output
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "m.db"), str(log), "--json"])
    unknown = json.loads(result.output)["unknown_records"]
    assert unknown == {str(log): {"event_msg/goal_progress": 1}}


# --- privacy ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["mix phx.server doesnt seem to start",  # 01: the user's prompt
     "defmodule Spotter.Services.Tmux",  # 02: a file's contents, read by a tool
     "did you push?",  # 03: a prompt
     "AI/Run CodeMie CLI",  # 04: the README a tool printed
     "show tools",  # 05: a prompt
     "Weather in Berlin"],  # 06: a tool's output
)
def test_prompts_and_tool_output_are_not_stored(real_db: Path, text: str) -> None:
    assert text not in json.dumps(dump(real_db))


# --- helpers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [({"rounds": []}, "trace"), ({"type": "assistant", "sessionId": "s"}, "claude-code"),
     ({"type": "file-history-snapshot", "snapshot": {}}, "claude-code"),
     ({"type": "event_msg", "timestamp": "t", "payload": {}}, "codex"),
     ({"trace": {"id": "t"}, "observations": []}, "langfuse"),
     ({"type": "assistant"}, None), ({"type": "event_msg", "payload": {}}, None), ([], None)],
)
def test_detection(value: Any, expected: str | None) -> None:
    assert detect_any(value) == expected


def test_helpers() -> None:
    assert [whole(v) for v in (3, "20", -1, True, "x", None)] == [3, 20, None, None, None, None]
    assert task_class_of("/home/u/shop/") == "shop" and task_class_of("C:\\src\\api") == "api"
    assert excerpt("\n  Error: boom  \nstack") == "Error: boom" and len(excerpt("ab " * 999)) == 200
    assert excerpt("x" * 999) == ""  # one token longer than the window looked at: dropped whole
