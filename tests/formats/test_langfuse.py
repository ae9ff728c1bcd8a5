"""Langfuse trace exports, with OpenTelemetry GenAI attributes (ledger/importers/langfuse.py)."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import REAL_LOGS, real_log, rows

EXPORT = REAL_LOGS / "06_langfuse_export_claude_agent_sdk_via_otel_2025-12-22.trace.json"
TRACE_ID = "097f1d8982fa909b8cffb14a166ec272"


@pytest.fixture
def export() -> dict[str, Any]:
    return json.loads(EXPORT.read_text())


@pytest.fixture
def fold(tmp_path: Path):
    """Write an export (detected, not forced) and ingest it; returns the database path."""
    def run(doc: dict[str, Any], indent: int | None = None) -> Path:
        path = tmp_path / "exports" / "trace.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(doc, indent=indent))
        db = tmp_path / "ledger.db"
        ingest(db, [path])
        return db
    return run


def session(db: Path) -> dict[str, Any]:
    return rows(db, "select * from sessions")[0]


def steps(db: Path) -> list[dict[str, Any]]:
    return rows(db, "select * from steps order by idx")


def observation(export: dict, kind: str) -> dict[str, Any]:
    return next(o for o in export["observations"] if o["type"] == kind)


def test_generations_are_rounds_and_tools_continue_them(fold, export) -> None:
    db = fold(export)
    got = [(r["action"], r["same_round"], r["tool_calls"], r["output_tokens"]) for r in steps(db)]
    # In start-time order: 4 GENERATIONs (29, 53, 56, 94 output tokens; the middle two call
    # mcp__weather__get_weather once each), the 2 TOOL observations after the third (each a
    # step of its action class, then its result), then the end. The weather tool is in no map,
    # so each call is a write (fail closed).
    assert got == [("round", 0, 0, 29), ("round", 0, 1, 53), ("round", 0, 1, 56),
                   ("write", 0, None, None), ("round", 1, None, None),
                   ("write", 0, None, None), ("round", 1, None, None), ("round", 0, 0, 94),
                   ("end", 0, None, None)]


def test_the_trace_is_the_session(fold, export) -> None:
    s = session(fold(export))
    assert (s["session_id"], s["task_class"], s["dialect"]) == (
        TRACE_ID, "claude.conversation", "langfuse")
    assert (s["started_at"], s["elapsed_s"]) == ("2025-12-22T10:46:15.528Z", 7.36)


def test_a_pretty_printed_export_is_detected(fold, export) -> None:
    assert session(fold(export, indent=2))["rounds"] == 4


def test_a_forced_dialect_reads_the_whole_document(tmp_path: Path, export) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(export, indent=2))
    ingest(tmp_path / "l.db", [path], Options(dialect="langfuse"))
    (source,) = rows(tmp_path / "l.db", "select fingerprint from sources")
    assert source["fingerprint"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert session(tmp_path / "l.db")["rounds"] == 4


def test_a_bare_trace_with_its_observations_is_read(fold, export) -> None:
    bare = dict(export["trace"], observations=export["observations"])
    assert session(fold(bare))["rounds"] == 4


def test_a_tool_a_generation_named_is_not_counted_twice(fold, export) -> None:
    # The export's two generations name mcp__weather__get_weather; its two TOOL observations
    # are those calls. Unnamed, the TOOL observations are what counts them.
    assert session(fold(export))["tool_calls"] == 2
    for obs in export["observations"]:
        obs.pop("toolCallNames", None)
        obs.pop("toolCalls", None)
    assert session(fold(export))["tool_calls"] == 2


def test_a_tool_is_named_by_its_otel_attribute(fold, export) -> None:
    tool = observation(export, "TOOL")
    tool.update(name="running tool: get_weather",
                metadata={"attributes": {"gen_ai.tool.name": "get_weather"}})
    db = fold(export)
    assert sorted(r["tool"] for r in steps(db) if r["action"] == "write") == [
        "get_weather", "mcp__weather__get_weather"]
    assert session(db)["tool_calls"] == 3  # no generation named get_weather


@pytest.mark.parametrize(("name", "tool_calls", "tools"), [
    ("lf_pydantic-ai-tools-2025-12-04.trace.json", 3,
     ["get_pun_suggestion", "get_dad_joke_suggestion", "get_one_liner_suggestion"]),
    ("lf_vercel-aisdk-2025-11-17.trace.json", 1, ["getWeather"]),
    ("lf_openai-agents-2025-09-30.trace.json", 1, ["get_weather"]),
    ("lf_csharp-agent-with-gemini-2026-03-09.trace.json", 2,
     ["get_custom_report", "final_result"]),
    ("lf_langgraph-python-2025-08-22.trace.json", 0, []),  # its tool is a SPAN, not a TOOL
])
def test_real_tool_observations_are_tool_calls(fold, name: str, tool_calls: int, tools) -> None:
    # Counted by hand: the TOOL observations of each export (no generation names its calls).
    db = fold(json.loads(real_log("more/other/" + name).read_text()))
    assert session(db)["tool_calls"] == tool_calls
    called = [r["tool"] for r in steps(db) if r["action"] in ("think", "read", "write")]
    assert sorted(called) == sorted(tools)


def test_a_tool_at_level_error_is_a_tool_error(fold, export) -> None:
    tool = observation(export, "TOOL")
    tool.update(level="ERROR", statusMessage="weather API returned 503\ntrace...")
    db = fold(export)
    failed = [r for r in steps(db) if r["tool_error"]]
    assert [(r["tool"], r["detail"]) for r in failed] == [
        ("mcp__weather__get_weather", "weather API returned 503")]


def test_a_generation_at_level_error_is_a_failed_call(fold, export) -> None:
    observation(export, "GENERATION").update(level="ERROR", statusMessage="overloaded")
    db = fold(export)
    assert session(db)["rounds"] == 3
    assert [(r["action"], r["tool"], r["detail"]) for r in steps(db) if r["action"] == "retry"] == [
        ("retry", "api", "overloaded")]


@pytest.mark.parametrize(
    ("flags", "recorded", "vendor"),
    [({"langsmith.metadata.is_error": "false"}, "task_complete", None),
     ({"is_error": True, "terminal_reason": "max_turns"}, "max_rounds", "max_turns"),
     ({"langsmith.metadata.is_error": "true", "langsmith.metadata.subtype": "error_max_budget_usd"},
      "max_cost", "error_max_budget_usd"),
     ({"langsmith.metadata.is_error": "true"}, "unknown_vendor", "is_error"),
     ({}, None, None)],
)
def test_the_trace_verdict_is_read_fail_closed(fold, export, flags, recorded, vendor) -> None:
    meta = json.loads(export["trace"]["metadata"])
    meta["attributes"] = {k: v for k, v in meta["attributes"].items() if "is_error" not in k}
    meta["attributes"].update(flags)
    export["trace"]["metadata"] = json.dumps(meta)
    s = session(fold(export))
    assert (s["recorded_stop"], s["vendor_stop"]) == (recorded, vendor)


def test_otel_attributes_stand_in_for_langfuse_usage(fold, export) -> None:
    generation = observation(export, "GENERATION")
    meta = json.loads(generation["metadata"])
    meta["attributes"].update({"gen_ai.usage.output_tokens": "20",
                               "gen_ai.response.finish_reasons": '["end_turn"]'})
    generation.update(usageDetails={}, outputUsage=0, metadata=json.dumps(meta))
    db = fold(export)
    first = next(r for r in steps(db) if r["source_offset"] is None and r["output_tokens"] == 20)
    assert first["vendor_stop"] == "end_turn"


def test_unknown_observation_types_are_counted(fold, export) -> None:
    extra = copy.deepcopy(observation(export, "SPAN"))
    extra.update(id="x1", type="HOLOGRAM")
    export["observations"].append(extra)
    export["observations"].append("not an observation")
    db = fold(export)
    assert json.loads(rows(db, "select unknown_records from sources")[0]["unknown_records"]) == {
        "observation/HOLOGRAM": 1}
    assert [e["reason"] for e in rows(db, "select reason from ingest_errors")] == [
        "observations[8]: not an observation object"]
    assert session(db)["rounds"] == 4


def test_prompts_and_tool_output_are_not_stored(fold, export) -> None:
    db = fold(export)
    everything = json.dumps([rows(db, f"select * from {t}") for t in ("sessions", "steps")])
    assert "Berlin" not in everything and "weather like" not in everything
