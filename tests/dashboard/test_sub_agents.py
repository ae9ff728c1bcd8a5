"""The session page totals a session's sub-agents (issue 18 item 5): each old-format inline
sub-agent and each ``agentId`` file is a session linked to its parent, and the parent's page
lists them and adds their counts to its own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from datasette.app import Datasette
from datasette.utils import tilde_encode

from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.views.serve import metadata_for

PARENT = "p-1"


def line(kind: str, n: int, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "sessionId": PARENT, "uuid": f"u{n}", "cwd": "/work/shop",
            "timestamp": f"2026-02-10T21:00:{n:02d}.000Z", **fields}


def said(n: int, text: str, **fields: Any) -> dict[str, Any]:
    return line("user", n, message={"role": "user", "content": text}, **fields)


def reply(n: int, out: int, **fields: Any) -> dict[str, Any]:
    message = {"id": f"m{n}", "model": "claude-opus-4-6", "role": "assistant",
               "content": [{"type": "text", "text": "ok"}], "stop_reason": None,
               "usage": {"input_tokens": 10, "output_tokens": out}}
    return line("assistant", n, message=message, requestId=f"r{n}", **fields)


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Datasette:
    folder = tmp_path_factory.mktemp("subagents")
    side = {"isSidechain": True}
    lines = [said(1, "go"), reply(2, 5),
             said(3, "task a", parentUuid=None, **side), said(4, "task b", parentUuid=None, **side),
             reply(5, 100, parentUuid="u3", **side), reply(6, 200, parentUuid="u4", **side),
             reply(7, 100, parentUuid="u5", **side), reply(8, 5)]
    log = folder / "p-1.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    db = folder / "ledger.db"
    ingest(db, [log], Options(dialect="claude-code"))
    return Datasette(files=[str(db)], metadata=metadata_for(db))


def page(session: str, twin: bool = False) -> str:
    return f"/ledger/-/sessions/{tilde_encode(session)}{'.json' if twin else ''}"


@pytest.mark.asyncio
async def test_the_parent_totals_its_sub_agents(ds: Datasette) -> None:
    data = (await ds.client.get(page(PARENT, twin=True))).json()
    found = data["sub_agents"]
    assert [(r["session_id"], r["rounds"], r["output_tokens"]) for r in found["rows"]] == [
        (f"{PARENT}:sidechain-u3", 2, 200), (f"{PARENT}:sidechain-u4", 1, 200)]
    assert (found["totals"]["sessions"], found["totals"]["rounds"],
            found["totals"]["output_tokens"], found["totals"]["input_tokens"]) == (2, 3, 400, 30)
    assert (found["own"]["rounds"], found["own"]["output_tokens"]) == (2, 10)
    assert (found["with_sub_agents"]["rounds"], found["with_sub_agents"]["output_tokens"],
            found["with_sub_agents"]["input_tokens"]) == (5, 410, 50)


@pytest.mark.asyncio
async def test_the_page_shows_the_totals_and_links_both_ways(ds: Datasette) -> None:
    body = (await ds.client.get(page(PARENT))).text
    assert 'id="sub-agents"' in body and "Sub-agents (2)" in body
    assert f'href="{page(PARENT + ":sidechain-u3")}"' in body
    child = (await ds.client.get(page(f"{PARENT}:sidechain-u4"))).text
    assert "parent session" in child and f'href="{page(PARENT)}"' in child
    assert 'id="sub-agents"' not in child


@pytest.mark.asyncio
async def test_a_session_without_sub_agents_has_none(ds: Datasette) -> None:
    data = (await ds.client.get(page(f"{PARENT}:sidechain-u3", twin=True))).json()
    assert data["sub_agents"] is None


@pytest.mark.asyncio
async def test_the_canned_query_totals_each_parent(ds: Datasette) -> None:
    found = (await ds.client.get("/ledger/sub_agent_totals.json?_shape=array&task_class=")).json()
    assert [(r["session_id"], r["sub_agents"], r["rounds"], r["sub_agent_rounds"],
             r["rounds_together"], r["output_tokens_together"]) for r in found] == [
        (PARENT, 2, 2, 3, 5, 410)]
