"""A family counted together, live and in replay (``subagents_count_in_parent``).

Driven call by call over a real parent transcript and its sub-agent's file, both growing in
timestamp order, under a budget that no member trips alone but the family does, the first
denied call is the first tool call at or after the step ``ingest`` records in
``family_stops``; with the key off, no call is denied and no family stop is recorded.
"""

from __future__ import annotations

import heapq
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from ledger.core.budget import Budget
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.live.hook_run import run
from tests.helpers import MORE_LOGS, REAL_LOGS, rows
from tests.live.test_hook import NO_CAPS, TOOL_STEPS, calls_of

CODEMIE = MORE_LOGS / "more" / "claude-code"


def shifted(raw: bytes, session: str, by: timedelta) -> str:
    obj = json.loads(raw)
    obj["sessionId"] = session
    if obj.get("timestamp"):
        at = datetime.fromisoformat(obj["timestamp"]) + by
        obj["timestamp"] = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json.dumps(obj) + "\n"


def in_repo_pair(work: Path) -> tuple[Path, Path]:
    """The in-repo short main session, and the first 60 lines of the in-repo sub-agent
    sidechain made its sub-agent: its session id, and its clock moved to start just after the
    parent's first tool call (so the two interleave in time)."""
    parent = (REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl").read_bytes()
    child = (REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl").read_bytes()
    lines = parent.splitlines()
    sid = json.loads(lines[-1])["sessionId"]
    first_call = next(json.loads(x)["timestamp"] for x in lines if b'"tool_use"' in x)
    head = child.splitlines()[:60]
    start = next(json.loads(x)["timestamp"] for x in head if b'"timestamp"' in x)
    by = datetime.fromisoformat(first_call) - datetime.fromisoformat(start) + timedelta(seconds=1)
    src = work / "src"
    (src / "t" / "subagents").mkdir(parents=True)
    (src / "t.jsonl").write_bytes(parent)
    agent = src / "t" / "subagents" / "agent-a7be2f0.jsonl"
    agent.write_text("".join(shifted(x, sid, by) for x in head))
    return src / "t.jsonl", agent


def codemie_pair(work: Path) -> tuple[Path, Path]:
    """The public pair of ``../shared`` (Claude Code 2.1.7, one sub-agent), if it is there."""
    parent = CODEMIE / "cc_codemie__incremental-subagents-turn-2-2.1.7.jsonl"
    agent = CODEMIE / "cc_codemie__incremental-subagents-turn-2-agent-a485154.jsonl"
    if not parent.exists():
        pytest.skip("../shared/fixtures/real-agent-logs/more/ is not beside the repo")
    return parent, agent


PAIRS = {"in-repo": in_repo_pair, "codemie": codemie_pair}


def in_time_order(parent: Path, agent: Path) -> list[tuple[str, bytes]]:
    """Both files' lines as they were written: by time, each file in its own order (a line
    without a timestamp, or with one earlier than the line before it, goes with that line)."""

    def timed(name: str, path: Path) -> list[tuple[str, int, str, bytes]]:
        out, last = [], ""
        for n, raw in enumerate(path.read_bytes().splitlines(keepends=True)):
            last = max(last, json.loads(raw).get("timestamp") or "")
            out.append((last, n, name, raw))
        return out

    merged = heapq.merge(timed("parent", parent), timed("agent", agent))
    return [(name, raw) for _, _, name, raw in merged]


def drive(
    parent: Path, agent: Path, options: Options, work: Path
) -> tuple[tuple[Path, Path], list[dict[str, Any]]]:
    transcript = work / "live" / "t.jsonl"
    side = work / "live" / "t" / "subagents" / agent.name.split("-turn-2-")[-1]
    side.parent.mkdir(parents=True)
    db = work / "live.db"
    files = {"parent": transcript.open("wb"), "agent": side.open("wb")}
    try:
        for name, raw in in_time_order(parent, agent):
            files[name].write(raw)
            files[name].flush()
            for payload in calls_of(raw):
                payload["transcript_path"] = str(transcript)
                run(json.dumps(payload).encode(), db, lambda _f: options)
    finally:
        for f in files.values():
            f.close()
    return (transcript, side), rows(db, "select * from hook_decisions order by id")


def member_steps(parent: Path, agent: Path, db: Path) -> dict[str, int]:
    ingest(db, [parent, agent], Options(budget=NO_CAPS))
    return {r["session_id"]: r["steps"] for r in rows(db, "select session_id, steps from sessions")}


@pytest.mark.parametrize("make", PAIRS.values(), ids=PAIRS.keys())
def test_the_first_denied_call_is_the_family_stop_ingest_records(
    make: Any, tmp_path: Path
) -> None:
    parent, agent = make(tmp_path)
    steps = member_steps(parent, agent, tmp_path / "sizes.db")
    assert len(steps) == 2
    # no member exceeds it alone; together they do
    budget = replace(NO_CAPS, max_steps=max(steps.values()))
    options = Options(budget=budget, subagents_count_in_parent=True)
    files, decisions = drive(parent, agent, options, tmp_path)
    db = tmp_path / "ingested.db"
    ingest(db, list(files), options)
    assert [r["stop_reason"] for r in rows(db, "select stop_reason from sessions")] == [
        "task_complete", "task_complete"]
    (stop,) = rows(db, "select * from family_stops")
    assert (stop["stop_reason"], stop["members"]) == ("max_steps", 2)
    calls = rows(
        db,
        "select session_id, idx, ts from steps where session_id in (?, ?) "
        f"and action in {TOOL_STEPS} and tool is not 'api'",
        tuple(steps),
    )
    at = (stop["ts"] or "", stop["session_id"], stop["idx"])
    first = min((c["ts"] or "", c["session_id"], c["idx"]) for c in calls
                if (c["ts"] or "", c["session_id"], c["idx"]) >= at)
    denied = [d for d in decisions if d["decision"] == "deny"]
    assert denied, "the family's calls are denied from its stop on"
    assert (denied[0]["session_id"], denied[0]["event_idx"]) == first[1:]
    assert "the family of session" in denied[0]["reason"]
    assert "max_steps" in denied[0]["reason"]
    # every call before it allowed, every call after it denied
    n = decisions.index(denied[0])
    assert [d["decision"] for d in decisions] == ["allow"] * n + ["deny"] * (len(decisions) - n)


@pytest.mark.parametrize("make", PAIRS.values(), ids=PAIRS.keys())
def test_with_the_key_off_each_session_counts_alone(make: Any, tmp_path: Path) -> None:
    parent, agent = make(tmp_path)
    steps = member_steps(parent, agent, tmp_path / "sizes.db")
    options = Options(budget=replace(NO_CAPS, max_steps=max(steps.values())))
    files, decisions = drive(parent, agent, options, tmp_path)
    assert decisions and {d["decision"] for d in decisions} == {"allow"}
    db = tmp_path / "ingested.db"
    ingest(db, list(files), options)
    assert rows(db, "select * from family_stops") == []
    # turned on, the next ingest works the families out; turned off again, they go
    ingest(db, list(files), Options(budget=options.budget, subagents_count_in_parent=True))
    assert [r["stop_reason"] for r in rows(db, "select stop_reason from family_stops")] == [
        "max_steps"]
    ingest(db, list(files), options)
    assert rows(db, "select * from family_stops") == []


def test_the_budget_file_key(tmp_path: Path) -> None:
    from ledger.config.budget_file import read_budget_file, read_family
    from ledger.core.budget import BudgetError

    on = tmp_path / "on.toml"
    on.write_text("max_steps = 5\nsubagents_count_in_parent = true\n")
    assert read_family(on) is True
    assert Budget.from_mapping(read_budget_file(on)) == Budget(max_steps=5)
    # the hook's options and the command line's read it from the file
    from ledger.cli.options import make_options
    from ledger.live.hook_main import options_for

    assert options_for((), None, None)(str(on)).subagents_count_in_parent is True
    assert options_for((), None, None)(None).subagents_count_in_parent is False
    assert make_options((), str(on), None).subagents_count_in_parent is True
    assert make_options((), str(on), None).budget == Budget(max_steps=5)
    plain = tmp_path / "plain.toml"
    plain.write_text("[budget]\nmax_steps = 5\n")
    assert read_family(plain) is False
    bad = tmp_path / "bad.toml"
    bad.write_text('subagents_count_in_parent = "yes"\n')
    with pytest.raises(BudgetError, match="must be true or false"):
        read_family(bad)
