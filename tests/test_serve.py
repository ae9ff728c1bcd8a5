"""agent-ledger serve: our metadata (plus the user's), the plugins, and a read-only database."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.app import Datasette

from ledger.cli import cli
from ledger.serve import MetadataError, merge, metadata_for, read_metadata


def test_metadata_follows_the_database_file_name(tmp_path: Path) -> None:
    metadata = metadata_for(tmp_path / "night-42.db")
    assert "night-42" in metadata["databases"] and "ledger" not in metadata["databases"]
    assert metadata["plugins"]["ledger_dashboard"] == {
        "retry_storm_threshold": 3, "read_only": True,
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


def test_serve_binds_to_localhost_by_default() -> None:
    serve = next(c for c in cli.commands.values() if c.name == "serve")
    host = next(p for p in serve.params if p.name == "host")
    assert host.default == "127.0.0.1"


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
