"""The dashboard's routes through Datasette's test client: every page, its JSON, its filters."""

from __future__ import annotations

import html
import sqlite3
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
from datasette.app import Datasette
from datasette.utils import tilde_encode

from ledger.core.budget import Budget
from ledger.ingest.ingester import ingest
from ledger.views.serve import merge, metadata_for
from tests import dashboard_data as data
from tests.helpers import rows

PAGES = ["overview", "retry-storms", "no-progress", "unknown-vendors"]


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return data.build(tmp_path_factory.mktemp("dashboard"))


def datasette(db_path: Path, **extra: Any) -> Datasette:
    return Datasette(files=[str(db_path)], metadata=merge(metadata_for(db_path), extra))


@pytest.fixture
def ds(db_path: Path) -> Datasette:
    return datasette(db_path)


async def get(ds: Datasette, path: str, status: int = 200, **kwargs: Any) -> httpx.Response:
    response = await ds.client.get(path, **kwargs)
    assert response.status_code == status, (path, response.text[:500])
    return response


async def get_json(ds: Datasette, path: str, status: int = 200) -> Any:
    return (await get(ds, path, status)).json()


def session_path(session_id: str, query: str = "", json_twin: bool = False) -> str:
    return f"/ledger/-/sessions/{tilde_encode(session_id)}{'.json' if json_twin else ''}{query}"


# --- every route and its twin --------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("page", PAGES)
async def test_every_page_renders_with_its_tabs_and_json_link(ds: Datasette, page: str) -> None:
    body = (await get(ds, f"/ledger/-/{page}")).text
    for other in PAGES:
        assert f'href="/ledger/-/{other}"' in body
    assert f'href="/ledger/-/{page}.json"' in body
    assert 'aria-current="page"' in body
    assert "/-/static-plugins/" in body and "chart.umd.min.js" in body


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("page", "keys"),
    [
        ("overview", {"totals", "task_classes", "over_time", "budget_at_stop", "paid_path",
                      "retry_storms", "no_progress", "unknown_vendors", "budgets"}),
        ("retry-storms", {"threshold", "count", "rows", "next", "by_day"}),
        ("no-progress", {"min_length", "count", "rows", "next"}),
        ("unknown-vendors", {"count", "rows", "vendor_map", "next", "unclassified_tools"}),
    ],
)
async def test_every_page_has_a_json_twin(ds: Datasette, page: str, keys: set[str]) -> None:
    found = await get_json(ds, f"/ledger/-/{page}.json")
    assert keys <= set(found)
    assert found["database"] == "ledger"
    assert "_charts" not in found


@pytest.mark.asyncio
async def test_static_files_are_served_from_the_package(ds: Datasette) -> None:
    plugins = await get_json(ds, "/-/plugins.json")
    ours = [p for p in plugins if p["static"] and "render_cell" in p["hooks"]]
    assert len(ours) == 1 and ours[0]["templates"]
    for name in ("chart.umd.min.js", "ledger-dashboard.js", "ledger-dashboard.css",
                 "chart.js-LICENSE.md"):
        response = await get(ds, f"/-/static-plugins/{ours[0]['name']}/{name}")
        assert response.content


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    ["/nope/-/overview", "/ledger/-/sessions/no-such-session", "/ledger/-/sessions/nope.json"],
)
async def test_unknown_database_or_session_is_404(ds: Datasette, path: str) -> None:
    await get(ds, path, 404)


@pytest.mark.asyncio
async def test_a_database_that_is_not_a_ledger_is_404(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("create table t (stop_reason text)").connection.commit()
    ds = Datasette(files=[str(other)])
    response = await get(ds, "/other/-/overview", 404)
    assert "not an agent-ledger database" in response.text
    table = (await get(ds, "/other/t")).text
    assert "ledger-badge" not in table


# --- the overview --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_overview_counts_agree_with_the_tables(ds: Datasette, db_path: Path) -> None:
    found = await get_json(ds, "/ledger/-/overview.json")
    totals = rows(db_path, "select count(*) as n, sum(steps) as steps from sessions")[0]
    assert (found["totals"]["sessions"], found["totals"]["steps"]) == (totals["n"], totals["steps"])
    stopped = rows(
        db_path, "select count(*) as n from sessions where stop_reason != 'task_complete'"
    )
    assert found["totals"]["stopped_by_budget"] == stopped[0]["n"]
    by_class = {c["task_class"]: c for c in found["task_classes"]}
    assert by_class["docs"]["stop_reasons"] == {
        "max_seconds": 1, "max_steps": 1, "max_writes": 1, "retry_near_ceiling": 1,
        "task_complete": 1,
    }
    storms = rows(db_path, "select count(*) as n from incidents where kind = 'retry_storm' "
                           "and length >= 3")
    assert found["retry_storms"]["count"] == storms[0]["n"] == 3
    assert [r["length"] for r in found["retry_storms"]["top"]] == [5, 4, 3]
    assert found["unknown_vendors"]["count"] == 4
    assert found["over_time"]["without_timestamp"] == 5 + 5  # the gate runs and the traces


@pytest.mark.asyncio
async def test_overview_shows_the_task_classes_verdicts(ds: Datasette) -> None:
    found = await get_json(ds, "/ledger/-/overview.json")
    assert found["paid_path"]["from"] == "task_classes"
    verdicts = {r["task_class"]: r for r in found["paid_path"]["rows"]}
    assert {r["verdict"] for r in verdicts.values()} == {"stay_on_paid_path"}
    assert "unknown_vendor" in verdicts["bugfix"]["reason_kinds"].split(",")
    assert any("policy_hidden_v3" in reason for reason in verdicts["bugfix"]["reasons"])
    docs = await get_json(ds, "/ledger/-/overview.json?task_class=docs")
    assert [r["task_class"] for r in docs["paid_path"]["rows"]] == ["docs"]
    body = (await get(ds, "/ledger/-/overview")).text
    assert '<span class="ledger-tag ledger-tag-reason">no terminal signal</span>' in body


@pytest.mark.asyncio
async def test_the_overview_names_the_budget_in_force(db_path: Path, tmp_path: Path) -> None:
    found = (await get_json(datasette(db_path), "/ledger/-/overview.json"))["budgets"]
    stored = rows(db_path, "select budget, count(*) as n from sessions group by budget")
    assert sum(b["sessions"] for b in found["rows"]) == sum(r["n"] for r in stored)
    body = (await get(datasette(db_path), "/ledger/-/overview")).text
    for b in found["rows"]:
        assert html.escape(b["caps"]) in body
    # The same sessions, as if folded under the seeds' placeholder: said, with the next step.
    copy = tmp_path / "ledger.db"
    copy.write_bytes(db_path.read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.execute("update sessions set budget = ?", (Budget().to_json(),))
    placeholder = (await get_json(datasette(copy), "/ledger/-/overview.json"))["budgets"]
    assert placeholder["placeholder"] is True and len(placeholder["rows"]) == 1
    body = (await get(datasette(copy), "/ledger/-/overview")).text
    assert "the seeds' placeholder, not measured for this work" in body
    assert "To measure one: <code>agent-ledger propose-budget ledger.db &gt; budget.toml" in body
    assert "--budget-file budget.toml" in body and "% of sessions, under the seeds'" in body


@pytest.mark.asyncio
async def test_without_verdicts_the_overview_applies_the_fail_closed_rule(
    db_path: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "ledger.db"
    copy.write_bytes(db_path.read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.execute("drop view if exists meter_gaps")
        conn.execute("drop table task_classes")
    found = await get_json(datasette(copy), "/ledger/-/overview.json")
    assert found["paid_path"]["from"] == "computed"
    flagged = {r["task_class"]: r for r in found["paid_path"]["rows"]}
    assert set(flagged) == {"bugfix", "docs", data.XSS_CLASS}
    assert flagged[data.XSS_CLASS]["unknown_vendor_sessions"] == 2
    assert flagged["docs"]["completes_without_terminal_signal"] == 1


@pytest.mark.asyncio
async def test_overview_without_the_rollup_computes_the_same(db_path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "ledger.db"
    copy.write_bytes(db_path.read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.execute("drop table session_rollup")
    old = await get_json(datasette(copy), "/ledger/-/overview.json")
    new = await get_json(datasette(db_path), "/ledger/-/overview.json")
    assert (old.pop("rollup"), new.pop("rollup")) == (False, True)
    assert old == new
    assert "older agent-ledger" in (await get(datasette(copy), "/ledger/-/overview")).text


@pytest.mark.asyncio
async def test_budget_at_stop_counts_each_stopped_session_once_per_counter(ds: Datasette) -> None:
    found = await get_json(ds, "/ledger/-/overview.json?task_class=docs")
    counters = {c["counter"]: c["sessions"] for c in found["budget_at_stop"]["counters"]}
    assert set(counters) == {"steps", "writes", "seconds"}
    assert all(sum(buckets) == 4 for buckets in counters.values())  # 4 docs runs stopped
    assert counters["writes"][3] == 1 and counters["seconds"][3] == 1


# --- filters -------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("query", "sessions"),
    [
        ("", 18),
        ("?task_class=docs", 5),
        ("?stop_reason=no_progress", 3),
        ("?task_class=bugfix&stop_reason=task_complete", 2),
        ("?since=2026-11-29", 6),
        ("?until=2026-11-28", 2),
        ("?since=2026-11-28&until=2026-11-28", 2),
        ("?since=2026-11-30", 0),
        ("?source=0903fa030c63", 5),
    ],
)
async def test_filters_pick_sessions(ds: Datasette, query: str, sessions: int) -> None:
    found = await get_json(ds, f"/ledger/-/overview.json{query}")
    assert found["totals"]["sessions"] == sessions


@pytest.mark.asyncio
async def test_source_filter_takes_a_path_too(ds: Datasette, db_path: Path) -> None:
    (source,) = rows(db_path, "select source_id, path from sources where path like '%docs%'")
    by_id = await get_json(ds, f"/ledger/-/overview.json?source={source['source_id']}")
    by_path = await get_json(
        ds, "/ledger/-/overview.json?" + httpx.QueryParams(source=source["path"]).__str__()
    )
    assert by_id["totals"] == by_path["totals"]
    assert by_id["totals"]["sessions"] == 5


@pytest.mark.asyncio
@pytest.mark.parametrize("page", PAGES)
async def test_filters_apply_to_every_page(ds: Datasette, page: str) -> None:
    everything = await get_json(ds, f"/ledger/-/{page}.json")
    bugfix = await get_json(ds, f"/ledger/-/{page}.json?task_class=bugfix")
    assert bugfix["filters"] == {"task_class": "bugfix"}
    if page == "overview":
        assert {c["task_class"] for c in bugfix["task_classes"]} == {"bugfix"}
    else:
        assert bugfix["count"] < everything["count"]
        assert all(set(r.get("task_classes", [r.get("task_class")])) == {"bugfix"}
                   for r in bugfix["rows"])


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("stop_reason=finished", "unknown stop reason 'finished'"),
        ("since=yesterday", "'yesterday' is not a date"),
        ("until=2026-02-30", "'2026-02-30' is not a date"),
        ("since=2026-12-01&until=2026-11-01", "since (2026-12-01) is after until (2026-11-01)"),
    ],
)
@pytest.mark.parametrize("twin", ["", ".json"])
async def test_bad_filters_are_a_clear_400(
    ds: Datasette, query: str, message: str, twin: str
) -> None:
    response = await get(ds, f"/ledger/-/overview{twin}?{query}", 400)
    assert message in (response.json()["error"] if twin else html.unescape(response.text))


@pytest.mark.asyncio
async def test_the_page_links_keep_the_filters(ds: Datasette) -> None:
    body = (await get(ds, "/ledger/-/overview?task_class=docs&stop_reason=max_steps")).text
    assert 'href="/ledger/-/retry-storms?task_class=docs&amp;stop_reason=max_steps"' in body
    assert "/ledger/-/overview.json?task_class=docs&amp;stop_reason=max_steps" in body
    assert '<option value="docs" selected>' in body


# --- incident pages ------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_retry_storms_are_runs_of_the_threshold_or_more(ds: Datasette) -> None:
    found = await get_json(ds, "/ledger/-/retry-storms.json")
    assert found["threshold"] == 3
    assert [(r["length"], r["key"], r["blocked"]) for r in found["rows"]] == [
        (5, "tool:read", 1), (4, data.JS_URL, 0), (3, "migrate", 0),
    ]
    first = found["rows"][0]
    assert first["timeline_url"] == f"/ledger/-/sessions/{first['session_id']}?at=3#step-3"
    assert first["stop_reason"] == "retry_near_ceiling"


@pytest.mark.asyncio
async def test_retry_storm_threshold_comes_from_plugin_config(db_path: Path) -> None:
    ds = datasette(db_path, plugins={"ledger_dashboard": {"retry_storm_threshold": 5}})
    found = await get_json(ds, "/ledger/-/retry-storms.json")
    assert [r["length"] for r in found["rows"]] == [5]
    overview = await get_json(ds, "/ledger/-/overview.json")
    assert overview["retry_storms"]["threshold"] == 5
    assert overview["retry_storms"]["count"] == 1
    override = await get_json(ds, "/ledger/-/retry-storms.json?min_length=2")
    assert override["count"] == 3


@pytest.mark.asyncio
async def test_a_bad_threshold_is_a_clear_error(db_path: Path) -> None:
    ds = datasette(db_path, plugins={"ledger_dashboard": {"retry_storm_threshold": "many"}})
    response = await get(ds, "/ledger/-/retry-storms.json", 400)
    assert "retry_storm_threshold must be a whole number" in response.json()["error"]


@pytest.mark.asyncio
@pytest.mark.parametrize("page", ["retry-storms", "no-progress"])
async def test_pages_follow_next_links_to_the_end(ds: Datasette, page: str) -> None:
    everything = (await get_json(ds, f"/ledger/-/{page}.json?min_length=2"))["rows"]
    seen: list[tuple[str, int]] = []
    path: str | None = f"/ledger/-/{page}.json?min_length=2&_size=1"
    while path:
        found = await get_json(ds, path)
        assert len(found["rows"]) <= 1
        seen += [(r["session_id"], r["start_idx"]) for r in found["rows"]]
        path = found["next_url"] and found["next_url"].replace(f"/{page}?", f"/{page}.json?")
    assert seen == [(r["session_id"], r["start_idx"]) for r in everything]
    assert len(seen) >= 3


@pytest.mark.asyncio
async def test_a_forged_page_token_is_a_400(ds: Datasette) -> None:
    response = await get(ds, "/ledger/-/retry-storms.json?_next=5,x", 400)
    assert "not a page token" in response.json()["error"]


@pytest.mark.asyncio
async def test_no_progress_runs_show_the_observation_and_its_cost(ds: Datasette) -> None:
    found = await get_json(ds, "/ledger/-/no-progress.json")
    by_session = {r["session_id"]: r for r in found["rows"]}
    bf5 = by_session["bf-0005"]
    assert (bf5["length"], bf5["detail"]) == (4, "OperationalError: no such column: owner_id")
    trace = by_session["0d35d469e4d4"]
    assert (trace["output_tokens"], trace["tool_calls"]) == (200, 1)
    assert [r["length"] for r in found["rows"]] == sorted(
        (r["length"] for r in found["rows"]), reverse=True
    )


@pytest.mark.asyncio
async def test_unknown_vendor_entries_paste_into_a_vendor_map(ds: Datasette) -> None:
    found = await get_json(ds, "/ledger/-/unknown-vendors.json")
    raws = {r["vendor_stop"] for r in found["rows"]}
    assert raws == {"policy_hidden_v3", data.JS_URL, data.SVG, data.SCRIPT}
    for r in found["rows"]:
        entry = tomllib.loads(r["vendor_map_entry"])
        assert entry == {r["vendor_stop"]: "unknown_vendor"}  # fails closed until edited
        assert "# choose: task_complete" in r["vendor_map_entry"]
    stops = tomllib.loads(found["vendor_map"])["stops"]
    assert set(stops) == raws and set(stops.values()) == {"unknown_vendor"}
    policy = next(r for r in found["rows"] if r["vendor_stop"] == "policy_hidden_v3")
    assert (policy["occurrences"], policy["task_classes"]) == (1, ["bugfix"])
    assert policy["first_seen"] == policy["last_seen"] == "2026-11-29T22:01:20.000Z"


def tool_call_line(n: int, tool: str) -> dict[str, Any]:
    message = {"id": f"m{n}", "model": "claude-opus-4-6", "role": "assistant",
               "content": [{"type": "tool_use", "id": f"t{n}", "name": tool, "input": {}}],
               "stop_reason": None, "usage": {"output_tokens": 5}}
    return {"type": "assistant", "sessionId": "cc-1", "uuid": f"u{n}", "cwd": "/work/agents",
            "timestamp": f"2026-11-28T10:00:{n:02d}.000Z", "message": message}


@pytest.mark.asyncio
async def test_unclassified_tools_are_listed_with_an_action_map_line(tmp_path: Path) -> None:
    hostile = f"mcp__evil__{data.SCRIPT}"
    tools = ["mcp__tracker__create_ticket", "Read", "mcp__tracker__create_ticket", hostile]
    log = data.write(tmp_path / "cc.jsonl", [tool_call_line(n, t) for n, t in enumerate(tools)])
    db = tmp_path / "ledger.db"
    ingest(db, [log])
    ds = datasette(db)
    found = (await get_json(ds, "/ledger/-/unknown-vendors.json"))["unclassified_tools"]
    assert [(r["tool"], r["occurrences"], r["task_classes"]) for r in found["rows"]] == [
        ("mcp__tracker__create_ticket", 2, ["agents"]), (hostile, 1, ["agents"])]
    assert found["count"] == 2
    overview = await get_json(ds, "/ledger/-/overview.json")
    assert overview["unclassified_tools"] == {"count": 2}
    for r in found["rows"]:
        assert tomllib.loads(r["action_map_entry"]) == {r["tool"]: "write"}
        assert r["incidents_url"].startswith("/ledger/incidents?")
    assert tomllib.loads(found["action_map"])["tools"] == {
        "mcp__tracker__create_ticket": "write", hostile: "write"}
    page = (await get(ds, "/ledger/-/unknown-vendors")).text
    assert "mcp__tracker__create_ticket" in page and data.SCRIPT not in page
    assert "mcp__evil__&lt;script&gt;" in page  # shown, escaped


@pytest.mark.asyncio
async def test_a_database_without_unclassified_tools_says_so(ds: Datasette) -> None:
    found = (await get_json(ds, "/ledger/-/unknown-vendors.json"))["unclassified_tools"]
    assert (found["count"], found["rows"], found["action_map"]) == (0, [], "")
    page = (await get(ds, "/ledger/-/unknown-vendors")).text
    assert "Every tool called in these sessions has an action class." in page


# --- the session timeline ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_timeline_marks_the_stop_and_what_came_after(ds: Datasette) -> None:
    found = await get_json(ds, session_path("811be5e93b95", json_twin=True))
    steps = found["steps"]
    assert [s["idx"] for s in steps] == list(range(1, 15))
    assert [s["idx"] for s in steps if s["is_stop"]] == [12]
    assert [s["idx"] for s in steps if s["after_stop"]] == [13, 14]
    assert found["decision"]["safe_action"] == "Stop, emit partial log, do not retry blindly"
    at_stop = {m["name"]: m["text"] for m in found["at_stop"]["meters"]}
    assert at_stop["rounds"] == "12 / 12"
    assert "steps" not in at_stop  # a seed 000 trace is never held to max_steps


@pytest.mark.asyncio
async def test_timeline_meters_follow_dialect_and_meters(ds: Datasette) -> None:
    gate = await get_json(ds, session_path("0903fa030c63-2", json_twin=True))
    assert {m["name"]: m["text"] for m in gate["at_stop"]["meters"]} == {
        "steps": "4 / 8", "writes": "3 / 2", "seconds": "4.5s / 45s",
    }
    native = await get_json(ds, session_path("bf-0005", json_twin=True))
    meters = {m["name"]: m for m in native["at_stop"]["meters"]}
    assert meters["rounds"]["measured"] is False  # this log has actions, no rounds
    assert meters["no_progress"]["text"] == "2 / 2"
    assert meters["no_progress"]["percent"] == 100


@pytest.mark.asyncio
async def test_timeline_html_highlights_the_stop(ds: Datasette) -> None:
    body = (await get(ds, session_path("0903fa030c63-4"))).text
    assert 'id="step-7" class="ledger-step ledger-stop ledger-in-retry-storm"' in body
    assert "The budget stopped here:" in body
    assert "Do not retry; raise BudgetExceeded" in body
    assert "steps 7 / 8" in body


@pytest.mark.asyncio
async def test_a_long_timeline_is_paged_and_jumps_to_a_step(ds: Datasette) -> None:
    first = await get_json(ds, session_path(data.LONG_SESSION, json_twin=True))
    assert (first["window"]["first"], first["window"]["last"]) == (1, 500)
    assert first["window"]["next_url"] == "?at=501"
    last = await get_json(ds, session_path(data.LONG_SESSION, "?at=1099", json_twin=True))
    assert (last["window"]["first"], last["window"]["last"]) == (1001, data.LONG_STEPS)
    assert last["window"]["previous_url"] == "?at=501"
    repeats = [next(m["value"] for m in s["meters"] if m["name"] == "no_progress")
               for s in last["steps"][-4:]]
    assert repeats == [1, 1, 2, 3]  # "same" on the last three steps


@pytest.mark.asyncio
async def test_session_ids_with_slashes_dots_and_markup_round_trip(ds: Datasette) -> None:
    found = await get_json(ds, session_path(data.XSS_SESSION, json_twin=True))
    assert found["session"]["session_id"] == data.XSS_SESSION
    kinds = {i["kind"] for i in found["incidents"]}
    assert kinds == {"retry_storm", "no_progress", "unknown_vendor"}


# --- Datasette's own pages -----------------------------------------------------------------


@pytest.mark.asyncio
async def test_cells_explain_themselves_in_datasette_tables(ds: Datasette) -> None:
    steps = (await get(ds, "/ledger/steps?session_id=bf-0005")).text
    assert 'class="ledger-badge"' in steps and "Safe action: Stop and ask for a narrower" in steps
    assert 'href="/ledger/-/sessions/bf-0005"' in steps
    assert '<code class="ledger-hash" title="7d99c1bec9b33899">7d99c1be</code>' in steps
    sessions = (await get(ds, "/ledger/sessions?session_id=811be5e93b95")).text
    assert 'href="/ledger/-/sessions/811be5e93b95?at=12#step-12">step 12</a>' in sessions
    assert 'title="12,040">12k</span>' in sessions
    row = (await get(ds, "/ledger/sessions/bf-0001")).text
    assert 'title="40">40s</span>' in row
    canned = (await get(ds, "/ledger/retry_storms")).text
    assert 'href="/ledger/-/sessions/bf-0005"' in canned


@pytest.mark.asyncio
async def test_menu_table_and_database_actions_link_the_dashboard(ds: Datasette) -> None:
    index = (await get(ds, "/")).text
    for page in PAGES:
        assert f'href="/ledger/-/{page}"' in index
    database = (await get(ds, "/ledger")).text
    assert "Dashboard: Overview" in database
    table = (await get(ds, "/ledger/sessions?task_class=docs")).text
    assert 'href="/ledger/-/overview?task_class=docs"' in table
    incidents = (await get(ds, "/ledger/incidents")).text
    assert 'href="/ledger/-/unknown-vendors"' in incidents


# --- safety --------------------------------------------------------------------------------

HOSTILE_PAGES = [
    "/ledger/-/overview",
    "/ledger/-/retry-storms",
    "/ledger/-/no-progress",
    "/ledger/-/unknown-vendors",
    session_path(data.XSS_SESSION),
    session_path("xss-2"),
    "/ledger/steps?_sort=idx&session_id__startswith=xss",
    "/ledger/incidents",
    "/ledger/sessions",
    "/ledger/unknown_vendor_stops",
]


@pytest.mark.asyncio
@pytest.mark.parametrize("path", HOSTILE_PAGES)
async def test_ledger_text_is_escaped(ds: Datasette, path: str) -> None:
    body = (await get(ds, path)).text
    for payload in data.PAYLOADS:
        assert payload not in body
    assert "<script>window.__pwned" not in body
    assert "<img src=x onerror" not in body
    assert 'href="javascript:' not in body.lower()
    assert "&lt;script&gt;window.__pwned" in body or "&lt;img src=x" in body or "&lt;svg" in body


@pytest.mark.asyncio
async def test_pages_respect_datasette_permissions(db_path: Path) -> None:
    ds = datasette(db_path, allow={"id": "admin"})
    for path in ["/ledger/-/overview", "/ledger/-/retry-storms.json", session_path("bf-0001")]:
        await get(ds, path, 403)
    cookies = {"ds_actor": ds.sign({"a": {"id": "admin"}}, "actor")}
    for path in ["/ledger/-/overview", session_path("bf-0001", json_twin=True)]:
        await get(ds, path, 200, cookies=cookies)
    index = (await get(ds, "/", 403)).text
    assert "/ledger/-/overview" not in index
