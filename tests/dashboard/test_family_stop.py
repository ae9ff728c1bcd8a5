"""The parent's session page shows where its family, counted together, stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from datasette.app import Datasette
from msgspec.structs import replace

from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.views.serve import metadata_for
from tests.dashboard.test_sub_agents import PARENT, page, reply, said
from tests.live.test_hook import NO_CAPS


async def family_page(tmp_path: Path, on: bool) -> dict[str, Any]:
    side = {"isSidechain": True}
    lines = [said(1, "go"), reply(2, 5), said(3, "task a", parentUuid=None, **side),
             reply(5, 100, parentUuid="u3", **side), reply(7, 100, parentUuid="u5", **side),
             reply(8, 5)]
    log = tmp_path / "p-1.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    db = tmp_path / "ledger.db"
    options = Options(dialect="claude-code", budget=replace(NO_CAPS, max_rounds=3),
                      subagents_count_in_parent=on)
    ingest(db, [log], options)
    ds = Datasette(files=[str(db)], metadata=metadata_for(db))
    data = (await ds.client.get(page(PARENT, twin=True))).json()
    html = (await ds.client.get(page(PARENT))).text
    return {"data": data, "html": html}


@pytest.mark.asyncio
async def test_the_family_stop_is_on_the_parents_page(tmp_path: Path) -> None:
    got = await family_page(tmp_path, on=True)
    stop = got["data"]["family_stop"]
    assert (stop["stop_reason"], stop["session_id"], stop["members"]) == (
        "max_rounds", f"{PARENT}:sidechain-u3", 2)  # the family's third round is the sub-agent's
    assert stop["url"].endswith(f"?at={stop['idx']}#step-{stop['idx']}")
    assert got["data"]["session"]["stop_reason"] == "task_complete"
    assert "Counted together" in got["html"]


@pytest.mark.asyncio
async def test_with_the_key_off_there_is_none(tmp_path: Path) -> None:
    got = await family_page(tmp_path, on=False)
    assert got["data"]["family_stop"] is None
    assert "Counted together" not in got["html"]
