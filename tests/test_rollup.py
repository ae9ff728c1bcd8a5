"""Rollups: whatever ingest does to a database, they equal a rebuild from scratch."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlite_utils

from ledger import rollup, store
from ledger.budget import Budget
from ledger.ingest import Options, ingest
from tests.helpers import rows

TABLES = [r.table for r in rollup.ROLLUPS]


def stored(db_path: Path, table: str) -> list[tuple]:
    r = next(r for r in rollup.ROLLUPS if r.table == table)
    columns = ", ".join((*r.keys, *r.measures))
    with sqlite3.connect(db_path) as conn:
        order = ", ".join(r.keys)
        return conn.execute(f"select {columns} from {table} order by {order}").fetchall()


def rebuilt(db_path: Path, table: str) -> list[tuple]:
    with sqlite3.connect(db_path) as conn:
        return rollup.rebuilt(conn, table)


def assert_consistent(db_path: Path) -> None:
    for table in TABLES:
        assert stored(db_path, table) == rebuilt(db_path, table), table


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
    ("counter", "value", "cap", "bucket"),
    [
        ("tool_calls", 28, 24, 3),  # bf-0006 stopped by max_tool_calls: over the cap
        ("output_tokens", 37000, 32000, 3),  # the seed trace stopped by max_output_tokens
        ("writes", 3, 2, 3),
        ("seconds", 48.0, 45.0, 3),
    ],
)
def test_a_tripped_cap_is_in_the_top_bucket(
    sample_db: Path, counter: str, value: float, cap: float, bucket: int
) -> None:
    assert value >= cap
    found = rows(
        sample_db,
        "select sum(sessions) as n from budget_rollup where counter = ? and bucket = ?",
        [counter, bucket],
    )
    assert found[0]["n"] >= 1


def test_unmeasured_counters_and_other_seeds_caps_are_left_out(sample_db: Path) -> None:
    """Gate ledgers are never held to rounds; traces never to steps; no meter, no bucket."""
    by_class = {
        r["task_class"]: set(r["counters"].split(","))
        for r in rows(
            sample_db,
            "select task_class, group_concat(distinct counter) as counters from budget_rollup"
            " group by task_class",
        )
    }
    assert by_class["docs"] == {"steps", "writes", "seconds"}
    assert by_class["refactor"] == {"rounds", "tool_calls", "output_tokens", "tool_errors"}


@pytest.mark.parametrize("edge", [0.0, 0.49, 0.5, 0.79, 0.8, 0.99, 1.0, 1.5])
def test_bucket_sql_matches_the_edges(edge: float) -> None:
    with sqlite3.connect(":memory:") as conn:
        sql = f"select {rollup.bucket_sql(':v', ':cap')}"
        (got,) = conn.execute(sql, {"v": edge * 10, "cap": 10}).fetchone()
    expected = sum(edge >= e for e in rollup.BUCKET_EDGES)
    assert got == expected


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


def test_the_migration_fills_the_rollups_of_an_older_database(samples: Path, db_path: Path) -> None:
    ingest(db_path, [samples])
    expected = {table: stored(db_path, table) for table in TABLES}
    with sqlite3.connect(db_path) as conn:
        for table in TABLES:
            conn.execute(f"drop table {table}")
        for (index,) in conn.execute(
            "select name from sqlite_master where type = 'index'"
            " and name like 'idx_incidents_kind_%' and name != 'idx_incidents_kind_length'"
        ).fetchall():
            conn.execute(f"drop index {index}")
        conn.execute("delete from _migrations where name = '002_dashboard'")
        conn.execute("pragma user_version = 1")
    db = store.connect(db_path)
    assert isinstance(db, sqlite_utils.Database)
    db.conn.close()
    assert {table: stored(db_path, table) for table in TABLES} == expected
