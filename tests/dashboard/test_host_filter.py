"""The dashboard's host filter (plugins/ledger_dashboard/filters.py): three hosts' ledgers in
one database, each page narrowed to one machine's sessions."""

from __future__ import annotations

import html
import re
import sqlite3
from pathlib import Path

import pytest
from datasette.app import Datasette

from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.views.serve import metadata_for
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


# --- the host filter on the pages: a choice of the hosts the database knows -------------------

PAGES = ["overview", "retry-storms", "no-progress", "unknown-vendors"]


def host_choices(page: str) -> list[tuple[str, bool]]:
    """The host select's options (value, selected) on a rendered page; no text input."""
    assert 'name="host" value=' not in page  # the free-text input is gone
    (select,) = re.findall(r'<select name="host">(.*?)</select>', page, re.S)
    return [(html.unescape(value), bool(selected)) for value, selected in
            re.findall(r'<option value="([^"]*)"( selected)?>', select)]


async def rendered(db: Path, page: str) -> str:
    ds = Datasette(files=[str(db)], metadata=metadata_for(db))
    response = await ds.client.get(f"/{db.stem}/-/{page}")
    assert response.status_code == 200, response.text[:300]
    return response.text


@pytest.mark.asyncio
@pytest.mark.parametrize("page", PAGES)
async def test_every_page_offers_the_hosts_of_the_database(db: Path, page: str) -> None:
    choices = host_choices(await rendered(db, page))
    assert choices == [("", False), ("host-a", False), ("host-b", False), ("host-c", False)]
    picked = host_choices(await rendered(db, f"{page}?host=host-b"))
    assert [v for v, selected in picked if selected] == ["host-b"]


@pytest.mark.asyncio
async def test_a_host_from_a_link_that_the_database_lacks_stays_chosen(db: Path) -> None:
    page = await rendered(db, "overview?host=gone")
    assert host_choices(page)[-1] == ("gone", True)
    assert "gone (no source here)" in page


@pytest.mark.asyncio
async def test_a_database_whose_sources_name_no_host_offers_any(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    ingest(path, [FIXTURES / "otlp" / "genai_spans.jsonl"])
    conn = sqlite3.connect(path)
    conn.execute("update sources set host = null")  # ingested before hosts were recorded
    conn.commit()
    conn.close()
    assert host_choices(await rendered(path, "overview")) == [("", False)]
