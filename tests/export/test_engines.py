"""The same answers elsewhere: the dashboard's questions over the export, in DuckDB and in
ClickHouse's engine (chdb, in process), give exactly the rows SQLite gives."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import chdb.session as chdb_session
import duckdb
import pytest

from tests.export.questions import QUESTIONS
from tests.helpers import ROOT

TABLES = ("sessions", "steps", "incidents", "task_classes", "stop_reasons")

Rows = list[tuple[Any, ...]]


def sqlite_rows(db: Path, sql: str) -> Rows:
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def duck(exported: Path):
    conn = duckdb.connect()
    for table in TABLES:
        conn.execute(f"create view {table} as select * from read_parquet("
                     f"'{exported}/{table}/**/*.parquet', hive_partitioning = true)")
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def clickhouse(exported: Path):
    session = chdb_session.Session()
    session.query("create database if not exists ledger engine = Atomic")
    for table in TABLES:
        session.query(f"create view ledger.{table} as select * from "
                      f"file('{exported}/{table}/**/*.parquet', Parquet)")
    session.query("use ledger")
    yield session
    session.close()


def clickhouse_rows(session: Any, sql: str) -> Rows:
    return [tuple(r.values()) for r in session.query(sql, "ArrowTable").to_pylist()]


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_duckdb_answers_as_sqlite(name: str, ledger_db: Path, duck: Any) -> None:
    expected = sqlite_rows(ledger_db, QUESTIONS[name])
    assert expected, f"{name}: the ledger has no answer to compare"
    assert [tuple(r) for r in duck.execute(QUESTIONS[name]).fetchall()] == expected


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_clickhouse_answers_as_sqlite(name: str, ledger_db: Path, clickhouse: Any) -> None:
    expected = sqlite_rows(ledger_db, QUESTIONS[name])
    assert expected, f"{name}: the ledger has no answer to compare"
    assert clickhouse_rows(clickhouse, QUESTIONS[name]) == expected


def test_money_is_summed_exactly_in_whole_nanodollars(ledger_db: Path, duck: Any) -> None:
    """The ledger's spend, summed in SQLite and in DuckDB: the integers are equal, and are the
    dollars in nanodollars; the question has some money to sum."""
    sql = "select sum(cost_nusd), sum(cost_usd), count(cost_usd) from sessions"
    ((nusd, usd, priced),) = sqlite_rows(ledger_db, sql)
    assert priced > 0 and isinstance(nusd, int)
    assert duck.execute(sql).fetchall()[0][0] == nusd
    assert abs(nusd - usd * 1e9) <= priced  # each session rounded by at most half a nanodollar


@pytest.mark.parametrize("table", ["sessions", "steps", "incidents", "task_classes"])
def test_every_row_is_exported_once(table: str, ledger_db: Path, duck: Any) -> None:
    (count,) = sqlite_rows(ledger_db, f"select count(*) from {table}")
    assert duck.execute(f"select count(*) from {table}").fetchall() == [count]


def test_the_docs_show_every_question() -> None:
    text = (ROOT / "docs" / "export.md").read_text()
    assert [name for name, sql in QUESTIONS.items() if sql not in " ".join(text.split())] == []
