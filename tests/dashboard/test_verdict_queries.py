"""The verdict tables and canned queries in Datasette, with the packaged metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from datasette.app import Datasette

from ledger.views.serve import metadata_for

META = metadata_for("ledger.db")["databases"]["ledger"]


async def get_rows(db_path: Path, path: str) -> list[dict[str, Any]]:
    ds = Datasette(files=[str(db_path)], metadata=metadata_for(db_path))
    response = await ds.client.get(path)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.asyncio
async def test_paid_path_lists_the_classes_that_must_stay(sample_db: Path) -> None:
    found = await get_rows(sample_db, "/ledger/paid_path.json?_shape=array")
    assert [r["task_class"] for r in found] == ["bugfix", "docs", "refactor"]
    assert found[2]["reason_kinds"] == "replay_mismatch"


@pytest.mark.asyncio
async def test_verdicts_can_be_filtered_by_verdict(sample_db: Path) -> None:
    every = await get_rows(sample_db, "/ledger/verdicts.json?_shape=array")
    assert len(every) == 3
    ready = await get_rows(sample_db, "/ledger/verdicts.json?_shape=array&verdict=ready")
    assert ready == []


@pytest.mark.asyncio
async def test_parity_mismatches_spell_out_the_difference(sample_db: Path) -> None:
    found = await get_rows(sample_db, "/ledger/parity_mismatches.json?_shape=array")
    assert [(r["task_class"], r["recorded_stop"], r["count_diff"]) for r in found] == [
        ("bugfix", "unknown_vendor", 0), ("refactor", "max_rounds", 2)]
    assert found[1]["source_path"].endswith("split-monolith-module.json")
    only = await get_rows(
        sample_db, "/ledger/parity_mismatches.json?_shape=array&task_class=refactor")
    assert len(only) == 1


@pytest.mark.asyncio
async def test_meter_gaps_view_says_what_to_instrument(sample_db: Path) -> None:
    found = await get_rows(sample_db, "/ledger/meter_gaps.json?_shape=array")
    assert {r["task_class"] for r in found} == {"bugfix"}
    writes = next(r for r in found if r["cap"] == "max_writes")
    assert writes["instrument"].startswith("Classify every tool action")


PAGES = {
    "task_classes": META["tables"]["task_classes"],
    "session_parity": META["tables"]["session_parity"],
    "cap_coverage": META["tables"]["cap_coverage"],
    "meter_gaps": META["tables"]["meter_gaps"],
    "paid_path": META["queries"]["paid_path"],
    "verdicts": META["queries"]["verdicts"],
    "parity_mismatches": META["queries"]["parity_mismatches"],
}


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.asyncio
async def test_every_page_shows_its_description(sample_db: Path, page: str) -> None:
    ds = Datasette(files=[str(sample_db)], metadata=metadata_for(sample_db))
    response = await ds.client.get(f"/ledger/{page}")
    assert response.status_code == 200
    opening = " ".join(PAGES[page]["description"].split()[:4])
    assert opening in response.text


@pytest.mark.parametrize("page", ["paid_path", "verdicts", "parity_mismatches", "meter_gaps"])
def test_the_description_of_each_view_tells_the_user_what_to_do(page: str) -> None:
    words = PAGES[page]["description"].lower()
    assert any(verb in words for verb in ("map ", "instrument", "move ", "set the cap"))
