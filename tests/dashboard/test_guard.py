"""No URL answers 500: every route of `agent-ledger serve`, with any query string.

Dashboard pages and their `.json` twins, Datasette's index, database, table, row, query and
canned-query pages (GET and POST), its static files and the plugin's: each answers a hostile
query string with a success, a redirect or a 4xx that says what is wrong, never a 500. A table
of the inputs that used to give 500s, then Hypothesis over argument names and values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from datasette.app import Datasette
from datasette.utils import tilde_encode
from datasette.views.base import DatasetteError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.views.serve import SETTINGS, allowed_hosts, merge, metadata_for, with_hosts
from ledger_dashboard.guard import as_client_error, bad_argument
from tests import dashboard_data as data

BIG = str(2**63)
SESSION = "0903fa030c63-4"
DASHBOARD = [
    *(f"/ledger/-/{page}{twin}" for page in
      ("overview", "retry-storms", "no-progress", "unknown-vendors") for twin in ("", ".json")),
    f"/ledger/-/sessions/{SESSION}", f"/ledger/-/sessions/{SESSION}.json",
    f"/ledger/-/sessions/{tilde_encode(data.XSS_SESSION)}",
]
TABLES = ["sessions", "steps", "incidents", "stop_reasons", "sources", "session_rollup"]
DATASETTE = [
    "/", "/.json", "/ledger", "/ledger.json", "/ledger.json?sql=select+1",
    *(f"/ledger/{table}{fmt}" for table in TABLES for fmt in ("", ".json")),
    "/ledger/sessions.csv", "/ledger/sessions.csv?_stream=1",
    f"/ledger/sessions/{SESSION}", f"/ledger/sessions/{SESSION}.json", f"/ledger/steps/{SESSION},1",
    "/-/static/app.css", "/-/static-plugins/agent-ledger/ledger-dashboard.css",
    "/-/versions.json", "/-/plugins", "/-/metadata", "/-/databases", "/-/actor.json",
]
CANNED = sorted(metadata_for("ledger.db")["databases"]["ledger"]["queries"])
QUERIES = [f"/ledger/{name}{fmt}" for name in CANNED for fmt in ("", ".json")]
ROUTES = [*DASHBOARD, *DATASETTE, *QUERIES]
#: The routes that read a query string (the index pages ignore it and cost the most).
READERS = [
    *DASHBOARD,
    *(r for r in DATASETTE if r.startswith(("/ledger/", "/-/static")) and "rollup" not in r),
    "/ledger/retry_storms.json", "/ledger/paid_path", "/ledger/leftover_checklist.json",
]

#: Query strings that gave 500s (issue 21), and their neighbours.
HOSTILE = [
    "until=9999-12-31", "since=0000-01-01", "until=99999-01-01", f"min_length={BIG}",
    f"_next={BIG}", f"_next={BIG},x,1", f"_size={BIG}", f"at={BIG}", f"events__gt={BIG}",
    f"idx__lt=-{BIG}1", f"session_id__in=[{BIG}]",
    "min_length=&_next=&_size=&at=&until=&_sort=&_facet=", "min_length=%EF%BC%93&at=1_000",
    "until=2026-01-01&until=2026-12-31&task_class=a&task_class=b", "_next=5,x&_size=-1",
    "_sort=nope", "_sort=a&_sort_desc=b", "_timelimit=x", "_timelimit=-1", "_through=0",
    "_through=%7B%22table%22:1%7D", "session_id__in=[", "session_id__in=[%7B%7D]", "_facet=%7B",
    "_facet_array=%00", "_facet_date=%7B%7D", "_col=nope&_nocol=session_id", "_where=1)",
    "_shape=nope&_search=%22&_fts_table=nope", "_labels=on&_json=nope&_nl=on&_dl=1",
    "task_class=%00&source=%E2%80%AE&stop_reason=%FF%FE", "%00=%00&=x&&&",
    "a" * 5000, "task_class=" + "a" * 5000, "sql=select+%00", "_stream=1&_next=1",
]


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return data.build(tmp_path_factory.mktemp("guard"))


def served(db_path: Path, extra: dict[str, Any] | None = None) -> Datasette:
    """The Datasette `agent-ledger serve` runs on 127.0.0.1 (the test client sends
    Host: localhost), with ``extra`` metadata merged over it."""
    metadata = with_hosts(metadata_for(db_path), allowed_hosts("127.0.0.1"))
    return Datasette(files=[str(db_path)], metadata=merge(metadata, extra or {}), settings=SETTINGS)


@pytest.fixture
def ds(db_path: Path) -> Datasette:
    return served(db_path)


def assert_answered(response: httpx.Response, what: str) -> None:
    """A success, a redirect or a 4xx with a readable message: never a 500 or a traceback."""
    status = response.status_code
    assert status < 500, (what, status, response.text[:300])
    assert "Traceback" not in response.text, what
    if status < 400 or response.request.method == "HEAD":
        return
    if response.headers.get("content-type", "").startswith("application/json"):
        assert json.loads(response.text)["error"], what
    else:
        assert response.text.strip(), what


async def fetch(ds: Datasette, method: str, path: str, query: str = "") -> httpx.Response:
    joiner = "&" if "?" in path else "?"
    return await ds.client.request(method, f"{path}{joiner}{query}" if query else path)


@pytest.mark.asyncio
@pytest.mark.parametrize("query", HOSTILE)
async def test_no_route_answers_500_to_a_hostile_query_string(ds: Datasette, query: str) -> None:
    for path in READERS:
        assert_answered(await fetch(ds, "GET", path, query), f"GET {path} ?{query}")


#: Places a path segment goes: a session, a row, a table, a database, a static file.
PREFIXES = [
    "/ledger/-/sessions/", "/ledger/sessions/", "/ledger/steps/", "/ledger/", "/",
    "/-/static/", "/-/static-plugins/agent-ledger/", "/ledger/-/",
]
SEGMENTS = [
    "%ff", "%00", "%E2%80%AE", "~", "~~", "~2F", "~zz", "..%2F..%2Fetc%2Fpasswd", "%2e%2e", "%",
    "a.json", ".json", "a,b", "a,b,c,d", "-", "-/x", "a" * 300, "a" * 5000, "x.csv", "x.db",
]


@pytest.mark.asyncio
@pytest.mark.parametrize("segment", SEGMENTS)
async def test_no_odd_path_answers_500(ds: Datasette, segment: str) -> None:
    for prefix in PREFIXES:
        for method in ("GET", "HEAD"):
            path = prefix + segment
            assert_answered(await ds.client.request(method, path), f"{method} {path}")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/ledger/-/overview?until=9999-12-31", 200, ""),
        ("/ledger/-/overview.json?until=9999-12-31", 200, ""),
        (f"/ledger/-/retry-storms.json?min_length={BIG}", 400, "whole number from 2 to"),
        (f"/ledger/-/unknown-vendors.json?_next={BIG}", 400, "_next"),
        (f"/ledger/-/retry-storms.json?_next={BIG},x,1", 400, "not a page token"),
        (f"/ledger/-/sessions/{SESSION}.json?at={BIG}", 400, "at:"),
        (f"/ledger/sessions.json?events__gt={BIG}", 400, "too large"),
        ("/ledger/sessions.json?_sort=nope", 400, "Cannot sort table by nope"),
        ("/ledger/sessions.json?_timelimit=x", 400, "_timelimit"),
        ("/ledger/sessions.json?_through=0", 400, "_through"),
        ("/ledger/sessions.json?session_id__in=[", 400, "JSON list"),
        ("/ledger/sessions.json?_facet_array=%00", 400, "NUL character"),
        ("/ledger/steps/x.json", 404, "give a value for each key column"),
        ("/-/static/" + "a" * 5000, 404, "too long"),
        ("/-/static-plugins/agent-ledger/" + "a" * 5000, 404, "too long"),
    ],
)
async def test_each_old_500_is_a_clear_answer(
    ds: Datasette, path: str, status: int, message: str, capfd: pytest.CaptureFixture[str]
) -> None:
    response = await ds.client.get(path)
    assert response.status_code == status, response.text[:300]
    assert message in response.text
    assert "Traceback" not in capfd.readouterr().err  # a client's error, not the server's


@pytest.mark.asyncio
@pytest.mark.parametrize("path", [*QUERIES, "/ledger/sessions", "/ledger/steps.json"])
async def test_a_post_to_a_table_or_read_only_query_is_405(ds: Datasette, path: str) -> None:
    response = await ds.client.post(path, data={"min_length": "1"})
    assert response.status_code == 405
    assert "read-only canned query" in response.text or "not a canned query" in response.text


@pytest.mark.asyncio
async def test_a_post_to_a_writing_canned_query_reaches_datasette(db_path: Path) -> None:
    note = {"sql": "insert into sources (path) values (:path)", "write": True}
    ds = served(db_path, {"databases": {"ledger": {"queries": {"note": note}}}})
    response = await ds.client.post("/ledger/note", data={"path": "x"})
    assert response.status_code != 405  # Datasette answers it (and the read-only DB refuses)
    assert response.status_code < 500


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ([("_timelimit", "100")], None),
        ([("_timelimit", "1.5")], "_timelimit"),
        ([("_through", '{"table": "a", "column": "b", "value": 1}')], None),
        ([("_through", '{"table": "a", "column": "b", "value": {}}')], "_through"),
        ([("x__in", "a,b")], None),
        ([("x__in", '["a", 1, null]')], None),
        ([("x__notin", '[["a"]]')], "x__notin"),
        ([("_facet", "task_class")], None),
        ([("_facet", '{"simple": "task_class"}')], None),
        ([("_facet_date", '{"simple": 1}')], "_facet_date"),
        ([("task_class", "{"), ("stop_reason", "[")], None),
    ],
)
def test_bad_arguments_are_named_before_datasette_reads_them(
    args: list[tuple[str, str]], problem: str | None
) -> None:
    found = bad_argument(args)
    assert (found if problem is None else found and found.split(":")[0]) == problem


@pytest.mark.parametrize(
    "exception",
    [
        ValueError("date value out of range"),
        OverflowError("date value out of range"),
        DatasetteError("Invalid SQL", status=400),
        OSError(2, "No such file"),
        KeyError("x"),
    ],
)
def test_other_failures_are_left_to_datasette(exception: Exception) -> None:
    assert as_client_error(exception, {}) is None


ARG_NAMES = st.sampled_from([
    "since", "until", "task_class", "stop_reason", "source", "min_length", "at", "_next",
    "_size", "_sort", "_sort_desc", "_facet", "_facet_array", "_facet_date", "_facet_size",
    "_through", "_timelimit", "_col", "_nocol", "_shape", "_search", "_where", "_labels", "sql",
    "events__gt", "idx__lt", "session_id__in", "task_class__notin", "started_at__date",
    "category", "verdict", "repo",
]) | st.text(max_size=12)
ARG_VALUES = st.one_of(
    st.sampled_from(["", BIG, f"-{BIG}", "9999-12-31", "0000-01-01", "[", "{", "~", ",",
                     "\x00", "\u202e", "nan", "1e309", "max", "a" * 3000]),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=30),
)


@pytest.mark.asyncio
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prefix=st.sampled_from(PREFIXES), segment=st.text(max_size=40))
async def test_no_path_answers_500(ds: Datasette, prefix: str, segment: str) -> None:
    path = prefix + quote(segment, safe="/,~.")
    assert_answered(await ds.client.get(path), f"GET {path}")


@pytest.mark.asyncio
@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(ROUTES),
    method=st.sampled_from(["GET", "GET", "GET", "POST", "HEAD"]),
    args=st.lists(st.tuples(ARG_NAMES, ARG_VALUES), max_size=4),
)
async def test_no_route_answers_500_to_any_arguments(
    ds: Datasette, path: str, method: str, args: list[tuple[str, str]]
) -> None:
    query = str(httpx.QueryParams(args))
    assert_answered(await fetch(ds, method, path, query), f"{method} {path} ?{query}")
