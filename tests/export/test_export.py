"""``agent-ledger export`` (ledger/export/): the Parquet tree, its contract, incremental
and atomic writes."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from ledger.cli import cli
from ledger.export import parquet
from ledger.export.contract import NULL_PART, day_of, part_value
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.export.conftest import run_export
from tests.helpers import FIXTURES, ROOT, rows

SPANS = FIXTURES / "otlp" / "genai_spans.jsonl"
LOGS = FIXTURES / "otlp" / "agent_logs.jsonl"


def files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def test_the_tree_is_partitioned_by_day_and_host(exported: Path) -> None:
    got = files(exported)
    assert "stop_reasons/part.parquet" in got
    assert "task_classes/host=laptop-1/part.parquet" in got
    assert "sessions/day=2026-01-01/host=laptop-1/part.parquet" in got
    for table in ("sessions", "steps", "incidents"):
        days = {p.split("/")[1] for p in got if p.startswith(f"{table}/")}
        assert days == {p.split("/")[1] for p in got if p.startswith("sessions/")}
    assert not [p for p in got if not p.endswith("/part.parquet")]  # no temporary file left


@pytest.mark.parametrize("table", ["sessions", "steps", "incidents", "task_classes",
                                   "stop_reasons"])
def test_each_file_has_its_table_columns_and_declared_types(
    table: str, ledger_db: Path, exported: Path
) -> None:
    conn = sqlite3.connect(ledger_db)
    declared = [(name, kind) for _, name, kind, *_ in conn.execute(f"pragma table_xinfo({table})")]
    conn.close()
    arrow = {"INTEGER": "int64", "REAL": "double", "TEXT": "string", "": "string"}
    expected = [(name, arrow[kind]) for name, kind in declared]
    for path in sorted((exported / table).rglob("part.parquet")):
        got = [(f.name, str(f.type)) for f in pq.read_schema(path)]
        assert got == expected, path


def test_documented_columns_match_the_files(exported: Path) -> None:
    """docs/export.md lists every column of every table: the contract."""
    text = (ROOT / "docs" / "export.md").read_text()
    for table in ("sessions", "steps", "incidents", "task_classes", "stop_reasons"):
        path = next((exported / table).rglob("part.parquet"))
        missing = [f.name for f in pq.read_schema(path) if f"`{f.name}`" not in text]
        assert missing == [], table


@pytest.mark.parametrize(("started_at", "day"), [
    ("2026-01-01T23:59:59Z", "2026-01-01"), (None, NULL_PART), ("", NULL_PART),
])
def test_the_day_of_a_session(started_at: str | None, day: str) -> None:
    assert day_of(started_at) == day


@pytest.mark.parametrize(("host", "value"), [
    ("laptop-1", "laptop-1"), ("a/b", "a_b"), ("..", NULL_PART), ("", NULL_PART),
    ("dev.example.com", "dev.example.com"),
])
def test_host_names_are_safe_path_segments(host: str, value: str) -> None:
    assert part_value(host) == value


def test_only_changed_partitions_are_rewritten(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(SPANS, logs / "spans.jsonl")
    other = tmp_path / "later"
    other.mkdir()
    db, out = tmp_path / "ledger.db", tmp_path / "out"
    ingest(db, [logs], Options(host="h"))
    assert run_export(db, out, "h").partitions == 1
    before = {p: p.stat().st_mtime_ns for p in out.rglob("day=*/*/part.parquet")}
    again = run_export(db, out, "h")
    assert (again.partitions, again.sessions) == (0, 0)  # (the two small tables are rewritten)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("day=*/*/part.parquet")} == before
    # A second file, another day: only its partition is written.
    shutil.copy(LOGS, other / "logs.jsonl")
    text = (other / "logs.jsonl").read_text().replace('"17672256', '"17673120')  # a day later
    (other / "logs.jsonl").write_text(text)
    ingest(db, [other], Options(host="h"))
    later = run_export(db, out, "h")
    assert (later.partitions, later.sessions) == (1, 2)
    assert "sessions/day=2026-01-02/host=h/part.parquet" in files(out)
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())  # the first day's
    marks = rows(db, "select out, partitions, sessions from exports")
    assert marks == [{"out": str(out.resolve()), "partitions": 1, "sessions": 2}]


def test_a_crash_mid_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, out = tmp_path / "ledger.db", tmp_path / "out"
    ingest(db, [SPANS])
    run_export(db, out, "h")
    target = next(out.rglob("sessions/*/*/part.parquet"))
    old = target.read_bytes()

    def crash(table, where, **_):
        where.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(parquet.pq, "write_table", crash)
    with pytest.raises(OSError, match="disk full"):
        run_export(db, out, "h", full=True)
    assert target.read_bytes() == old
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_full_removes_partitions_whose_sessions_are_gone(tmp_path: Path) -> None:
    db, out = tmp_path / "ledger.db", tmp_path / "out"
    ingest(db, [SPANS])
    run_export(db, out, "h")
    stale = out / "sessions" / "day=2020-01-01" / "host=h"
    stale.mkdir(parents=True)
    (stale / "part.parquet").write_bytes(b"old")
    assert run_export(db, out, "h", full=True).removed == 1
    assert not stale.exists()


def test_the_command(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    ingest(db, [SPANS])
    result = CliRunner().invoke(cli, ["export", str(db), str(tmp_path / "out"), "--host", "x"])
    assert result.exit_code == 0, result.output
    assert result.output == "1 partitions written (2 sessions); 1 sources up to date\n"


def test_without_the_extra_it_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ledger.db"
    ingest(db, [SPANS])
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("ledger.export.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    result = CliRunner().invoke(cli, ["export", str(db), str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "pip install 'agent-ledger[export]'" in result.output
    assert "Traceback" not in result.output


def test_three_hosts_export_into_one_tree_read_as_one(tmp_path: Path) -> None:
    """Each host ingests its own logs (``--host``) and exports into the same folder; a reader
    of the tree sees every host's sessions once, and a full export of one host leaves the
    others' partitions alone."""
    out = tmp_path / "shared"
    inputs = {"host-a": SPANS, "host-b": LOGS, "host-c": FIXTURES / "real-agent-logs"}
    expected = {}
    for host, path in inputs.items():
        db = tmp_path / f"{host}.db"
        result = CliRunner().invoke(cli, ["ingest", str(db), str(path), "--host", host])
        assert result.exit_code == 0, result.output
        assert {r["host"] for r in rows(db, "select host from sources")} == {host}
        expected[host] = sorted(r["session_id"] for r in rows(db, "select * from sessions"))
        result = CliRunner().invoke(cli, ["export", str(db), str(out)])
        assert result.exit_code == 0, result.output
    assert run_export(tmp_path / "host-a.db", out, None, full=True).removed == 0
    got = duckdb.sql(
        f"select host, session_id from read_parquet('{out}/sessions/**/*.parquet', "
        "hive_partitioning = true) order by host, session_id").fetchall()
    assert got == [(h, s) for h in sorted(expected) for s in expected[h]]
    hosts = {p.name for p in (out / "task_classes").iterdir()}
    assert hosts == {"host=host-a", "host=host-b", "host=host-c"}


def test_an_export_after_a_migration_added_columns_rewrites_every_partition(
    tmp_path: Path,
) -> None:
    """A tree written before migration 015 lacks ``cost_nusd``: the watermark remembers the
    columns written, and the next export writes every partition again, with them."""
    db, out = tmp_path / "ledger.db", tmp_path / "out"
    ingest(db, [SPANS], Options(host="h"))
    run_export(db, out, "h")
    conn = sqlite3.connect(db)
    (marks,) = conn.execute("select sources from exports").fetchone()
    older = json.loads(marks)
    older[parquet.COLUMNS_KEY] = older[parquet.COLUMNS_KEY].replace(', "cost_nusd"', "")
    conn.execute("update exports set sources = ?", (json.dumps(older),))
    conn.commit()
    conn.close()
    assert run_export(db, out, "h").partitions == 1
    assert run_export(db, out, "h").partitions == 0


def _foreign(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("create table mine (x)")
    conn.close()


@pytest.mark.parametrize(
    ("make_db", "out", "message"),
    [
        (_foreign, "out", "not an agent-ledger database (no incidents, sessions, sources, steps"),
        (lambda p: p.write_bytes(b""), "out", "not an agent-ledger database"),
        (lambda p: p.write_bytes(b"not sqlite" * 20), "out", "not a SQLite database"),
        (None, "o\udce9", "o\\xe9: the path is not valid UTF-8"),
    ],
    ids=["foreign-sqlite", "empty-file", "not-sqlite", "out-not-utf8"],
)
def test_the_command_refuses_bad_input_and_changes_nothing(
    tmp_path: Path, make_db: Any, out: str, message: str
) -> None:
    """Before: a foreign SQLite file (or an empty one) was migrated into a ledger, 20 tables
    added, and 'exported' with exit 0; an OUT not valid UTF-8 was a traceback."""
    db = tmp_path / "ledger.db"
    if make_db is None:
        ingest(db, [SPANS])
    else:
        make_db(db)
    before = db.read_bytes()
    result = CliRunner().invoke(cli, ["export", str(db), str(tmp_path / out)])
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output
    assert db.read_bytes() == before
    assert not (tmp_path / out).exists()


@pytest.mark.parametrize(
    "lose",
    [
        lambda out: shutil.rmtree(out),
        lambda out: next(out.glob("steps/*/*/part.parquet")).unlink(),
    ],
    ids=["folder-emptied", "one-file-deleted"],
)
def test_files_gone_from_the_folder_are_written_again(tmp_path: Path, lose: Any) -> None:
    """Before: the watermark said every source was exported, so the next export wrote none
    of the lost partitions (an export folder deleted, or moved to a new disk, stayed empty)."""
    db = tmp_path / "ledger.db"
    ingest(db, [SPANS])
    out = tmp_path / "out"
    run_export(db, out, None)
    before = files(out)
    lose(out)
    run_export(db, out, None)
    assert files(out) == before
