"""The verdict tables in the database: written by ingest, kept in step with the sessions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.analysis.verdicts import Settings
from ledger.core.budget import Budget
from ledger.db import connection, migrations, verdict_tables, writes
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import rows

EXPECTED_PARITY = {
    # session: (parity, unit, recorded_count, replay_count)
    "bf-0001": ("match", "rounds", 3, 3),
    "bf-0002": ("match", "rounds", 3, 3),
    "bf-0003": ("mismatch", "rounds", 2, 2),  # unmapped vendor string: fails closed
    "bf-0004": ("match", "rounds", 1, 1),  # cancelled; the replay runs to the cancel
    "bf-0005": ("no_recorded_stop", "steps", 5, 3),
    "bf-0006": ("no_recorded_stop", "rounds", 4, 4),
}

EXPECTED_VERDICTS = {
    "bugfix": ("stay_on_paid_path", "unknown_vendor,missing_meter,replay_mismatch"),
    "docs": ("stay_on_paid_path", "no_terminal_signal,too_few_sessions"),
    "refactor": ("stay_on_paid_path", "replay_mismatch"),
}


def verdicts(db_path: Path) -> dict[str, tuple[str, str]]:
    return {
        r["task_class"]: (r["verdict"], r["reason_kinds"])
        for r in rows(db_path, "select * from task_classes")
    }


def test_ingest_writes_parity_for_every_session(sample_db: Path) -> None:
    parity = {r["session_id"]: r for r in rows(sample_db, "select * from session_parity")}
    assert len(parity) == 15
    for session_id, expected in EXPECTED_PARITY.items():
        p = parity[session_id]
        assert (p["parity"], p["unit"], p["recorded_count"], p["replay_count"]) == expected
    traces = {p["recorded_stop"]: p for p in parity.values() if p["dialect"] == "trace"}
    assert {k: v["parity"] for k, v in traces.items()} == {
        "max_output_tokens": "match", "task_complete": "match", "no_progress": "match",
        "max_rounds": "mismatch"}
    assert traces["max_rounds"]["parity_detail"].startswith(
        "rounds: the log ends after 14, the replay stops after 12 (2 apart; tolerance 1)")
    assert {p["parity"] for p in parity.values() if p["dialect"] == "gate"} == {
        "no_recorded_stop"}


def test_ingest_judges_every_task_class_of_the_samples(sample_db: Path) -> None:
    assert verdicts(sample_db) == EXPECTED_VERDICTS
    bugfix = rows(sample_db, "select * from task_classes where task_class = 'bugfix'")[0]
    assert json.loads(bugfix["unknown_vendor_stops"]) == {"policy_hidden_v3": 1}
    assert (bugfix["sessions"], bugfix["checked_sessions"], bugfix["no_recorded_stop"]) == (
        6, 4, 2)


def test_the_readme_query_finds_the_classes_that_must_stay(sample_db: Path) -> None:
    found = rows(sample_db, "select task_class from task_classes "
                 "where verdict = 'stay_on_paid_path'")
    assert sorted(r["task_class"] for r in found) == ["bugfix", "docs", "refactor"]


def test_meter_gaps_name_the_missing_meter_per_cap_and_class(sample_db: Path) -> None:
    gaps = rows(sample_db, "select * from meter_gaps order by task_class, cap, rule")
    assert [(g["task_class"], g["cap"], g["meter"], g["sessions_missing"]) for g in gaps] == [
        ("bugfix", "max_output_tokens", "output_tokens", 1),
        ("bugfix", "max_rounds", "round_counter", 1),
        ("bugfix", "max_steps", "write_classification", 4),  # the retry rule
        ("bugfix", "max_tool_calls", "tool_calls", 1),
        ("bugfix", "max_writes", "write_classification", 4),
    ]
    assert gaps[-1]["missing_sessions"] == "bf-0001, bf-0003, bf-0004, bf-0006"
    honoured = rows(sample_db, "select count(*) as n from cap_coverage where honoured = 1")
    assert honoured[0]["n"] > 0  # cap_coverage also keeps the caps that are honoured


def test_one_notch_tighter_than_the_paid_loop_is_ready(samples: Path, db_path: Path) -> None:
    # The paid runtime stopped the long refactor at 14 rounds; a cap of 13 is within one round.
    ingest(db_path, [samples], Options(budget=Budget(max_rounds=13)))
    assert verdicts(db_path)["refactor"] == ("ready", "")


def well_instrumented(session_id: str, outcome: str = "task_complete") -> list[dict[str, Any]]:
    """A native session that carries every meter and ends on its own signal."""
    base = {"session": session_id, "task_class": "typing"}
    return [
        {**base, "ts": "2026-11-30T10:00:00Z", "type": "start"},
        {**base, "ts": "2026-11-30T10:00:04Z", "type": "action", "action": "read",
         "tool": "grep", "detail": "tool:grep def ", "observation": "12 functions",
         "tool_error": False},
        {**base, "ts": "2026-11-30T10:00:09Z", "type": "round",
         "tool_calls": [{"name": "apply_patch"}], "output_tokens": 800,
         "observation": f"annotated {session_id}", "tool_error": False},
        {**base, "ts": "2026-11-30T10:00:10Z", "type": "action", "action": "write",
         "tool": "apply_patch", "detail": "src/app.py"},
        {**base, "ts": "2026-11-30T10:00:15Z", "type": "end", "outcome": outcome},
    ]


def test_a_well_instrumented_native_class_is_ready(
    db_path: Path, tmp_path: Path, write_jsonl: Callable[..., Path]
) -> None:
    ledger = write_jsonl(tmp_path / "runs" / "typing.jsonl", [
        *well_instrumented("ty-1"), *well_instrumented("ty-2"),
        *well_instrumented("ty-3", outcome="user_cancel"),
    ])
    ingest(db_path, [ledger])
    assert verdicts(db_path) == {"typing": ("ready", "")}
    typing = rows(db_path, "select * from task_classes")[0]
    assert json.loads(typing["meter_coverage"]) == {
        "round_counter": 3, "tool_calls": 3, "output_tokens": 3, "tool_errors": 3,
        "observations": 3, "elapsed_time": 3, "write_classification": 3}

    # One more session whose host forgot the usage field: the class must stay.
    more = well_instrumented("ty-4")
    del more[2]["output_tokens"]
    write_jsonl(ledger, more, mode="a")
    ingest(db_path, [ledger])
    assert verdicts(db_path) == {"typing": ("stay_on_paid_path", "missing_meter")}


def test_settings_chosen_by_the_verdicts_command_survive_a_later_ingest(
    sample_db: Path, samples: Path, write_jsonl: Callable[..., Path]
) -> None:
    db = connection.connect(sample_db)
    try:
        verdict_tables.refresh(db, Settings(tolerance=2, min_sessions=2))
    finally:
        db.conn.close()
    assert verdicts(sample_db)["refactor"] == ("ready", "")
    write_jsonl(samples / "bugfix" / "night-run.jsonl", [
        {"session": "bf-0099", "type": "end", "outcome": "user_cancel"}], mode="a")
    ingest(sample_db, [samples])
    assert verdicts(sample_db)["refactor"] == ("ready", "")
    assert {r["tolerance"] for r in rows(sample_db, "select tolerance from session_parity")} == {2}


def test_an_ingest_that_changes_nothing_does_not_recompute(
    sample_db: Path, samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    monkeypatch.setattr(verdict_tables, "refresh", lambda db, settings=None: calls.append(db))
    ingest(sample_db, [samples])
    assert calls == []


def test_a_database_never_judged_is_judged_at_the_next_ingest(
    sample_db: Path, samples: Path
) -> None:
    db = connection.connect(sample_db)
    with writes.immediate(db) as conn:
        for table in ("task_classes", "session_parity", "cap_coverage", "verdict_settings"):
            conn.execute(f"DELETE FROM {table}")
    db.conn.close()
    ingest(sample_db, [samples])  # every file unchanged
    assert verdicts(sample_db) == EXPECTED_VERDICTS


def test_sessions_that_leave_the_database_leave_the_verdicts(
    db_path: Path, tmp_path: Path, write_jsonl: Callable[..., Path]
) -> None:
    ledger = write_jsonl(tmp_path / "runs" / "typing.jsonl", well_instrumented("ty-1"))
    ingest(db_path, [ledger])
    assert [r["session_id"] for r in rows(db_path, "select * from session_parity")] == ["ty-1"]
    # The file is replaced by another run (its first line changes): ty-1 is gone.
    write_jsonl(ledger, well_instrumented("ty-9"))
    ingest(db_path, [ledger])
    assert [r["session_id"] for r in rows(db_path, "select * from session_parity")] == ["ty-9"]
    assert rows(db_path, "select sum(sessions) as n from parity_groups") == [{"n": 1}]
    assert_counts_are_the_stored_groups(db_path)


def test_compute_from_writes_nothing(sample_db: Path) -> None:
    db = connection.connect(sample_db)
    try:
        found = verdict_tables.compute_from(db.conn, Settings(tolerance=5))
        assert "refactor" not in found.staying
        stored = verdict_tables.stored_settings(db.conn)
    finally:
        db.conn.close()
    assert stored == Settings()
    assert verdicts(sample_db)["refactor"][0] == "stay_on_paid_path"


def _verdict_tables(db_path) -> dict:
    from tests.helpers import rows

    return {
        table: rows(db_path, f"select * from {table} order by 1, 2")
        for table in ("session_parity", "cap_coverage", "task_classes")
    }


def test_an_ingest_that_adds_to_one_class_recomputes_it_as_a_full_refresh_would(
    sample_db, samples, write_jsonl
) -> None:
    import sqlite_utils

    from ledger.db.verdict_tables import refresh
    from ledger.ingest.ingester import ingest

    ledger = samples / "bugfix" / "night-run.jsonl"
    write_jsonl(ledger, [
        {"session": "bf-0009", "type": "start", "task_class": "bugfix"},
        {"session": "bf-0009", "type": "round", "tool_calls": 1, "output_tokens": 5,
         "observation": "ok", "tool_error": False, "vendor_stop": "odd_new_stop"},
        {"session": "bf-0009", "type": "end", "outcome": "task_complete"},
    ], "a")
    ingest(sample_db, [samples])
    partial = _verdict_tables(sample_db)
    assert "odd_new_stop" in next(
        c["reasons"] for c in partial["task_classes"] if c["task_class"] == "bugfix")
    db = sqlite_utils.Database(sample_db)
    refresh(db)
    db.conn.close()
    assert _verdict_tables(sample_db) == partial


# Events an ingest may append: to sessions already judged (bf-0001 and bf-0002 live in
# night-run.jsonl) or to new ones, in a class already judged or a new one.
SESSION_IDS = st.sampled_from(["bf-0001", "bf-0002", "new-1", "new-2", "new-3"])
CLASSES = st.sampled_from(["bugfix", "docs", "brand-new"])
APPENDED_EVENT = st.one_of(
    st.fixed_dictionaries({"type": st.just("round"), "tool_calls": st.integers(0, 4),
                           "output_tokens": st.integers(0, 9000),
                           "observation": st.sampled_from(["same", "other", "1 failed"]),
                           "tool_error": st.booleans()}),
    st.fixed_dictionaries({"type": st.just("round"),
                           "vendor_stop": st.sampled_from(["end_turn", "odd_new_stop"])}),
    st.fixed_dictionaries({"type": st.just("action"),
                           "action": st.sampled_from(["read", "write", "retry"])}),
    st.fixed_dictionaries({"type": st.just("end"),
                           "outcome": st.sampled_from(["task_complete", "user_cancel"])}),
)
APPENDS = st.lists(
    st.lists(st.tuples(SESSION_IDS, CLASSES, APPENDED_EVENT), min_size=1, max_size=8),
    min_size=1, max_size=3,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(appends=APPENDS)
def test_after_any_ingest_the_verdicts_equal_a_full_recomputation(
    tmp_path_factory: pytest.TempPathFactory, appends: list[list[tuple[str, str, dict]]]
) -> None:
    """The incremental refresh (parity of the touched sessions, their classes judged again
    from stored parity) leaves exactly what recomputing everything would."""
    import shutil

    import sqlite_utils

    from tests.helpers import SAMPLES

    root = tmp_path_factory.mktemp("incremental")
    samples = shutil.copytree(SAMPLES, root / "sample_ledgers")
    db_path = root / "ledger.db"
    ingest(db_path, [samples])
    for n, batch in enumerate(appends):
        for session_id, task_class, event in batch:
            folder = "bugfix" if session_id.startswith("bf-") else task_class
            path = samples / folder / ("night-run.jsonl" if folder == "bugfix" else "more.jsonl")
            path.parent.mkdir(exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                record = {"session": session_id, "task_class": task_class, **event}
                f.write(json.dumps(record) + "\n")
        ingest(db_path, [samples])
        incremental = _verdict_tables(db_path)
        full = root / f"full-{n}.db"
        shutil.copyfile(db_path, full)
        db = sqlite_utils.Database(full)
        verdict_tables.refresh(db)
        db.conn.close()
        assert _verdict_tables(full) == incremental
        assert _computed_tables(db_path) == incremental
        assert_counts_are_the_stored_groups(db_path)


def _computed_tables(db_path: Path) -> dict[str, list[dict[str, Any]]]:
    """What the pure compute() makes of the stored sessions, as _verdict_tables reads them:
    the store groups a class's sessions in SQL, compute() in Python, to the same rows."""
    db = connection.connect(db_path)
    try:
        found = verdict_tables.compute_from(db.conn)
    finally:
        db.conn.close()
    tables = {"session_parity": found.parity, "cap_coverage": found.coverage,
              "task_classes": found.classes}
    return {
        table: sorted(({k: r[k] for k in _verdict_tables_columns(db_path, table)} for r in rs),
                      key=lambda r: tuple(map(str, list(r.values())[:2])))
        for table, rs in tables.items()
    }


def _verdict_tables_columns(db_path: Path, table: str) -> list[str]:
    return [r["name"] for r in rows(db_path, f"pragma table_info({table})")]


def test_a_class_is_read_from_its_group_counts_and_one_index_range(sample_db: Path) -> None:
    """The reads after every ingest that touches a class: its groups from their counts, each
    group's first ids from one index (covering: no table row, no join); no scan, no sort."""
    for sql, index in ((verdict_tables.GROUPS_SQL, "INDEX idx_parity_groups_task_class"),
                       (verdict_tables.LISTED_SQL, "COVERING INDEX idx_session_parity_groups")):
        plan = [row["detail"] for row in rows(
            sample_db, "explain query plan " + sql.replace("?", "'bugfix'"))]
        assert any(p.startswith("SEARCH") and f"USING {index} " in p for p in plan), plan
        assert not any(p.startswith("SCAN") for p in plan), plan
        assert not any("TEMP B-TREE" in p for p in plan), plan


def test_a_session_moving_between_groups_moves_its_count(sample_db: Path) -> None:
    """A session whose parity row changes group leaves one count and joins another; a group
    left without sessions is gone."""
    db = connection.connect(sample_db)
    conn = db.conn
    session = conn.execute("select session_id from session_parity limit 1").fetchone()[0]
    conn.execute("update sessions set task_class = 'moved-away' where session_id = ?",
                 (session,))
    verdict_tables.after_ingest(db, True, {session})
    db.conn.close()
    assert_counts_are_the_stored_groups(sample_db)
    assert rows(sample_db, "select sessions from parity_groups "
                           "where task_class = 'moved-away'") == [{"sessions": 1}]


def assert_counts_are_the_stored_groups(db_path: Path) -> None:
    """``parity_groups`` holds what grouping the stored parity would give, no more, no less."""
    group = ", ".join(migrations.PARITY_GROUP_INDEX[:-1])
    counted = rows(db_path, f"select {group}, sessions from parity_groups order by {group}")
    grouped = rows(db_path, f"select {group}, count(*) as sessions from session_parity "
                            f"group by {group} order by {group}")
    assert counted == grouped
    assert counted  # the samples are judged


# What an ingest that forgot sessions (to read their files again) may leave changed, before
# the verdicts are brought up to date with no list of the sessions it wrote.
SESSION_EDITS = st.lists(st.one_of(
    st.tuples(st.just("update sessions set stop_reason = ? where session_id = ?"),
              st.sampled_from(["max_rounds", "task_complete"])),
    st.tuples(st.just("update sessions set task_class = ? where session_id = ?"),
              st.sampled_from(["bugfix", "docs", "elsewhere"])),
    st.tuples(st.just("update sessions set recorded_stop = ? where session_id = ?"),
              st.sampled_from(["task_complete", "user_cancel"])),
    st.tuples(st.just("delete from sessions where session_id = ? and ? is not null"),
              st.just("gone")),
    st.tuples(st.just("update incidents set key = ? where session_id = ?"),
              st.sampled_from(["odd_other_stop"])),
), max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=SESSION_EDITS, data=st.data())
def test_after_an_ingest_that_forgot_sessions_the_verdicts_equal_a_full_recomputation(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[str, Any]], data: st.DataObject
) -> None:
    """With no list of the sessions written, the parity of every session is checked and every
    class judged, and only rows that differ are written: what a full recomputation leaves."""
    import shutil

    import sqlite_utils

    from tests.helpers import SAMPLES

    root = tmp_path_factory.mktemp("forgot")
    samples = shutil.copytree(SAMPLES, root / "sample_ledgers")
    db_path = root / "ledger.db"
    ingest(db_path, [samples])
    db = connection.connect(db_path)
    ids = [i for (i,) in db.conn.execute("select session_id from sessions order by 1")]
    for sql, value in edits:
        session = data.draw(st.sampled_from(ids))
        args = (session, value) if sql.startswith("delete") else (value, session)
        db.conn.execute(sql, args)
    db.conn.commit()
    verdict_tables.after_ingest(db, True, None)
    db.conn.close()
    kept = _verdict_tables(db_path)
    full = root / "full.db"
    shutil.copyfile(db_path, full)
    fresh = sqlite_utils.Database(full)
    verdict_tables.refresh(fresh)
    fresh.conn.close()
    assert _verdict_tables(full) == kept
    assert_counts_are_the_stored_groups(db_path)


@pytest.mark.parametrize(("row", "stored", "same"), [
    ({"a": 1, "b": "x"}, {"a": 1, "b": "x"}, True),
    ({"a": True}, {"a": 1}, True),  # a flag is stored as its integer
    ({"a": 1}, {"a": 1.0}, False),  # a REAL column: writing it again changes its type
    ({"a": 1}, {"a": 1, "b": None}, False),  # another column
    ({"a": "x"}, {"a": "[REDACTED:jwt]"}, False),  # a text redacted when stored: written
])
def test_a_row_is_left_only_when_writing_it_would_store_it_again(
    row: dict[str, Any], stored: dict[str, Any], same: bool
) -> None:
    assert verdict_tables.same_row(row, stored) is same


@pytest.mark.parametrize(("edit", "incidents", "judged"), [
    (None, False, False),  # nothing it is made of changed: not judged (the edited row stays)
    (None, True, True),  # an incident a verdict reads was written: judged
    ("update sessions set stop_reason = 'max_rounds' where session_id = ?", False, True),
    ("update sessions set task_class = 'moved-away' where session_id = ?", False, True),
])
def test_a_touched_class_is_judged_again_only_when_what_its_verdict_reads_changed(
    sample_db: Path, edit: str | None, incidents: bool, judged: bool
) -> None:
    """A class is judged from its sessions' stored parity and its incidents: after an ingest
    that changed neither for a class it touched, its rows are left as they are."""
    db = connection.connect(sample_db)
    conn = db.conn
    session, cls = conn.execute(
        "select session_id, task_class from session_parity order by 1 limit 1").fetchone()
    conn.execute("update task_classes set reasons = 'edited' where task_class = ?", (cls,))
    if edit is not None:
        conn.execute(edit, (session,))
    verdict_tables.after_ingest(db, True, {session}, incidents)
    (reasons,) = conn.execute(
        "select reasons from task_classes where task_class = ?", (cls,)).fetchone()
    db.conn.close()
    assert (reasons != "edited") is judged


def _claude_line(n: int, kind: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "sessionId": "s1", "uuid": f"u{n}", "cwd": "/work/shop",
            "timestamp": f"2026-02-10T21:00:{n:02d}.000Z", "message": message}


def _claude_turn(n: int, tool: str | None, stop: str | None = "tool_use") -> list[dict]:
    """An assistant response (calling ``tool``, if any) and the tool's result."""
    content = [{"type": "tool_use", "id": f"c{n}", "name": tool, "input": {"command": "ls"}}
               if tool else {"type": "text", "text": "done"}]
    response = _claude_line(n, "assistant", {
        "id": f"m{n}", "model": "claude-opus-4-6", "role": "assistant", "content": content,
        "stop_reason": stop, "usage": {"input_tokens": 3, "output_tokens": 5}})
    if tool is None:
        return [response]
    answer = _claude_line(n + 1, "user", {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"c{n}", "content": "ok"}]})
    return [response, answer]


@pytest.mark.parametrize(("grown", "kinds"), [
    (_claude_turn(10, "Bash"), set()),
    (_claude_turn(10, "MysteryTool"), {"unclassified_tool"}),
    (_claude_turn(10, None, stop="odd_vendor_stop"), {"unknown_vendor"}),
], ids=["a classified call", "an unclassified tool", "an unknown vendor stop"])
def test_a_grown_transcript_leaves_the_verdicts_a_full_recomputation_would(
    tmp_path: Path, grown: list[dict], kinds: set[str]
) -> None:
    """Grown by a call the verdicts read nothing new of, or by an incident they read: the
    tables an ingest leaves are those recomputing everything gives."""
    logs = tmp_path / "logs"
    logs.mkdir()
    path, db_path = logs / "s1.jsonl", tmp_path / "ledger.db"
    first = [_claude_line(0, "user", {"role": "user", "content": "fix the build"}),
             *_claude_turn(1, "Bash")]
    path.write_text("".join(json.dumps(line) + "\n" for line in first))
    options = Options(dialect="claude-code")
    ingest(db_path, [logs], options)
    before = {r["kind"] for r in rows(db_path, "select kind from incidents")}
    with path.open("a") as f:
        f.write("".join(json.dumps(line) + "\n" for line in grown))
    ingest(db_path, [logs], options)
    after = {r["kind"] for r in rows(db_path, "select kind from incidents")}
    assert (after - before) & verdict_tables.VERDICT_INCIDENTS == kinds
    assert _recomputed(db_path, tmp_path / "full.db") == _verdict_tables(db_path)


def _recomputed(db_path: Path, copy: Path) -> dict[str, list[dict[str, Any]]]:
    """The verdict tables a full recomputation leaves, on a copy of the database."""
    import shutil

    import sqlite_utils

    shutil.copyfile(db_path, copy)
    db = sqlite_utils.Database(copy)
    verdict_tables.refresh(db)
    db.conn.close()
    return _verdict_tables(copy)


@pytest.mark.parametrize(("first", "judged"), [(True, True), (False, False)])
def test_a_grown_session_s_class_is_judged_again_when_its_group_quotes_it(
    sample_db: Path, first: bool, judged: bool
) -> None:
    """bf-0004 runs to its end: grown by a round, its parity row's counts and detail change,
    not its group. A verdict quotes the detail of each group's first session (by id) alone,
    so its class is judged again if it is its group's first, and left if another is."""
    db = connection.connect(sample_db)
    conn = db.conn
    columns = [r[1] for r in conn.execute("pragma table_info(session_parity)")]
    if not first:  # another session in its group, before it by id
        copied = ", ".join("'bf-0000'" if c == "session_id" else c for c in columns)
        conn.execute(f"insert into session_parity ({', '.join(columns)}) "
                     f"select {copied} from session_parity where session_id = 'bf-0004'")
    detail = "select parity_detail from session_parity where session_id = 'bf-0004'"
    (before,) = conn.execute(detail).fetchone()
    conn.execute("update task_classes set reasons = 'edited' where task_class = 'bugfix'")
    conn.execute("update sessions set rounds = rounds + 1, steps = steps + 1 "
                 "where session_id = 'bf-0004'")
    verdict_tables.after_ingest(db, True, {"bf-0004"}, incidents=False)
    (after,) = conn.execute(detail).fetchone()
    (reasons,) = conn.execute(
        "select reasons from task_classes where task_class = 'bugfix'").fetchone()
    db.conn.close()
    assert after != before
    assert (reasons != "edited") is judged
