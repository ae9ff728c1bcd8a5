"""OTLP JSON (ledger/formats/otlp.py): GenAI spans, Claude Code's and Codex's log events.

The two fixtures are made by tests/fixtures/otlp/generate.py with the real OpenTelemetry SDK
and its OTLP encoders; the figures below are pinned by hand from what that script records.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ledger.config.action_map import default_action_map
from ledger.formats import otlp
from ledger.formats.detect import detect_any
from ledger.ingest.ingester import ingest
from tests.helpers import FIXTURES, dump, rows

SPANS = FIXTURES / "otlp" / "genai_spans.jsonl"
LOGS = FIXTURES / "otlp" / "agent_logs.jsonl"
TOKENS = ("rounds", "tool_calls", "output_tokens", "input_tokens", "cache_read_tokens",
          "cache_creation_tokens", "reasoning_tokens", "cost_usd", "stop_reason", "task_class")


def sessions(db: Path) -> dict[str, dict[str, Any]]:
    return {r["session_id"]: {k: r[k] for k in TOKENS}
            for r in rows(db, "select * from sessions")}


def actions(db: Path, session: str) -> list[tuple[str, int, str | None, str | None]]:
    return [(r["action"], r["same_round"], r["tool"], r["vendor_stop"])
            for r in rows(db, "select * from steps where session_id = ? order by idx", [session])]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "ledger.db"
    ingest(path, [SPANS, LOGS])
    return path


def test_both_fixtures_are_detected_as_otlp(db: Path) -> None:
    assert {r["dialect"] for r in rows(db, "select dialect from sources")} == {"otlp"}


def test_genai_spans_are_rounds_tools_and_finish_reasons(db: Path) -> None:
    got = sessions(db)
    # conv-1: input 1200 includes 200 cached (the conventions' count): 1000 + 1300 uncached.
    assert got["conv-1"] == {
        "rounds": 2, "tool_calls": 1, "output_tokens": 100, "input_tokens": 2300,
        "cache_read_tokens": 200, "cache_creation_tokens": None, "reasoning_tokens": None,
        "cost_usd": pytest.approx(0.007), "stop_reason": "task_complete",
        "task_class": "billing-agent"}
    assert actions(db, "conv-1") == [
        ("round", 0, None, "tool_calls"), ("read", 0, "read_file", None),
        ("round", 1, "read_file", None), ("round", 0, None, "stop")]
    # conv-2, deprecated names: the failed call is an API retry, the failed Bash call a tool
    # error, and a finish reason no map names fails closed.
    assert got["conv-2"]["stop_reason"] == "unknown_vendor"
    assert (got["conv-2"]["input_tokens"], got["conv-2"]["output_tokens"]) == (1200, 55)
    assert actions(db, "conv-2") == [
        ("retry", 0, "api", None), ("round", 0, None, "tool_use"), ("write", 0, "Bash", None),
        ("round", 1, "Bash", None), ("round", 0, None, "content_filter_x")]
    errors = rows(db, "select tool_error from steps where session_id = 'conv-2' and tool='Bash' "
                      "and same_round = 1")
    assert errors == [{"tool_error": 1}]


def test_claude_code_events(db: Path) -> None:
    got = sessions(db)["cc-session-1"]
    assert got == {
        "rounds": 2, "tool_calls": 2, "output_tokens": 380, "input_tokens": 22,
        "cache_read_tokens": 10800, "cache_creation_tokens": 800, "reasoning_tokens": None,
        "cost_usd": pytest.approx(0.0163), "stop_reason": "task_complete",
        "task_class": "claude-code"}  # the cost is the log's cost_usd, not a price
    assert actions(db, "cc-session-1") == [
        ("start", 0, None, None), ("round", 0, None, None), ("read", 0, "Read", None),
        ("round", 1, "Read", None), ("write", 0, "Bash", None), ("round", 1, "Bash", None),
        ("retry", 0, "api", None), ("round", 0, None, None)]


def test_codex_events(db: Path) -> None:
    got = sessions(db)["codex-conv-1"]
    # input_token_count 4000 holds the 3000 cached: 1000 uncached; reasoning 64.
    assert (got["rounds"], got["output_tokens"], got["input_tokens"], got["cache_read_tokens"],
            got["reasoning_tokens"]) == (1, 150, 1000, 3000, 64)
    assert actions(db, "codex-conv-1") == [
        ("start", 0, None, None), ("round", 0, None, None), ("read", 0, "shell", None),
        ("round", 1, "shell", None), ("retry", 0, "api", None)]


def test_a_copy_of_an_export_is_folded_once(tmp_path: Path, db: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(SPANS, copy / "again.jsonl")
    ingest(db, [copy])
    assert sessions(db)["conv-1"]["rounds"] == 2
    assert rows(db, "select count(*) n from steps where session_id = 'conv-1'") == [{"n": 4}]


def test_ingested_line_by_line_equals_at_once(tmp_path: Path) -> None:
    whole = tmp_path / "whole.db"
    ingest(whole, [LOGS])
    growing = tmp_path / "grow" / "agent_logs.jsonl"
    growing.parent.mkdir()
    pieces = tmp_path / "pieces.db"
    for line in LOGS.read_text().splitlines(keepends=True):
        with growing.open("a") as f:
            f.write(line)
        ingest(pieces, [growing])
    assert dump(pieces)["steps"] == dump(whole)["steps"]
    assert sessions(pieces) == sessions(whole)


def _span(attrs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    pairs = [{"key": k, "value": v} for k, v in attrs.items()]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": [
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
         "name": "x", "startTimeUnixNano": "1767225600000000000", "attributes": pairs,
         **extra}]}]}]}


CHAT = {"gen_ai.operation.name": {"stringValue": "chat"}}


@pytest.mark.parametrize(("value", "field", "expected"), [
    # The collector writes int64 as strings, other encoders as numbers.
    ({**CHAT, "gen_ai.usage.output_tokens": {"intValue": "7"}}, "output_tokens", 7),
    ({**CHAT, "gen_ai.usage.output_tokens": {"intValue": 7}}, "output_tokens", 7),
    ({**CHAT, "gen_ai.usage.completion_tokens": {"intValue": "9"}}, "output_tokens", 9),
    ({**CHAT, "gen_ai.usage.output_tokens": {"stringValue": "lots"}}, "output_tokens", None),
    ({**CHAT, "gen_ai.usage.input_tokens": {"intValue": "5"},
      "gen_ai.usage.cache_read.input_tokens": {"intValue": "9"}}, "input_tokens", 0),
    ({**CHAT, "gen_ai.response.finish_reasons": {"arrayValue": {"values": [
        {"stringValue": "length"}]}}}, "vendor_stop", "length"),
    ({**CHAT, "gen_ai.request.model": {"stringValue": "m1"}}, "model", "m1"),
])
def test_hand_written_span_attributes(value: dict, field: str, expected: Any) -> None:
    (record,) = otlp.read(_span(value), {}, "file", default_action_map())
    assert getattr(record.event, field) == expected


@pytest.mark.parametrize(("extra", "session"), [
    ({}, "5b8efff798038103d269b633813fc60c"),  # no conversation id: the trace
    ({"traceId": ""}, "file"),  # no trace either: the file's
])
def test_the_session_falls_back_to_the_trace_then_the_file(extra: dict, session: str) -> None:
    (record,) = otlp.read(_span(CHAT, **extra), {}, "file", default_action_map())
    assert record.session == session


@pytest.mark.parametrize("status", [{"code": 2}, {"code": "STATUS_CODE_ERROR"}])
def test_a_failed_model_call_is_an_api_retry(status: dict) -> None:
    (record,) = otlp.read(_span(CHAT, status=status), {}, "file", default_action_map())
    assert (record.event.action, record.event.tool) == ("retry", "api")


@pytest.mark.parametrize("request_", [
    {"resourceSpans": []},
    {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"body": {"stringValue": "other"}}]}]}]},
    _span({"http.method": {"stringValue": "GET"}}),  # not a GenAI span
    {"resourceSpans": [{"scopeSpans": [{"spans": ["not a span", 3]}]}]},
])
def test_requests_with_nothing_for_the_budget_give_nothing(request_: dict) -> None:
    assert detect_any(request_) == "otlp"
    assert otlp.read(request_, {}, "file", default_action_map()) == []


def test_a_line_that_is_not_a_request_is_put_aside(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(_span(CHAT)) + "\n[1, 2]\n")
    db = tmp_path / "ledger.db"
    ingest(db, [path])
    (error,) = rows(db, "select line, reason from ingest_errors")
    assert error == {"line": 2, "reason": "expected the record to be a JSON object"}


def test_a_pretty_printed_request_is_one_document(tmp_path: Path, db: Path) -> None:
    """One request written over many lines (json.dumps(indent=2)) reads as its JSONL line."""
    doc = tmp_path / "docs" / "request.json"
    doc.parent.mkdir()
    doc.write_text(json.dumps(json.loads(SPANS.read_text().splitlines()[0]), indent=2))
    single = tmp_path / "single.db"
    ingest(single, [doc])
    assert rows(single, "select dialect from sources") == [{"dialect": "otlp-document"}]
    one_line = tmp_path / "line.db"
    line = tmp_path / "line" / "request.jsonl"
    line.parent.mkdir()
    line.write_text(SPANS.read_text().splitlines()[0] + "\n")
    ingest(one_line, [line])
    assert sessions(single) == sessions(one_line)
    assert actions(single, "conv-1") == actions(db, "conv-1")
