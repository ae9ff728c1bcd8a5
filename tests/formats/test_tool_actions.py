"""Tool calls of real agent logs as action steps (ledger/formats/*, ledger/core/actions.py):
every call gets a class, max_writes and the retry rule are honoured, unclassified tools fail
closed and are listed, and no tool input is stored."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ledger.analysis.verdicts import MISSING_METER, UNCLASSIFIED_TOOL
from ledger.config.action_map import load_action_map
from ledger.core.budget import Budget
from ledger.db.verdict_tables import compute_from
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.formats.test_claude_code import assistant, result, tool_use
from tests.formats.test_codex import call, meta, output, wrapped
from tests.helpers import MORE_LOGS, REAL_LOGS, dump, rows
from tests.helpers import session_row as session

ACTIONS = ("think", "read", "write", "retry")
TAIL = REAL_LOGS / "03_claude_code_main_session_tail_lines1781-1863_v2.1.39.jsonl"
TAIL_ID = "258c7280-ae70-4798-800f-63464d01a85d"
MORE = MORE_LOGS / "more"
#: Only writes count: every other cap off.
WRITES_ONLY = {k: None for k in Budget.keys() if k != "max_writes"}


def run(tmp_path: Path, paths: list[Path], **options: Any) -> Path:
    db = tmp_path / "ledger.db"
    ingest(db, paths, Options(**options))
    return db


def tool_steps(db: Path) -> list[dict[str, Any]]:
    return rows(db, "select * from steps where action in ('think', 'read', 'write', 'retry') "
                "and coalesce(tool, '') != 'api' order by session_id, idx")


@pytest.fixture(scope="module")
def real_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run(tmp_path_factory.mktemp("real"), [REAL_LOGS])


def test_every_tool_call_of_the_samples_is_one_action_step(real_db: Path) -> None:
    calls = rows(real_db, "select session_id, tool_calls from sessions order by session_id")
    found = rows(real_db, "select session_id, count(*) as n from steps where action in "
                 "('think', 'read', 'write', 'retry') and coalesce(tool, '') != 'api' "
                 "group by session_id order by session_id")
    assert {r["session_id"]: r["tool_calls"] for r in calls} == {
        r["session_id"]: r["n"] for r in found}
    assert sum(r["n"] for r in found) == 35  # 2 + 19 + 7 + 3 + 2 + 2, as in EXPECTED


def test_the_samples_tool_calls_are_classed_as_counted_by_hand(real_db: Path) -> None:
    got = [(r["tool"], r["action"], r["detail"]) for r in tool_steps(real_db)
           if r["session_id"] == TAIL_ID]
    # Sample 03's 7 calls (lines 9, 18, 26, 35, 43, 53, 70): git add; bd list, bd show and bd
    # close (bd is no command the default map knows: writes); bd sync && git push; git
    # status; Read.
    assert got == [("Bash", "write", "git"), ("Bash", "write", "bd"), ("Bash", "write", "bd"),
                   ("Bash", "write", "bd"), ("Bash", "write", "bd"),
                   ("Bash", "read", "git status"), ("Read", "read", None)]
    counts = rows(real_db, "select action, count(*) as n from steps where action in "
                  "('think', 'read', 'write', 'retry') group by action order by action")
    assert {r["action"]: r["n"] for r in counts} == {"read": 26, "write": 9}


def test_only_the_unnamed_tool_is_unclassified(real_db: Path) -> None:
    found = rows(real_db, "select session_id, key, blocked from incidents "
                 "where kind = 'unclassified_tool'")
    assert [(r["key"], r["blocked"]) for r in found] == [
        ("mcp__weather__get_weather", 0), ("mcp__weather__get_weather", 0)]
    meters = {r["session_id"]: r["meters"].split(",") for r in rows(
        real_db, "select session_id, meters from sessions")}
    assert [s for s, m in meters.items() if "write_classification" not in m] == [
        "097f1d8982fa909b8cffb14a166ec272"]


def test_the_write_rules_are_gaps_only_where_a_tool_is_unclassified(real_db: Path) -> None:
    with sqlite3.connect(real_db) as conn:
        verdicts = compute_from(conn)
    gaps = {(r["task_class"], r["rule"]) for r in verdicts.coverage
            if r["sessions_missing"] and r["meter"] == "write_classification"}
    assert gaps == {("claude.conversation", "max_writes"),
                    ("claude.conversation", "retry_near_ceiling")}
    kinds = {c["task_class"]: c["reason_kinds"].split(",") for c in verdicts.classes}
    assert [c for c, k in kinds.items() if UNCLASSIFIED_TOOL in k] == ["claude.conversation"]


def test_max_writes_stops_the_third_write_of_sample_03(tmp_path: Path) -> None:
    db = run(tmp_path, [TAIL], budget=Budget(**WRITES_ONLY, max_writes=2))
    s = session(db, TAIL_ID)
    stop = rows(db, "select * from steps where session_id = ? and idx = ?", [TAIL_ID, s["stop_at"]])
    assert (s["stop_reason"], s["stop_detail"], s["writes"]) == ("max_writes", "writes 3 > 2", 5)
    assert (stop[0]["source_line"], stop[0]["detail"]) == (26, "bd")  # bd show, the 3rd write


def test_an_action_map_moves_the_stop(tmp_path: Path) -> None:
    mine = tmp_path / "actions.toml"
    mine.write_text('[commands]\n"bd list" = "read"\n"bd show" = "read"\n')
    db = run(tmp_path, [TAIL], budget=Budget(**WRITES_ONLY, max_writes=2),
             action_map=load_action_map(mine))
    s = session(db, TAIL_ID)
    stop = rows(db, "select * from steps where session_id = ? and idx = ?", [TAIL_ID, s["stop_at"]])
    # git add (1), bd close (2), then bd sync && git push (3) on line 43.
    assert (s["stop_reason"], s["writes"], stop[0]["source_line"]) == ("max_writes", 3, 43)


def test_a_changed_action_map_folds_again(tmp_path: Path) -> None:
    mine = tmp_path / "actions.toml"
    mine.write_text('[commands]\n"bd list" = "read"\n')
    assert Options().fold_digest != Options(action_map=load_action_map(mine)).fold_digest
    db = run(tmp_path, [TAIL])
    assert session(db, TAIL_ID)["writes"] == 5
    ingest(db, [TAIL], Options(action_map=load_action_map(mine)))
    assert session(db, TAIL_ID)["writes"] == 4


# --- retries ---------------------------------------------------------------------------------


def test_a_failed_call_repeated_is_a_retry(ingest_logs) -> None:
    lines = [assistant("m1", tool_use("t1", command="make")), result("t1", "boom", True),
             assistant("m2", tool_use("t2", command="make")), result("t2", "boom", True),
             assistant("m3", tool_use("t3", command="make")), result("t3", "ok"),
             assistant("m4", tool_use("t4", command="make"))]
    db = ingest_logs(lines, dialect="claude-code")
    assert [r["action"] for r in tool_steps(db)] == ["write", "retry", "retry", "write"]
    assert session(db)["writes"] == 2  # a retry is not a write of its own (seed 002)


@pytest.mark.parametrize(("max_steps", "stop"), [(5, "retry_near_ceiling"), (6, "task_complete")])
def test_the_retry_rule_on_real_shaped_lines(tmp_path: Path, write_jsonl, max_steps: int,
                                             stop: str) -> None:
    lines = [assistant("m1", tool_use("t1", "Read", "x")), result("t1", "no such file", True),
             assistant("m2", tool_use("t2", "Read", "x"))]
    path = write_jsonl(tmp_path / "log.jsonl", lines)
    db = run(tmp_path, [path], budget=Budget(max_steps=max_steps), dialect="claude-code")
    # The retry is step 4: blocked when 4 >= max_steps - 1.
    assert session(db)["stop_reason"] == stop


def test_a_codex_call_repeated_after_a_failure_is_a_retry(ingest_logs) -> None:
    lines = [meta(), call("c1", cmd="cargo build"), output("c1", wrapped("error", 101)),
             call("c2", cmd="cargo build"), output("c2", wrapped("ok", 0)),
             call("c3", cmd="cargo build")]
    db = ingest_logs(lines, dialect="codex")
    assert [r["action"] for r in tool_steps(db)] == ["write", "retry", "write"]


# --- unclassified tools ----------------------------------------------------------------------


def test_an_unclassified_tool_is_a_write_a_gap_and_a_reason(ingest_logs) -> None:
    lines = [assistant("m1", {"type": "tool_use", "id": "t1", "name": "mcp__foo__bar",
                              "input": {"q": 1}})]
    db = ingest_logs(lines, dialect="claude-code")
    (step,) = tool_steps(db)
    assert (step["action"], step["tool"]) == ("write", "mcp__foo__bar")
    assert "write_classification" not in session(db)["meters"]
    with sqlite3.connect(db) as conn:
        (cls,) = compute_from(conn).classes
    kinds = cls["reason_kinds"].split(",")
    assert UNCLASSIFIED_TOOL in kinds and MISSING_METER in kinds
    text = next(r for r in json.loads(cls["reasons"]) if r.startswith("unclassified tools"))
    assert "'mcp__foo__bar' x1 in 1 session" in text
    assert '"mcp__foo__bar" = "write"' in text  # the line to paste
    (stored,) = rows(db, "select reason_kinds, reasons from task_classes")  # as ingest wrote it
    assert (stored["reason_kinds"], stored["reasons"]) == (cls["reason_kinds"], cls["reasons"])


def test_tool_input_is_never_stored(ingest_logs) -> None:
    secret = "/srv/customers/acme-payroll.csv"
    lines = [assistant("m1", tool_use("t1", command=f"cat {secret} | grep 4111"),
                       tool_use("t2", command=f"rm {secret}"))]
    db = ingest_logs(lines, dialect="claude-code")
    stored = json.dumps(dump(db))
    assert "acme-payroll" not in stored and "4111" not in stored
    assert [(r["action"], r["detail"]) for r in tool_steps(db)] == [("read", "cat"),
                                                                   ("write", "rm")]


# --- the 39 public logs beside the repository --------------------------------------------------


@pytest.mark.skipif(not MORE.is_dir(), reason=f"{MORE} is not there (shared/ beside the repo)")
def test_no_built_in_tool_of_the_public_logs_is_unclassified(tmp_path: Path) -> None:
    db = run(tmp_path, [MORE])
    found = rows(db, "select s.dialect, i.key, count(*) as calls from incidents i "
                 "join sessions s using (session_id) where i.kind = 'unclassified_tool' "
                 "group by s.dialect, i.key order by s.dialect, i.key")
    agents = [r for r in found if r["dialect"] in ("claude-code", "codex")]
    # What is left unclassified in the agents' logs is MCP tools of the users' own servers
    # (and names the samples' publisher redacted): no built-in tool of Claude Code or Codex.
    built_in = [r["key"] for r in agents
                if not r["key"].startswith(("mcp__", "[REDACTED_NAME"))]
    assert built_in == []
    assert [r["key"] for r in agents if r["key"].startswith("mcp__")] == [
        "mcp__associates-tools__List_Budgets", "mcp__cloud-associates__execute_workflow",
        "mcp__cloud-associates__search_workflows", "mcp__n8n-mcp__n8n_health_check"]
    # MCP tools the default map classes (by their servers' documented tool names).
    classed = rows(db, "select distinct tool, action from steps where tool like 'mcp\\_\\_%' "
                   "escape '\\' and action in ('read', 'write') order by tool")
    assert [(r["tool"], r["action"]) for r in classed] == [
        ("mcp__associates-tools__List_Budgets", "write"),
        ("mcp__cloud-associates__execute_workflow", "write"),
        ("mcp__cloud-associates__search_workflows", "write"),
        ("mcp__linear-server__create_issue", "write"),
        ("mcp__n8n-mcp__n8n_health_check", "write"),
        ("mcp__supabase_right_aim_ops__execute_sql", "write"),
        ("mcp__supabase_right_aim_ops__list_tables", "read")]
    # Every tool call of the agents' logs got a class (a Langfuse TOOL observation is a step
    # even when its generation lists no tool calls, so those are not compared).
    sql = ("select sum(tool_calls) as calls, sum((select count(*) from steps t where "
           "t.session_id = s.session_id and t.action in ('think', 'read', 'write', 'retry') "
           "and coalesce(t.tool, '') != 'api')) as steps from sessions s "
           "where s.dialect in ('claude-code', 'codex')")
    (both,) = rows(db, sql)
    assert both["steps"] == both["calls"] == 1677
