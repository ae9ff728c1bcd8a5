"""Rollups: whatever ingest does to a database, they equal a rebuild from scratch."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import sqlite_utils

from ledger.core.budget import Budget
from ledger.db import connection, rollup, writes
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import REAL_LOGS, rows


def stored(db_path: Path, measures: Sequence[str] = rollup.MEASURE_NAMES) -> list[tuple]:
    columns = ", ".join((*rollup.KEY_NAMES, *measures))
    order = ", ".join(rollup.KEY_NAMES)
    with sqlite3.connect(db_path) as conn:
        return conn.execute(f"select {columns} from session_rollup order by {order}").fetchall()


def rebuilt(db_path: Path) -> list[tuple]:
    with sqlite3.connect(db_path) as conn:
        return rollup.rebuilt(conn)


def assert_consistent(db_path: Path) -> None:
    assert stored(db_path) == rebuilt(db_path)


def bucket_counts(db_path: Path, where: str = "1") -> dict[tuple[str, int], int]:
    """Stopped sessions per (counter, bucket) over the rollup rows ``where`` picks."""
    columns = [(c.name, b) for c in rollup.COUNTERS for b in range(len(rollup.BUCKETS))]
    sums = ", ".join(f"sum({name}_{b})" for name, b in columns)
    with sqlite3.connect(db_path) as conn:
        found = conn.execute(f"select {sums} from session_rollup where {where}").fetchone()
    return {key: n for key, n in zip(columns, found, strict=True) if n}


def test_sample_rollup_counts_every_session(sample_db: Path) -> None:
    assert_consistent(sample_db)
    total = rows(sample_db, "select sum(sessions) as n, sum(steps) as steps from session_rollup")
    sessions = rows(sample_db, "select count(*) as n, sum(steps) as steps from sessions")
    assert total == sessions


def test_flags_follow_the_paid_path_rules(sample_db: Path) -> None:
    flagged = rows(
        sample_db,
        "select task_class, sum(sessions * unknown_vendor) as uv, sum(sessions * no_terminal) as nt"
        " from session_rollup group by task_class order by task_class",
    )
    assert flagged == [
        {"task_class": "bugfix", "uv": 1, "nt": 1},
        {"task_class": "docs", "uv": 0, "nt": 1},
        {"task_class": "refactor", "uv": 0, "nt": 0},
    ]


def test_sessions_without_timestamps_have_no_day(sample_db: Path) -> None:
    days = rows(sample_db, "select distinct day from session_rollup where task_class = 'docs'")
    assert days == [{"day": ""}]


@pytest.mark.parametrize(
    ("reason", "counter"),
    [
        ("max_tool_calls", "tool_calls"),  # bf-0006: tool calls 28 >= 24
        ("max_output_tokens", "output_tokens"),  # the seed trace: 37000 >= 32000
        ("max_writes", "writes"),  # writes 3 > 2
        ("max_seconds", "seconds"),  # 48.0 > 45.0
        ("max_rounds", "rounds"),
    ],
)
def test_a_tripped_cap_is_in_the_top_bucket(sample_db: Path, reason: str, counter: str) -> None:
    counts = bucket_counts(sample_db, f"stop_reason = '{reason}'")
    assert counts[(counter, 3)] == 1
    assert sum(n for (name, _), n in counts.items() if name == counter) == 1


def test_unmeasured_counters_and_other_seeds_caps_are_left_out(sample_db: Path) -> None:
    """Gate ledgers are never held to rounds; traces never to steps; no meter, no bucket."""
    docs = {name for name, _ in bucket_counts(sample_db, "task_class = 'docs'")}
    refactor = {name for name, _ in bucket_counts(sample_db, "task_class = 'refactor'")}
    assert docs == {"steps", "writes", "seconds"}
    assert refactor == {"rounds", "tool_calls", "output_tokens", "tool_errors"}
    actions_only = bucket_counts(sample_db, "stop_reason = 'no_progress' and day != ''")
    assert "rounds" not in {name for name, _ in actions_only}  # bf-0005 has no round counter


def test_sessions_that_ran_out_have_no_buckets(sample_db: Path) -> None:
    assert bucket_counts(sample_db, "stop_reason = 'task_complete'") == {}


@pytest.mark.parametrize("edge", [0.0, 0.49, 0.5, 0.79, 0.8, 0.99, 1.0, 1.5])
def test_bucket_sql_matches_the_edges(edge: float) -> None:
    with sqlite3.connect(":memory:") as conn:
        sql = f"select {rollup.bucket_sql(':v', ':cap')}"
        (got,) = conn.execute(sql, {"v": edge * 10, "cap": 10}).fetchone()
    expected = sum(edge >= e for e in rollup.BUCKET_EDGES)
    assert got == expected


@pytest.mark.parametrize("counter", rollup.COUNTERS, ids=lambda c: c.name)
def test_the_upsert_works_out_each_bucket_once(counter: rollup.Counter) -> None:
    """Every ingest prepares the statement on a connection of its own: a bucket's SQL written
    out again for each of its four flags made it twice as long to prepare (the flags it sums
    are held equal to the dashboard's by the rebuilds below)."""
    assert rollup.upsert(rollup.SOME).count(rollup.bucket_of(counter)) == 1


Step = Callable[[Path, Path], None]


def append_sessions(samples: Path, db_path: Path) -> None:
    ledger = samples / "bugfix" / "night-run.jsonl"
    with ledger.open("a") as f:
        f.write('{"session": "bf-0002", "type": "action", "action": "write"}\n' * 2)
        f.write('{"session": "bf-9", "type": "round", "vendor_stop": "weird"}\n')
    ingest(db_path, [samples], Options(batch=2))


def truncate(samples: Path, db_path: Path) -> None:
    ledger = samples / "docs" / "agent_ledger.jsonl"
    ledger.write_text("".join(ledger.read_text().splitlines(keepends=True)[:6]))
    ingest(db_path, [samples])


def rebudget(samples: Path, db_path: Path) -> None:
    ingest(db_path, [samples], Options(budget=Budget(max_rounds=3, max_steps=4)))


def remove_and_replace(samples: Path, db_path: Path) -> None:
    (samples / "refactor" / "port-orm-queries.json").unlink()
    (samples / "docs" / "agent_ledger.jsonl").write_text(
        '{"step": 1, "action": "retry", "detail": "tool:x", "elapsed_s": 0}\n'
    )
    ingest(db_path, [samples])


@pytest.mark.parametrize(
    "steps",
    [
        [append_sessions],
        [truncate],
        [rebudget],
        [remove_and_replace],
        [append_sessions, rebudget, truncate, append_sessions],
    ],
    ids=["append", "truncate", "rebudget", "replace", "all"],
)
def test_rollups_stay_equal_to_a_rebuild(
    samples: Path, db_path: Path, steps: list[Step]
) -> None:
    ingest(db_path, [samples], Options(batch=3))
    assert_consistent(db_path)
    for step in steps:
        step(samples, db_path)
        assert_consistent(db_path)
    assert not rows(db_path, "select * from session_rollup where sessions <= 0")


@pytest.mark.parametrize("jobs", [0, 2], ids=["here", "workers"])
def test_a_first_ingest_in_small_batches_equals_a_rebuild(
    samples: Path, db_path: Path, jobs: int
) -> None:
    """New sessions are only marked out of the rollup (they hold nothing yet), and a batch
    committed between two takes them out for real: every file of real logs and samples, in
    batches of 3 lines, so that commits fall between the batches of one file."""
    options = Options(batch=3, jobs=jobs, parallel_min_bytes=0)
    ingest(db_path, [samples, *sorted(REAL_LOGS.glob("0[1-5]_*.jsonl"))], options)
    assert_consistent(db_path)
    assert rows(db_path, "select count(*) as n from session_rollup")[0]["n"] > 0


def test_a_session_found_absent_is_marked_out_with_no_statement(db_path: Path) -> None:
    db = connection.connect(db_path)
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    pending = rollup.Pending()
    pending.take_out(db.conn, ["a", "b"], absent={"a", "b"})
    assert (statements, pending.out) == ([], {"a", "b"})
    pending.take_out(db.conn, ["a", "c"], absent={"a"})  # a is out already; c is taken out
    assert pending.out == {"a", "b", "c"}
    assert len([s for s in statements if "INSERT INTO" in s]) == 1


def test_the_migration_fills_the_rollup_of_an_older_database(samples: Path, db_path: Path) -> None:
    """Migration 005 alone, run again: the rollup of its time (012 adds the money)."""
    base = [name for name, _ in rollup.BASE_MEASURES]
    ingest(db_path, [samples])
    expected = stored(db_path, base)
    with sqlite3.connect(db_path) as conn:
        conn.execute("drop table session_rollup")
        for (index,) in conn.execute(
            "select name from sqlite_master where type = 'index'"
            " and name like 'idx_incidents_kind_%' and name != 'idx_incidents_kind_length'"
        ).fetchall():
            conn.execute(f"drop index {index}")
        conn.execute("delete from _migrations where name like '%_dashboard'")
        conn.execute("pragma user_version = 0")  # any other version: migrate() looks again
    db = connection.connect(db_path)
    assert isinstance(db.utils, sqlite_utils.Database)
    db.conn.close()
    assert stored(db_path, base) == expected


def test_migration_012_refills_the_rollup_with_the_money(db_path: Path) -> None:
    ingest(db_path, [REAL_LOGS], Options(budget=Budget(max_rounds=2)))
    with sqlite3.connect(db_path) as conn:
        conn.execute("drop table session_rollup")
        rollup.create(conn, rollup.BASE_MEASURES)
        rollup.add_money(conn)
    assert stored(db_path) == rebuilt(db_path)
    money = rows(db_path, "select sum(priced) as priced, sum(cost_nusd) as nusd, "
                 "sum(cost_after_stop_nusd) as after from session_rollup")[0]
    spent = rows(db_path, "select count(s.cost_usd) as priced, sum(s.cost_usd) as usd, "
                 "sum(s.cost_usd - t.total_cost_usd) as after from sessions s left join steps t "
                 "on t.session_id = s.session_id and t.idx = s.stop_at")[0]
    assert money["priced"] == spent["priced"] > 0
    assert money["nusd"] == pytest.approx(spent["usd"] * rollup.NANO, abs=money["priced"])
    assert 0 < money["after"] == pytest.approx(spent["after"] * rollup.NANO, abs=money["priced"])


def test_a_file_that_fails_mid_way_leaves_the_rollup_whole(
    samples: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its sessions' contributions, taken out of the rollup and then rolled back with its
    savepoint, are not added back a second time at the commit."""
    ingest(db_path, [samples])
    ledger = samples / "bugfix" / "night-run.jsonl"
    with ledger.open("a") as f:
        f.write('{"session": "bf-0002", "type": "action", "action": "write"}\n')
    write_batch = writes.write_batch

    def failing(conn, **batch):  # type: ignore[no-untyped-def]
        if batch["source"]["path"] == str(ledger) and batch["steps"]:
            raise OSError(5, "Input/output error")  # after the rollup was taken out
        write_batch(conn, **batch)

    monkeypatch.setattr(writes, "write_batch", failing)
    summary = ingest(db_path, [samples])
    assert any("could not be read" in n for n in summary.notices)
    assert_consistent(db_path)

    monkeypatch.setattr(writes, "write_batch", write_batch)
    ingest(db_path, [samples])
    assert_consistent(db_path)
    assert rows(db_path, "select events from sessions where session_id = 'bf-0002'") == [
        {"events": 7}]  # six lines in the samples, and the one appended
