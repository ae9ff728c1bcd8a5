"""The dashboard's host filter (plugins/ledger_dashboard/filters.py): three hosts' ledgers in
one database, each page narrowed to one machine's sessions."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger_dashboard.filters import Filters
from tests.helpers import FIXTURES

HOSTS = {"host-a": "genai_spans.jsonl", "host-b": "agent_logs.jsonl"}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hosts") / "ledger.db"
    for host, name in HOSTS.items():
        ingest(path, [FIXTURES / "otlp" / name], Options(host=host))
    ingest(path, [FIXTURES / "real-agent-logs"], Options(host="host-c"))
    return path


def query(db: Path, sql: str, filters: Filters) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, filters.params()).fetchall()
    finally:
        conn.close()


def sessions_of(db: Path, filters: Filters, form: str = "sessions") -> list[str]:
    if form == "sessions":
        sql = f"select session_id from sessions s where 1{filters.session_where()}"
    else:
        sql = f"select distinct session_id from incidents i where 1{filters.incident_where()}"
    return sorted(r[0] for r in query(db, sql, filters))


def rollup_sessions(db: Path, filters: Filters) -> int:
    sql = f"select coalesce(sum(sessions), 0) from session_rollup where 1{filters.rollup_where()}"
    return query(db, sql, filters)[0][0]


@pytest.mark.parametrize(("host", "expected"), [
    ("host-a", ["conv-1", "conv-2"]),
    ("host-b", ["cc-session-1", "codex-conv-1"]),
    ("nowhere", []),
])
def test_the_host_filter_picks_that_machines_sessions(
    db: Path, host: str, expected: list[str]
) -> None:
    filters = Filters.from_args({"host": host})
    assert sessions_of(db, filters) == expected
    assert rollup_sessions(db, filters) == len(expected)


def test_the_three_hosts_cover_every_session_once(db: Path) -> None:
    every = sessions_of(db, Filters())
    per_host = [s for h in ("host-a", "host-b", "host-c")
                for s in sessions_of(db, Filters(host=h))]
    assert sorted(per_host) == every
    incidents = sessions_of(db, Filters(host="host-c"), "incidents")
    assert incidents and set(incidents) <= set(sessions_of(db, Filters(host="host-c")))


def test_the_host_is_kept_in_links() -> None:
    assert Filters(host="host-a").query(_next="x") == "?host=host-a&_next=x"
