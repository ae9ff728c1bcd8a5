"""Ingest: files into the database, exactly once, whatever happens to the files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.budget import Budget
from ledger.core.reasons import StopReason
from ledger.ingest.files import LedgerPathError
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import SAMPLES, dump, rows, scratch_dir

EXPECTED_SAMPLE_STOPS = {
    # session: (task_class, dialect, stop_reason, stop_at, recorded_stop)
    "bf-0001": ("bugfix", "native", "tool_error_budget", 4, "tool_error_budget"),
    "bf-0002": ("bugfix", "native", "task_complete", None, "task_complete"),
    "bf-0003": ("bugfix", "native", "unknown_vendor", 3, "unknown_vendor"),
    "bf-0004": ("bugfix", "native", "task_complete", None, "user_cancel"),
    "bf-0005": ("bugfix", "native", "no_progress", 4, None),
    "bf-0006": ("bugfix", "native", "max_tool_calls", 5, None),
}


def by_id(db_path: Path) -> dict[str, dict]:
    return {r["session_id"]: r for r in rows(db_path, "select * from sessions")}


def test_sample_ledgers_native_sessions(sample_db: Path) -> None:
    sessions = by_id(sample_db)
    for session_id, expected in EXPECTED_SAMPLE_STOPS.items():
        s = sessions[session_id]
        got = (s["task_class"], s["dialect"], s["stop_reason"], s["stop_at"], s["recorded_stop"])
        assert got == expected, session_id


def test_sample_ledgers_gate_runs_are_split_on_step_one(sample_db: Path) -> None:
    gate = sorted(
        (s for s in by_id(sample_db).values() if s["dialect"] == "gate"),
        key=lambda s: s["session_id"],
    )
    assert [(s["stop_reason"], s["stop_at"], s["steps"]) for s in gate] == [
        ("task_complete", None, 4),
        ("max_writes", 4, 4),
        ("max_steps", 9, 9),
        ("retry_near_ceiling", 7, 7),
        ("max_seconds", 3, 3),
    ]
    assert {s["task_class"] for s in gate} == {"docs"}
    assert all(s["session_id"].endswith(f"-{n}") for n, s in enumerate(gate, 1))


def test_sample_ledgers_traces(sample_db: Path) -> None:
    traces = {s["task"]: s for s in by_id(sample_db).values() if s["dialect"] == "trace"}
    seed = traces["rename getUser to fetchUser across api and tests"]
    assert (seed["stop_reason"], seed["stop_at"], seed["recorded_stop"]) == (
        "no_progress", 3, "no_progress")
    assert (seed["rounds"], seed["tool_calls"], seed["output_tokens"]) == (3, 4, 1500)
    stops = sorted((s["stop_reason"], s["recorded_stop"]) for s in traces.values())
    assert stops == [
        ("max_output_tokens", "max_output_tokens"),
        ("max_rounds", "max_rounds"),
        ("no_progress", "no_progress"),
        ("task_complete", "task_complete"),
    ]


def test_sample_ledgers_cover_every_stop_reason(sample_db: Path) -> None:
    seen = {r["reason"] for r in rows(
        sample_db,
        "select stop_reason as reason from sessions union select recorded_stop from sessions",
    )}
    # max_cost's sample session (a round priced by its tokens, a vendor money stop) comes with
    # the cost columns and dashboard views of issue 19 (items 2, 4, 5): it changes the samples'
    # counts that the dashboard tests pin.
    assert {r.value for r in StopReason} - {"max_cost"} <= seen


def test_sample_ledgers_incidents(sample_db: Path) -> None:
    incidents = rows(sample_db, "select * from incidents order by kind, session_id")
    kinds = [(i["kind"], i["session_id"], i["length"]) for i in incidents]
    assert ("retry_storm", "bf-0005", 3) in kinds
    assert ("unknown_vendor", "bf-0003", 1) in kinds
    storm = next(i for i in incidents if i["kind"] == "retry_storm" and i["blocked"])
    assert (storm["key"], storm["length"]) == ("tool:read", 5)
    seed = next(
        i for i in incidents if i["kind"] == "no_progress" and i["task_class"] == "refactor"
    )
    assert (seed["length"], seed["output_tokens"], seed["tool_calls"]) == (2, 200, 1)
    assert seed["detail"] == "patched api.py; tests still import getUser"


def test_the_stopping_step_is_marked_and_later_steps_kept(sample_db: Path) -> None:
    steps = rows(sample_db, "select * from steps where session_id = 'bf-0005' order by idx")
    assert [s["stop_reason"] for s in steps] == [None, None, None, "no_progress", None, None]
    assert [s["after_stop"] for s in steps] == [0, 0, 0, 0, 1, 1]
    assert [s["consecutive_errors"] for s in steps] == [0, 0, 1, 2, 3, 4]
    assert steps[-1]["source_line"] == 24


def test_malformed_line_is_kept_with_file_line_and_reason(sample_db: Path) -> None:
    (error,) = rows(sample_db, "select * from ingest_errors")
    assert error["path"].endswith("bugfix/night-run.jsonl")
    assert error["line"] == 13
    assert error["reason"].startswith("invalid JSON: Unterminated string")
    assert error["raw"].startswith('{"ts": "2026-11-29T22:01:10.000Z", "session": "bf-0003"')
    # The good lines on both sides of it were ingested.
    lines = {r["source_line"] for r in rows(
        sample_db, "select source_line from steps where source_id = ?", [error["source_id"]])}
    assert {12, 14} <= lines


def test_stop_reasons_table_holds_the_decision_table(sample_db: Path) -> None:
    table = {r["reason"]: r for r in rows(sample_db, "select * from stop_reasons")}
    assert set(table) == {r.value for r in StopReason}
    assert table["unknown_vendor"]["safe_action"] == "Keep paid path; do not guess"
    assert table["no_progress"]["fail_closed_if_missing"] == (
        "You only log model text, not observations")
    assert table["max_steps"]["seed"] == "002"


def test_the_budget_is_stored_with_each_session(samples: Path, db_path: Path) -> None:
    ingest(db_path, [samples], Options(budget=Budget(max_rounds=20)))
    budgets = {r["budget"] for r in rows(db_path, "select budget from sessions")}
    assert len(budgets) == 1
    assert json.loads(budgets.pop())["max_rounds"] == 20


def test_reingest_changes_nothing(sample_db: Path, samples: Path) -> None:
    before = dump(sample_db)
    summary = ingest(sample_db, [samples, samples / "seed-trace.json"])
    assert (summary.steps, summary.errors, summary.unchanged_files) == (0, 0, 6)
    assert dump(sample_db) == before


def test_another_budget_refolds_every_file(sample_db: Path, samples: Path) -> None:
    summary = ingest(sample_db, [samples], Options(budget=Budget(max_rounds=3)))
    assert summary.new_files == 6
    assert any("budget or vendor map changed" in n for n in summary.notices)
    sessions = by_id(sample_db)
    assert len(sessions) == 15
    seed = next(s for s in sessions.values() if s["task"] and "getUser" in s["task"])
    assert (seed["stop_reason"], seed["stop_at"]) == ("max_rounds", 3)
    assert rows(sample_db, "select count(*) as n from ingest_errors")[0]["n"] == 1


def test_appended_lines_continue_a_session(samples: Path, db_path: Path, write_jsonl) -> None:
    ledger = samples / "bugfix" / "night-run.jsonl"
    ingest(db_path, [ledger])
    write_jsonl(ledger, [{"session": "bf-0002", "type": "action", "action": "write"}] * 2, "a")
    summary = ingest(db_path, [ledger])
    assert (summary.updated_files, summary.lines, summary.steps) == (1, 2, 2)
    bf2 = by_id(db_path)["bf-0002"]
    assert (bf2["writes"], bf2["stop_reason"], bf2["stop_at"]) == (3, "max_writes", 8)


def test_incremental_equals_one_shot(samples: Path, tmp_path: Path) -> None:
    ledger = samples / "bugfix" / "night-run.jsonl"
    data = ledger.read_bytes()
    whole = tmp_path / "whole.db"
    ingest(whole, [ledger])
    growing = tmp_path / "growing" / "bugfix" / "night-run.jsonl"
    growing.parent.mkdir(parents=True)
    growing.write_bytes(b"")
    pieces = tmp_path / "pieces.db"
    for cut in (1, 50, 700, 701, 2300, 4000, len(data)):
        growing.write_bytes(data[:cut])
        ingest(pieces, [growing])
    a, b = dump(whole), dump(pieces)
    for table in a:
        for row in a[table] + b[table]:
            row.pop("path", None)
            row.pop("source_path", None)
            if "state" in row:
                row["state"] = json.loads(row["state"])
                row["state"].pop("source_path")
    assert a == b


def _line(value: object) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


#: Native lines that exercise what must carry across a cut: interleaved sessions, repeated
#: observations and retries (open incidents), stops and events after them, vendor stops,
#: redactions, timestamps, and lines put aside, blank lines and CRLF endings.
NATIVE_LINES = [_line(v) for v in [
    {"session": "a", "type": "start", "task_class": "fix", "ts": "2027-01-01T00:00:00Z"},
    {"session": "b", "type": "start", "detail": "token=9f8e7d6c5b4aZZ3f2e"},
    {"session": "a", "type": "round", "tool_calls": 2, "output_tokens": 300,
     "observation": "1 failed", "tool_error": True, "ts": "2027-01-01T00:00:09Z"},
    {"session": "b", "type": "round", "tool_calls": [{"name": "x"}], "observation": "same"},
    {"session": "a", "type": "action", "action": "retry", "tool": "run_tests"},
    {"session": "b", "type": "action", "action": "write", "detail": "src/a.py"},
    {"session": "c", "type": "round", "vendor_stop": "mystery_stop", "output_tokens": 5},
    {"session": "a", "type": "end", "outcome": "user_cancel"},
    {"session": "b", "type": "action", "action": "unknown-verb"},
    [1, 2, 3],
]] + [b'{"session": "a", "type": "round", "output_tok', b"", b"   ", b"\r"]

GATE_LINES = [_line(v) for v in [
    {"step": 1, "action": "think", "detail": "plan", "writes": 0, "elapsed_s": 0.0},
    {"step": 2, "action": "read", "detail": "tool:read", "writes": 0, "elapsed_s": 1.5},
    {"step": 3, "action": "write", "detail": "tool:write", "writes": 1, "elapsed_s": 20.0},
    {"step": 4, "action": "retry", "detail": "tool:read", "writes": 1, "elapsed_s": 30.5},
    {"step": "three", "action": "read"},
]] + [b""]


def assert_incremental_equals_one_shot(data: bytes, cuts: list[int], name: str) -> None:
    """Ingest ``data`` whole, then the same file grown by appends cut at ``cuts`` and
    ingested after each append: both databases must hold the same rows."""
    with scratch_dir() as tmp:
        ledger = Path(tmp) / "runs" / name
        ledger.parent.mkdir()
        ledger.write_bytes(data)
        ingest(Path(tmp) / "whole.db", [ledger])
        ledger.write_bytes(b"")
        done = 0
        for cut in [*sorted(set(cuts)), len(data)]:
            with ledger.open("ab") as f:
                f.write(data[done:cut])
            done = cut
            ingest(Path(tmp) / "pieces.db", [ledger])
        assert dump(Path(tmp) / "pieces.db") == dump(Path(tmp) / "whole.db")


@st.composite
def ledger_and_cuts(draw: st.DrawFn, vocabulary: list[bytes]) -> tuple[bytes, list[int]]:
    lines = draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=40))
    bom = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
    data = bom + b"\n".join(lines) + b"\n"
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=6))
    return data, cuts


@settings(max_examples=60, deadline=None)
@given(ledger_and_cuts(NATIVE_LINES))
def test_native_ledger_cut_anywhere_ingests_as_one_shot(case: tuple[bytes, list[int]]) -> None:
    assert_incremental_equals_one_shot(*case, "native.jsonl")


@settings(max_examples=40, deadline=None)
@given(ledger_and_cuts(GATE_LINES))
def test_gate_ledger_cut_anywhere_ingests_as_one_shot(case: tuple[bytes, list[int]]) -> None:
    assert_incremental_equals_one_shot(*case, "gate.jsonl")


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_trace_written_in_pieces_waits_for_the_whole_document(data: st.DataObject) -> None:
    """A trace is one document: read once complete, never put aside half-written."""
    doc = (SAMPLES / "refactor" / "port-orm-queries.json").read_bytes()
    complete = len(doc.rstrip())  # the document is whole from here on
    cuts = sorted(data.draw(st.lists(st.integers(1, complete - 1), max_size=8)))
    with scratch_dir() as tmp:
        ledger = Path(tmp) / "refactor" / "trace.json"
        ledger.parent.mkdir()
        for cut in cuts:
            ledger.write_bytes(doc[:cut])
            summary = ingest(Path(tmp) / "pieces.db", [ledger])
            assert (summary.errors, summary.steps, summary.notices) == (0, 0, [])
            assert [w["path"] for w in summary.waiting] == [str(ledger)]
        ledger.write_bytes(doc)
        ingest(Path(tmp) / "pieces.db", [ledger])
        ingest(Path(tmp) / "whole.db", [ledger])
        assert dump(Path(tmp) / "pieces.db") == dump(Path(tmp) / "whole.db")


def test_partial_last_line_is_not_consumed(tmp_path: Path, db_path: Path) -> None:
    ledger = tmp_path / "runs" / "l.jsonl"
    ledger.parent.mkdir()
    line = json.dumps({"session": "s", "type": "round", "output_tokens": 5})
    ledger.write_text(line + "\n" + line[:20])
    summary = ingest(db_path, [ledger])
    assert (summary.steps, summary.errors) == (1, 0)
    assert rows(db_path, "select offset from sources")[0]["offset"] == len(line) + 1
    ledger.write_text(line + "\n" + line + "\n")
    summary = ingest(db_path, [ledger])
    assert (summary.steps, summary.errors) == (1, 0)
    assert by_id(db_path)["s"]["output_tokens"] == 10


def test_a_file_grown_by_an_unfinished_line_alone_waits(tmp_path: Path, db_path: Path) -> None:
    """Nothing new to read, but the file is longer than what was read: it waits (the size the
    last read saw is not the file's now)."""
    ledger = tmp_path / "l.jsonl"
    line = json.dumps({"session": "s", "type": "round", "output_tokens": 5}) + "\n"
    ledger.write_text(line)
    assert ingest(db_path, [ledger]).waiting == []
    ledger.write_text(line + line[:20])
    summary = ingest(db_path, [ledger])
    assert summary.waiting == [{"path": str(ledger), "offset": len(line), "bytes": 20}]


def test_a_file_read_to_its_end_is_not_looked_at_again(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.ingest import ingester

    def unread(*_args: object) -> int:
        raise AssertionError("looked at again")

    monkeypatch.setattr(ingester, "unread", unread)
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(json.dumps({"session": "s", "type": "round", "output_tokens": 5}) + "\n")
    summary = ingest(db_path, [ledger])
    assert (summary.steps, summary.waiting) == (1, [])


def test_a_file_with_no_complete_line_waits(tmp_path: Path, db_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    ledger.write_text('{"session": "s", "type": "ro')
    summary = ingest(db_path, [ledger])
    assert summary.waiting == [{"path": str(ledger), "offset": 0, "bytes": 28}]
    assert rows(db_path, "select count(*) as n from sources")[0]["n"] == 0


def test_truncated_file_is_read_again(samples: Path, db_path: Path) -> None:
    ledger = samples / "docs" / "agent_ledger.jsonl"
    ingest(db_path, [ledger])
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text("".join(lines[:4]))
    summary = ingest(db_path, [ledger])
    assert any("truncated" in n for n in summary.notices)
    sessions = by_id(db_path)
    assert len(sessions) == 1
    assert rows(db_path, "select count(*) as n from steps")[0]["n"] == 4


def test_rewritten_file_is_read_again(samples: Path, db_path: Path) -> None:
    """Same first line, same length or longer, but the last lines read have changed."""
    ledger = samples / "docs" / "agent_ledger.jsonl"
    ingest(db_path, [ledger])
    text = ledger.read_text()
    ledger.write_text(text.replace('"tool:mkdocs build"', '"tool:mkdocs serve"') + text)
    summary = ingest(db_path, [ledger])
    assert any("rewritten" in n for n in summary.notices)
    assert len(by_id(db_path)) == 10
    details = {r["detail"] for r in rows(db_path, "select detail from steps")}
    assert "tool:mkdocs serve" in details


def test_replaced_file_is_read_again(samples: Path, db_path: Path, write_jsonl) -> None:
    ledger = samples / "docs" / "agent_ledger.jsonl"
    ingest(db_path, [ledger])
    write_jsonl(ledger, [{"step": 1, "action": "think", "detail": "new file", "elapsed_s": 0}])
    summary = ingest(db_path, [ledger])
    assert any("replaced" in n for n in summary.notices)
    assert [s["steps"] for s in by_id(db_path).values()] == [1]
    assert rows(db_path, "select count(*) as n from steps")[0]["n"] == 1  # the old ones gone


def test_moved_file_is_not_duplicated(samples: Path, db_path: Path, tmp_path: Path) -> None:
    ledger = samples / "bugfix" / "night-run.jsonl"
    ingest(db_path, [samples])
    before = dump(db_path)
    moved = tmp_path / "archive" / "bugfix" / "night-run-old.jsonl"
    moved.parent.mkdir(parents=True)
    shutil.move(ledger, moved)
    summary = ingest(db_path, [samples, moved])
    assert summary.steps == 0
    assert any("moved from" in n for n in summary.notices)
    after = dump(db_path)
    assert len(after["steps"]) == len(before["steps"])
    paths = {r["path"] for r in rows(db_path, "select path from sources")}
    assert str(moved) in paths and str(ledger) not in paths


def test_the_same_native_session_in_two_files_is_refused(
    tmp_path: Path, db_path: Path, write_jsonl
) -> None:
    a = write_jsonl(tmp_path / "a.jsonl", [{"session": "s", "type": "round"}])
    b = write_jsonl(tmp_path / "b.jsonl", [{"session": "t", "type": "round"},
                                           {"session": "s", "type": "round"}])
    summary = ingest(db_path, [a, b])
    assert (summary.steps, summary.errors) == (2, 1)
    (error,) = rows(db_path, "select * from ingest_errors")
    assert "session 's' already belongs to another ledger file" in error["reason"]
    assert error["line"] == 2


def test_unknown_dialect_is_one_error(tmp_path: Path, db_path: Path) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n{"hello": "again"}\n')
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(b"\x00\x01\x02\n\xff\xfe\n")
    summary = ingest(db_path, [odd, binary])
    assert summary.errors == 2
    reasons = sorted(r["reason"] for r in rows(db_path, "select reason from ingest_errors"))
    assert reasons[0] == "binary file"
    assert reasons[1].startswith("cannot tell the dialect")
    assert ingest(db_path, [odd, binary]).errors == 0


def test_missing_path_is_a_clear_error(tmp_path: Path, db_path: Path) -> None:
    with pytest.raises(LedgerPathError, match="no such file or folder"):
        ingest(db_path, [tmp_path / "nope"])


def test_task_class_comes_from_event_then_option_then_folder(
    tmp_path: Path, db_path: Path, write_jsonl
) -> None:
    ledger = write_jsonl(tmp_path / "nightly" / "l.jsonl", [
        {"session": "a", "type": "round", "task_class": "from-event"},
        {"session": "b", "type": "round"},
    ])
    ingest(db_path, [ledger])
    assert {k: v["task_class"] for k, v in by_id(db_path).items()} == {
        "a": "from-event", "b": "nightly"}
    ingest(db_path, [ledger], Options(task_class="from-option", budget=Budget(max_rounds=5)))
    assert {k: v["task_class"] for k, v in by_id(db_path).items()} == {
        "a": "from-event", "b": "from-option"}


def test_sessions_record_the_meters_their_log_carries(sample_db: Path) -> None:
    meters = {s["dialect"]: set(s["meters"].split(",")) for s in by_id(sample_db).values()}
    assert meters["trace"] == {
        "round_counter", "tool_calls", "output_tokens", "tool_errors", "observations"}
    assert meters["gate"] == {"write_classification", "elapsed_time"}
    assert by_id(sample_db)["bf-0002"]["meters"] == (
        "round_counter,tool_calls,output_tokens,tool_errors,observations,elapsed_time,"
        "write_classification")


def test_the_same_file_given_twice_or_through_links_is_read_once(
    samples: Path, db_path: Path, tmp_path: Path
) -> None:
    ledger = samples / "bugfix" / "night-run.jsonl"
    (tmp_path / "symlink.jsonl").symlink_to(ledger)
    os.link(ledger, tmp_path / "hardlink.jsonl")
    summary = ingest(db_path, [ledger, ledger, tmp_path / "symlink.jsonl",
                               tmp_path / "hardlink.jsonl", samples / "bugfix"])
    assert (summary.files, summary.new_files) == (1, 1)
    once = tmp_path / "once.db"
    ingest(once, [ledger])
    assert dump(db_path) == dump(once)


def test_moved_files_that_share_a_first_line_keep_their_own_rows(
    tmp_path: Path, db_path: Path, write_jsonl
) -> None:
    """Gate ledgers often start alike: each moved file is matched to the source whose bytes
    it holds, and nothing is read again."""
    first = {"step": 1, "action": "think", "detail": "plan", "writes": 0, "elapsed_s": 0.0}
    a = write_jsonl(tmp_path / "a" / "gate.jsonl", [first, {"step": 2, "action": "read"}])
    b = write_jsonl(tmp_path / "b" / "gate.jsonl", [first, {"step": 2, "action": "write"},
                                                    {"step": 3, "action": "write"}])
    ingest(db_path, [a, b])
    before = {r["source_id"]: r["steps"] for r in rows(db_path, "select * from sessions")}
    shutil.move(b, tmp_path / "b-moved.jsonl")
    shutil.move(a, tmp_path / "a-moved.jsonl")
    summary = ingest(db_path, [tmp_path / "b-moved.jsonl", tmp_path / "a-moved.jsonl"])
    assert (summary.steps, summary.new_files) == (0, 0)
    assert len(summary.notices) == 2 and all("moved from" in n for n in summary.notices)
    after = {r["source_id"]: r["steps"] for r in rows(db_path, "select * from sessions")}
    assert after == before
    paths = {r["source_id"]: Path(r["path"]).name for r in rows(db_path, "select * from sources")}
    assert sorted(paths.values()) == ["a-moved.jsonl", "b-moved.jsonl"]


def test_a_grown_one_line_trace_is_read_again_not_continued(
    tmp_path: Path, db_path: Path
) -> None:
    trace = tmp_path / "refactor" / "t.json"
    trace.parent.mkdir()
    doc = {"task": "t", "rounds": [{"tool_calls": [], "output_tokens": 5, "observation": "x"}]}
    trace.write_text(json.dumps(doc) + "\n")
    ingest(db_path, [trace])
    trace.write_text(json.dumps(doc) + "\n\n")  # whitespace appended: the same document
    summary = ingest(db_path, [trace])
    assert any("a JSON document is read whole" in n for n in summary.notices)
    (session,) = rows(db_path, "select * from sessions")
    assert (session["rounds"], session["output_tokens"]) == (1, 5)


def test_an_unknown_file_that_grows_keeps_one_error(tmp_path: Path, db_path: Path) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": 1}\n')
    ingest(db_path, [odd])
    with odd.open("a") as f:
        f.write('{"hello": 2}\n')
    ingest(db_path, [odd])
    assert len(rows(db_path, "select * from ingest_errors")) == 1
    with odd.open("a") as f:  # and once a line tells its dialect, it is read as that
        f.write(json.dumps({"session": "s", "type": "round"}) + "\n")
    summary = ingest(db_path, [odd])
    assert any("now read as native" in n for n in summary.notices)
    assert summary.steps == 1
    assert [r["line"] for r in rows(db_path, "select * from ingest_errors order by line")] == [1, 2]


def small_files(folder: Path, write_jsonl, count: int = 5) -> list[Path]:
    """``count`` ledger files of three lines each, one session per file."""
    return [
        write_jsonl(folder / f"run-{n}.jsonl", [
            {"session": f"run-{n}", "type": "start"},
            {"session": f"run-{n}", "type": "round", "tool_calls": 1, "output_tokens": 9},
            {"session": f"run-{n}", "type": "end", "outcome": "task_complete"},
        ])
        for n in range(count)
    ]


@pytest.mark.parametrize(("batch", "commits"), [(1000, 1), (6, 3), (3, 5)])
def test_small_files_share_a_commit_up_to_the_batch_size(
    tmp_path: Path, db_path: Path, write_jsonl, monkeypatch: pytest.MonkeyPatch,
    batch: int, commits: int,
) -> None:
    from ledger.db import connection, verdict_tables

    small_files(tmp_path / "runs", write_jsonl)
    statements: list[str] = []
    connect = connection.connect

    def traced(path):  # type: ignore[no-untyped-def]
        db = connect(path)
        db.conn.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(connection, "connect", traced)
    monkeypatch.setattr(verdict_tables, "after_ingest", lambda *_a, **_k: None)
    summary = ingest(db_path, [tmp_path / "runs"], Options(batch=batch))
    assert summary.steps == 15
    assert statements.count("COMMIT") == commits  # 5 files x 3 lines, after the migrations
    assert len(rows(db_path, "select * from sessions")) == 5


def test_a_file_whose_name_is_not_utf8_is_skipped_with_a_notice(
    tmp_path: Path, db_path: Path, write_jsonl
) -> None:
    """SQLite cannot store such a path, and every row names its file: the file is left
    unread and said so, and the rest is ingested as if it were not there."""
    paths = small_files(tmp_path / "runs", write_jsonl, count=2)
    odd = Path(os.fsdecode(os.fsencode(tmp_path / "runs") + b"/run-\xff.jsonl"))
    shutil.copy(paths[0], odd)
    assert sorted(os.listdir(tmp_path / "runs"), key=str) == sorted(
        ["run-0.jsonl", "run-1.jsonl", odd.name], key=str)
    summary = ingest(db_path, [tmp_path / "runs"])
    assert summary.notices == [
        f"{tmp_path}/runs/run-\\xff.jsonl: the path is not valid UTF-8, which the database "
        "cannot store; skipped (rename the file to ingest it)"]
    assert (summary.files, summary.steps) == (2, 6)
    assert [r["path"] for r in rows(db_path, "select path from sources order by 1")] == [
        str(p) for p in paths]


def test_a_file_that_fails_takes_back_only_its_own_work(
    tmp_path: Path, db_path: Path, write_jsonl, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.ingest.source import SourceFold

    paths = small_files(tmp_path / "runs", write_jsonl)
    feed_lines = SourceFold.feed_lines

    def flaky(fold, lines, max_line):  # type: ignore[no-untyped-def]
        for line in lines:  # the lines before the first round are folded, then it fails
            if fold.path == str(paths[2]) and b'"round"' in line.raw:
                raise OSError(5, "Input/output error")
            feed_lines(fold, [line], max_line)

    monkeypatch.setattr(SourceFold, "feed_lines", flaky)
    summary = ingest(db_path, [tmp_path / "runs"])
    assert [n for n in summary.notices if "could not be read" in n] == [
        f"{paths[2]}: could not be read (Input/output error); skipped"]
    assert [r["session_id"] for r in rows(db_path, "select * from sessions order by 1")] == [
        "run-0", "run-1", "run-3", "run-4"]
    assert len(rows(db_path, "select * from steps")) == 12  # none of run-2's lines

    monkeypatch.setattr(SourceFold, "feed_lines", feed_lines)  # readable: read from the start
    ingest(db_path, [tmp_path / "runs"])
    assert len(rows(db_path, "select * from steps")) == 15


def test_a_file_is_the_same_source_however_its_path_is_written(
    samples: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(samples.parent)
    first = ingest(db_path, ["sample_ledgers"])
    stored = {r["path"] for r in rows(db_path, "select path from sources")}
    assert all(Path(p).is_absolute() for p in stored)
    for written in (str(samples), "./sample_ledgers/", "../" + samples.parent.name +
                    "/sample_ledgers"):
        again = ingest(db_path, [written])
        assert (again.new_files, again.updated_files, again.steps) == (0, 0, 0), written
    monkeypatch.chdir(samples)  # from another folder too
    assert ingest(db_path, ["bugfix"]).new_files == 0
    assert len(rows(db_path, "select * from steps")) == first.steps


def test_a_source_stored_with_a_relative_path_is_recognised_and_made_absolute(
    samples: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Databases made before paths were stored absolute keep working from the same folder."""
    monkeypatch.chdir(samples.parent)
    ingest(db_path, ["sample_ledgers"])
    import sqlite3

    with sqlite3.connect(db_path) as conn:  # as an older agent-ledger stored them
        for (path,) in conn.execute("select path from sources").fetchall():
            conn.execute("update sources set path = ? where path = ?",
                         (os.path.relpath(path), path))
    summary = ingest(db_path, ["sample_ledgers"])
    assert (summary.new_files, summary.steps, summary.notices) == (0, 0, [])
    assert all(Path(r["path"]).is_absolute() for r in rows(db_path, "select path from sources"))


def test_ingest_keeps_the_heaps_top_while_it_works_and_puts_the_default_back(
    samples: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """See bulk.padded_heap: set once for the ingest, glibc's default put back at its end."""
    from ledger.ingest import bulk

    pads: list[int] = []

    def mallopt(param: int, value: int) -> int:
        assert param == bulk.M_TOP_PAD
        pads.append(value)
        return 1

    monkeypatch.setattr(bulk, "_mallopt", lambda: mallopt)
    ingest(db_path, [samples])
    assert pads == [bulk.TOP_PAD, bulk.DEFAULT_TOP_PAD]


def test_ingest_restores_the_garbage_collectors_pace(
    samples: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ingest runs the collector's young pass rarely (see bulk.rare_young_collections), and
    puts the pace back afterwards, also when it fails."""
    import gc

    from ledger.ingest import ingester as ingest_module

    before = gc.get_threshold()
    seen: list[tuple[int, ...]] = []
    feed_lines = ingest_module.SourceFold.feed_lines

    def watching(fold, lines, max_line):  # type: ignore[no-untyped-def]
        seen.append(gc.get_threshold())
        feed_lines(fold, lines, max_line)

    monkeypatch.setattr(ingest_module.SourceFold, "feed_lines", watching)
    ingest(db_path, [samples])
    assert seen and all(t[0] == 100_000 for t in seen)
    assert gc.get_threshold() == before

    def failing(fold, lines, max_line):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(ingest_module.SourceFold, "feed_lines", failing)
    with (samples / "bugfix" / "night-run.jsonl").open("a") as f:
        f.write('{"session": "x", "type": "round"}\n')
    with pytest.raises(RuntimeError, match="boom"):
        ingest(db_path, [samples])
    assert gc.get_threshold() == before
