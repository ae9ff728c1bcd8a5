"""Money on the dashboard: the overview's spend, each run's cost, the timeline against
``max_cost`` and the paid path's share of spend (see spend_data.py for the figures)."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from datasette.app import Datasette

from ledger_dashboard import cells, charts
from tests.dashboard import spend_data
from tests.dashboard.test_pages import datasette, get, get_json, session_path


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return spend_data.build(tmp_path_factory.mktemp("spend"))


@pytest.fixture
def ds(db_path: Path) -> Datasette:
    return datasette(db_path)


@pytest.mark.asyncio
async def test_the_overview_adds_up_the_spend(ds: Datasette) -> None:
    spend = (await get_json(ds, "/ledger/-/overview.json"))["spend"]
    assert (spend["kept"], spend["currency"]) == (True, "USD")
    assert (spend["total_usd"], spend["after_stop_usd"]) == (2.0, 0.5)
    assert (spend["priced_sessions"], spend["sessions"]) == (2, 3)
    assert [(r["task_class"], r["cost_usd"], r["share"], r["priced_sessions"], r["sessions"])
            for r in spend["by_task_class"]] == [("docs", 0.5, 0.25, 1, 2),
                                                 ("refactor", 1.5, 0.75, 1, 1)]
    assert [(r["stop_reason"], r["cost_usd"], r["after_stop_usd"])
            for r in spend["by_stop_reason"]] == [("max_cost", 1.5, 0.5),
                                                  ("task_complete", 0.5, 0.0)]
    assert spend["over_time"] == {"unit": "day", "periods": [
        {"period": "2026-11-27", "cost_usd": 1.5}, {"period": "2026-11-28", "cost_usd": 0.5}]}


@pytest.mark.asyncio
@pytest.mark.parametrize(("query", "total", "classes"), [
    ("?task_class=docs", 0.5, ["docs"]),
    ("?stop_reason=max_cost", 1.5, ["refactor"]),
    ("?since=2026-11-28", 0.5, ["docs"]),
])
async def test_the_spend_follows_the_filters(
    ds: Datasette, query: str, total: float, classes: list[str]
) -> None:
    spend = (await get_json(ds, f"/ledger/-/overview.json{query}"))["spend"]
    assert spend["total_usd"] == total
    assert [r["task_class"] for r in spend["by_task_class"]] == classes


@pytest.mark.asyncio
async def test_each_paid_path_class_shows_its_share_of_the_spend(ds: Datasette) -> None:
    paid = (await get_json(ds, "/ledger/-/overview.json"))["paid_path"]
    assert {r["task_class"]: (r["cost_usd"], r["share_of_spend"]) for r in paid["rows"]} == {
        "docs": (0.5, 0.25), "refactor": (1.5, 0.75)}
    body = (await get(ds, "/ledger/-/overview")).text
    assert "75.0%" in body and "$1.50" in body and 'title="1.5 USD"' in body


@pytest.mark.asyncio
@pytest.mark.parametrize(("page", "kind", "cost"), [
    ("retry-storms", "retry_storm", 0.0), ("no-progress", "no_progress", 1.0)])
async def test_each_run_shows_what_it_cost(
    ds: Datasette, page: str, kind: str, cost: float
) -> None:
    found = await get_json(ds, f"/ledger/-/{page}.json")
    assert [(r["kind"], r["cost_usd"]) for r in found["rows"]] == [(kind, cost)]
    assert found["cost_usd"] == cost
    assert "together they cost" in (await get(ds, f"/ledger/-/{page}")).text


@pytest.mark.asyncio
async def test_the_timeline_draws_the_spend_against_max_cost(ds: Datasette) -> None:
    found = await get_json(ds, session_path(spend_data.STOPPED, json_twin=True))
    (cost,) = [m for m in found["at_stop"]["meters"] if m["name"] == "cost"]
    assert (cost["value"], cost["cap"], cost["percent"], cost["text"]) == (
        1.0, 1.0, 100.0, "$1.00 / $1.00")
    running = [next(m["value"] for m in s["meters"] if m["name"] == "cost")
               for s in found["steps"]]
    assert running == [None, 0.5, 1.0, 1.5, 1.5, 1.5, 1.5]
    body = (await get(ds, session_path(spend_data.STOPPED))).text
    assert "of a <code>max_cost</code> of" in body and "$1.50" in body


@pytest.mark.asyncio
async def test_a_database_without_money_hides_the_spend(tmp_path: Path) -> None:
    """No session with a cost: the section says so, and draws nothing."""
    from tests import dashboard_data
    found = await get_json(datasette(dashboard_data.build(tmp_path)), "/ledger/-/overview.json")
    assert (found["spend"]["priced_sessions"], found["spend"]["total_usd"]) == (0, 0.0)


@pytest.mark.parametrize(("amount", "text"), [
    (0, "$0.00"), (1234.5678, "$1,234.57"), (1.005, "$1.00"), (0.0123456, "$0.0123"),
    (0.5, "$0.50"), (0.125, "$0.125"), (0.09256625, "$0.0926"),
    (0.00001, "<$0.0001"), (None, ""),
])
def test_money_is_rounded_for_reading_and_exact_in_its_title(amount, text) -> None:
    shown = cells.money(amount)
    assert html.escape(text) in str(shown)
    if amount is not None:
        assert f'title="{float(amount)!r} USD"' in shown


def test_spend_over_more_than_the_day_limit_is_summed_by_month() -> None:
    days = [{"day": f"2026-{m:02d}-{d:02d}", "cost_usd": 0.5} for m in (1, 2, 3, 4, 5)
            for d in range(1, 29)]
    unit, periods = charts.spend_by_period(days)
    assert unit == "month" and periods[0] == {"period": "2026-01", "cost_usd": 14.0}


@pytest.mark.asyncio
async def test_the_spend_query_sums_per_class_and_source(ds: Datasette) -> None:
    found = await get_json(ds, "/ledger/spend.json?task_class=&_shape=array")
    assert [(r["task_class"], r["sessions"], r["priced_sessions"], r["usd"], r["usd_after_stop"])
            for r in found] == [("refactor", 1, 1, 1.5, 0.5), ("docs", 2, 1, 0.5, None)]
