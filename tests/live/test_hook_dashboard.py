"""The live brake's denials, marked in the session timeline that ``serve`` shows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from datasette.app import Datasette
from datasette.utils import tilde_encode

from ledger.core.budget import Budget
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.views.serve import metadata_for
from tests.helpers import REAL_LOGS, rows
from tests.live.test_hook import drive


@pytest.mark.asyncio
async def test_denied_calls_are_marked_on_their_steps(tmp_path: Path) -> None:
    options = Options(budget=Budget(max_steps=3))
    source = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"
    transcript, decisions = drive(source, options, tmp_path)
    db = tmp_path / "ledger.db"  # the hook's database, then ingest's too
    ingest(db, [transcript], options)
    denied = [d for d in decisions if d["decision"] == "deny"]
    session = denied[0]["session_id"]
    ds = Datasette(files=[str(db)], metadata=metadata_for(db))
    path = f"/ledger/-/sessions/{tilde_encode(session)}"
    data = (await ds.client.get(path + ".json")).json()
    marked = {s["idx"] for s in data["steps"] if s["denied"]}
    shown = {s["idx"] for s in data["steps"]}
    assert marked == {d["event_idx"] for d in denied} & shown
    first_call = rows(
        db, "select min(s.idx) as idx from steps s join sessions x using (session_id) "
        "where s.session_id = ? and s.idx >= x.stop_at and s.action in "
        "('think', 'read', 'write', 'retry') and s.tool is not 'api'", (session,))[0]["idx"]
    assert min(marked) == first_call  # ingest's stop, where the hook first denied
    first = next(s for s in data["steps"] if s["idx"] == min(marked))
    assert first["action"] in {"think", "read", "write", "retry"}
    assert first["denied"]["stop_reason"] == "max_steps"
    body = (await ds.client.get(path)).text
    assert body.count("denied by the hook") == len(marked)
    assert 'class="ledger-tag ledger-tag-denied"' in body


@pytest.mark.asyncio
async def test_the_overview_shows_the_sessions_the_hook_is_watching(tmp_path: Path) -> None:
    """Live sessions: the sessions with decisions in the last minutes, their calls checked,
    denied calls, last decision and counters; linked to the timeline once ingested."""
    options = Options(budget=Budget(max_steps=3))
    source = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"
    transcript, decisions = drive(source, options, tmp_path)
    db = tmp_path / "ledger.db"
    ds = Datasette(files=[str(db)], metadata=metadata_for(db))
    live = (await ds.client.get("/ledger/-/overview.json")).json()["live"]
    by_session = {r["session_id"]: r for r in live["sessions"]}
    expected = {d["session_id"] for d in decisions}
    assert set(by_session) == expected
    for sid, row in by_session.items():
        mine = [d for d in decisions if d["session_id"] == sid]
        assert row["decisions"] == len(mine)
        assert row["denied"] == sum(d["decision"] == "deny" for d in mine)
        assert row["decision"] == mine[-1]["decision"]
        assert row["counters"]["steps"] == json.loads(mine[-1]["counters"])["steps"]
        assert row["timeline_url"] is None  # not ingested yet
    assert any(r["denied"] for r in by_session.values())
    body = (await ds.client.get("/ledger/-/overview")).text
    assert body.count('class="ledger-live-session') == len(expected)
    assert "(not ingested yet)" in body

    ingest(db, [transcript], options)
    ds = Datasette(files=[str(db)], metadata=metadata_for(db))
    live = (await ds.client.get("/ledger/-/overview.json")).json()["live"]
    for row in live["sessions"]:
        url = f"/ledger/-/sessions/{tilde_encode(row['session_id'])}"
        assert row["timeline_url"].startswith(url)
    body = (await ds.client.get("/ledger/-/overview")).text
    assert "(not ingested yet)" not in body


@pytest.mark.asyncio
async def test_decisions_older_than_the_window_are_not_live(tmp_path: Path) -> None:
    options = Options(budget=Budget(max_steps=3))
    source = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"
    drive(source, options, tmp_path)
    db = tmp_path / "ledger.db"
    conn = sqlite3.connect(db)
    conn.execute("update hook_decisions set at = '2026-01-01T00:00:00+00:00'")
    conn.commit()
    conn.close()
    ds = Datasette(files=[str(db)], metadata=metadata_for(db))
    assert (await ds.client.get("/ledger/-/overview.json")).json()["live"]["sessions"] == []
    body = (await ds.client.get("/ledger/-/overview")).text
    assert "No tool call checked by the hook in the last 30 minutes" in body
