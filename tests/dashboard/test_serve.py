"""`agent-ledger serve`: Datasette with our metadata; the canned queries answer the questions."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest
import pytest_asyncio
from click.testing import CliRunner
from datasette.app import Datasette

from ledger.cli import cli
from ledger.views.serve import (
    MetadataError,
    datasette_args,
    merge,
    metadata_for,
    read_metadata,
)
from tests.helpers import SERVE_START_S, start_serving


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
    assert 'href="/nightly-runs/paid_path"' in metadata["description_html"]
    assert 'href="/ledger/' not in metadata["description_html"]


def test_serve_binds_to_localhost_by_default() -> None:
    args = datasette_args("x.db", "m.json", "127.0.0.1", 8001, None, [])
    assert args[args.index("--host") + 1] == "127.0.0.1"


def test_the_dashboard_is_configured_read_only_with_security_headers(tmp_path: Path) -> None:
    metadata = metadata_for(tmp_path / "night-42.db")
    assert metadata["plugins"]["ledger_dashboard"] == {
        "retry_storm_threshold": 3, "read_only": True, "security_headers": True,
    }


@pytest.mark.parametrize(
    ("base", "extra", "merged"),
    [
        ({"a": 1}, {"b": 2}, {"a": 1, "b": 2}),
        ({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}}, {"a": {"x": 1, "y": 3}}),
        ({"a": {"x": 1}}, {"a": [1]}, {"a": [1]}),
        ({"plugins": {"ours": {"t": 3}}}, {"plugins": {"theirs": {"on": True}}},
         {"plugins": {"ours": {"t": 3}, "theirs": {"on": True}}}),
    ],
)
def test_merge(base: dict, extra: dict, merged: dict) -> None:
    assert merge(base, extra) == merged


def test_extra_metadata_is_merged_over_ours(tmp_path: Path) -> None:
    extra = tmp_path / "auth.yml"
    extra.write_text("allow:\n  id: admin\nplugins:\n  ledger_dashboard:\n"
                     "    retry_storm_threshold: 4\n")
    metadata = metadata_for(tmp_path / "ledger.db", [extra])
    assert metadata["allow"] == {"id": "admin"}
    assert metadata["plugins"]["ledger_dashboard"]["retry_storm_threshold"] == 4
    assert metadata["plugins"]["ledger_dashboard"]["read_only"] is True
    assert "queries" in metadata["databases"]["ledger"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("- a list\n", "must be a mapping"), ("a: [unclosed\n", "cannot read metadata")],
)
def test_bad_metadata_files_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yml"
    path.write_text(text)
    with pytest.raises(MetadataError, match=message):
        read_metadata(path)
    result = CliRunner().invoke(cli, ["serve", str(tmp_path / "x.db"), "--metadata", str(path)])
    assert result.exit_code == 2  # x.db does not exist: click refuses first
    (tmp_path / "x.db").touch()
    result = CliRunner().invoke(cli, ["serve", str(tmp_path / "x.db"), "--metadata", str(path)])
    assert result.exit_code == 1 and message in result.output


def test_serve_get_prints_a_dashboard_page(sample_db: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", str(sample_db), "--get", "/ledger/-/overview.json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["totals"]["sessions"] == 15


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.asyncio
async def test_the_database_is_opened_read_only(sample_db: Path) -> None:
    sqlite3.connect(sample_db).execute("pragma wal_checkpoint(truncate)").connection.close()
    before = digest(sample_db)
    ds = Datasette(files=[str(sample_db)], metadata=metadata_for(sample_db))
    for path in ["/ledger/-/overview", "/ledger/-/retry-storms", "/ledger/sessions"]:
        assert (await ds.client.get(path)).status_code == 200
    db = ds.get_database("ledger")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        await db.execute_write("delete from sessions")
    response = await ds.client.get("/ledger.json?sql=delete+from+sessions")
    assert response.status_code == 400
    assert digest(sample_db) == before
    assert (await db.execute("select count(*) from sessions")).rows[0][0] == 15


def test_serve_turns_suggested_facets_off() -> None:
    args = datasette_args("x.db", "m.json", "127.0.0.1", 8001, None, [])
    i = args.index("--setting")
    assert args[i: i + 3] == ["--setting", "suggest_facets", "off"]


@pytest.mark.parametrize(("stop", "code"), [
    (signal.SIGTERM, 128 + signal.SIGTERM),  # kill, a service manager
    (signal.SIGINT, 0),  # Ctrl-C
])
def test_a_stopped_server_leaves_no_temporary_folder(
    sample_db: Path, tmp_path: Path, stop: signal.Signals, code: int
) -> None:
    """The metadata written for Datasette goes with the server however it is stopped
    (uvicorn raises SIGTERM again after its graceful shutdown: Python's default handler
    then ended the process before the folder was removed)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    with (tmp_path / "serve.log").open("w") as log:
        process, _ = start_serving(sample_db, log, env={**os.environ, "TMPDIR": str(temp)})
        assert [p.name for p in temp.iterdir()][0].startswith("agent-ledger-")
        process.send_signal(stop)
        assert process.wait(timeout=SERVE_START_S) == code
    assert list(temp.iterdir()) == []
