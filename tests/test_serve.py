"""`agent-ledger serve`: Datasette with our metadata; the canned queries answer the questions."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio
from datasette.app import Datasette

from ledger.serve import datasette_args, metadata_for


@pytest_asyncio.fixture
async def ds(sample_db: Path) -> Datasette:
    datasette = Datasette(files=[str(sample_db)], metadata=metadata_for(sample_db))
    await datasette.invoke_startup()
    return datasette


async def query(ds: Datasette, name: str, **params: str) -> list[dict]:
    response = await ds.client.get(f"/ledger/{name}.json", params={"_shape": "objects", **params})
    assert response.status_code == 200, response.text
    return response.json()["rows"]


@pytest.mark.asyncio
async def test_retry_storms(ds: Datasette) -> None:
    storms = await query(ds, "retry_storms")
    assert [(r["session_id"].split("-")[0], r["length"], r["blocked"]) for r in storms] == [
        (storms[0]["session_id"].split("-")[0], 5, 1), ("bf", 3, 0)]
    assert storms[1]["tool_or_intent"] == "migrate"
    assert [r["length"] for r in await query(ds, "retry_storms", min_length="4")] == [5]


@pytest.mark.asyncio
async def test_no_progress_runs(ds: Datasette) -> None:
    runs = await query(ds, "no_progress_runs")
    by_class = {(r["task_class"], r["repeated"]) for r in runs}
    assert by_class == {("bugfix", 4), ("refactor", 2)}
    seed = next(r for r in runs if r["task_class"] == "refactor")
    assert seed["observation"] == "patched api.py; tests still import getUser"
    assert (seed["tokens_spent"], seed["tool_calls_spent"]) == (200, 1)


@pytest.mark.asyncio
async def test_unknown_vendor_stops(ds: Datasette) -> None:
    (row,) = await query(ds, "unknown_vendor_stops")
    assert (row["vendor_stop"], row["occurrences"], row["sessions"], row["task_classes"]) == (
        "policy_hidden_v3", 1, 1, "bugfix")


@pytest.mark.asyncio
async def test_paid_path(ds: Datasette) -> None:
    rows = {r["task_class"]: r for r in await query(ds, "paid_path")}
    assert set(rows) == {"bugfix", "docs", "refactor"}
    assert "unknown_vendor" in rows["bugfix"]["reason_kinds"].split(",")
    assert "policy_hidden_v3" in rows["bugfix"]["reasons"]
    assert "no_terminal_signal" in rows["docs"]["reason_kinds"].split(",")
    assert rows["refactor"]["reason_kinds"] == "replay_mismatch"


@pytest.mark.asyncio
async def test_every_table_and_column_is_described(ds: Datasette, sample_db: Path) -> None:
    import sqlite_utils

    metadata = metadata_for(sample_db)["databases"]["ledger"]["tables"]
    db = sqlite_utils.Database(sample_db)
    for table in db.table_names():
        assert metadata.get(table, {}).get("description"), table
        if metadata[table].get("hidden"):
            continue
        described = metadata[table].get("columns", {})
        missing = [c.name for c in db[table].columns if c.name not in described]
        assert not missing, (table, missing)


@pytest.mark.asyncio
async def test_table_pages_render(ds: Datasette) -> None:
    for path in ("/", "/ledger", "/ledger/sessions", "/ledger/steps", "/ledger/stop_reasons"):
        response = await ds.client.get(path)
        assert response.status_code == 200, path


def test_metadata_follows_the_database_file_name(tmp_path: Path) -> None:
    metadata = metadata_for(tmp_path / "nightly-runs.db")
    assert "nightly-runs" in metadata["databases"]
    assert "ledger" not in metadata["databases"]


def test_serve_binds_to_localhost_by_default() -> None:
    args = datasette_args("x.db", "m.json", "127.0.0.1", 8001, None, [])
    assert args[args.index("--host") + 1] == "127.0.0.1"
