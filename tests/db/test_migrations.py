"""The database records its schema version and migrates older ones in place, in order.

``tests/fixtures/schema-001.db`` was made by agent-ledger at commit 843aee9 (schema 001, the
last version before migration 002), from its own checkout:
``python -m ledger ingest schema-001.db sample_ledgers`` (relative paths), then VACUUM.
"""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.cli import cli
from ledger.db import connection, migrations, verdict_tables
from ledger.ingest.ingester import ingest
from tests.helpers import FIXTURES, ROOT, dump, scratch_dir

OLD = FIXTURES / "schema-001.db"


def raw(db_path: Path, sql: str) -> list[tuple]:
    """Read without agent-ledger (so without migrating)."""
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def columns(db_path: Path) -> dict[str, list[str]]:
    """Every table's columns (but _migrations), as the file holds them."""
    tables = [t for (t,) in raw(db_path, "select name from sqlite_master where type = 'table' "
                                         "and name != '_migrations' order by name")]
    return {t: [c[1] for c in raw(db_path, f"pragma table_info([{t}])")] for t in tables}


def contents(db_path: Path, only: dict[str, list[str]] | None = None) -> dict[str, list[tuple]]:
    """Every row of every table (or of the tables and columns in ``only``)."""
    tables = only or columns(db_path)
    return {
        table: sorted(raw(db_path, f"select {', '.join(f'[{c}]' for c in names)} "
                                   f"from [{table}]"), key=repr)
        for table, names in tables.items()
    }


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    target = tmp_path / "ledger.db"
    shutil.copy(OLD, target)
    return target


def test_the_fixture_is_a_schema_001_database(old_db: Path) -> None:
    assert raw(old_db, "pragma user_version") == [(1,)]
    assert [n for (n,) in raw(old_db, "select name from _migrations")] == ["001_initial"]
    assert raw(old_db, "select count(*) from steps") == [(80,)]


def test_an_old_database_is_migrated_in_place_with_its_data_intact(old_db: Path) -> None:
    """Every row and column it had is still there; later migrations add tables and columns."""
    old_columns = columns(old_db)
    before = contents(old_db)
    db = connection.connect(old_db)
    db.conn.close()
    assert raw(old_db, "pragma user_version") == [(migrations.SCHEMA_VERSION,)]
    names = [n for (n,) in raw(old_db, "select name from _migrations order by rowid")]
    assert names == [name for name, _ in migrations.MIGRATIONS]
    indexes = {n for (n,) in raw(old_db, "select name from sqlite_master where type='index'")}
    assert {"idx_sources_path", "idx_sources_fingerprint"} <= indexes
    assert contents(old_db, old_columns) == before
    new_columns = columns(old_db)
    assert all(set(old_columns[t]) <= set(new_columns[t]) for t in old_columns)


def test_a_migrated_database_reingests_as_a_fresh_one(
    old_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its sources are recognised (relative paths, same fingerprints); what changed since
    (the fold version) is read again, once, and nothing is doubled."""
    monkeypatch.chdir(ROOT)
    ingest(old_db, ["sample_ledgers"])
    fresh = tmp_path / "fresh.db"
    ingest(fresh, ["sample_ledgers"])
    assert dump(old_db) == dump(fresh)
    assert ingest(old_db, ["sample_ledgers"]).steps == 0


def test_migrations_are_applied_in_order_once(
    old_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    applied: list[str] = []
    extra = [(f"9{n}_test", lambda db, n=n: applied.append(f"9{n}_test")) for n in range(3)]
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, *extra))
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", len(migrations.MIGRATIONS))
    connection.connect(old_db).conn.close()
    connection.connect(old_db).conn.close()
    assert applied == ["90_test", "91_test", "92_test"]
    assert raw(old_db, "pragma user_version") == [(len(migrations.MIGRATIONS),)]


def test_a_failing_migration_changes_nothing(
    old_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(db: object) -> None:
        raise sqlite3.OperationalError("boom")

    before = contents(old_db)
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, ("99_broken", broken)))
    monkeypatch.setattr(migrations, "SCHEMA_VERSION", len(migrations.MIGRATIONS))
    with pytest.raises(sqlite3.OperationalError, match="boom"):
        connection.connect(old_db)
    assert raw(old_db, "pragma user_version") == [(1,)]
    assert [n for (n,) in raw(old_db, "select name from _migrations")] == ["001_initial"]
    assert contents(old_db) == before


def test_a_database_from_a_newer_agent_ledger_is_refused(old_db: Path, tmp_path: Path) -> None:
    conn = sqlite3.connect(old_db)
    conn.execute(f"pragma user_version = {migrations.SCHEMA_VERSION + 1}")
    conn.close()
    ledger = tmp_path / "l.jsonl"
    ledger.write_text('{"session": "s", "type": "round"}\n')
    result = CliRunner().invoke(cli, ["ingest", str(old_db), str(ledger)])
    assert result.exit_code == 1
    assert f"schema version {migrations.SCHEMA_VERSION + 1} is newer" in result.output
    assert "Traceback" not in result.output


def test_a_new_database_records_its_version(db_path: Path) -> None:
    connection.connect(db_path).conn.close()
    assert raw(db_path, "pragma user_version") == [(migrations.SCHEMA_VERSION,)]
    assert raw(db_path, "pragma journal_mode") == [("wal",)]


def test_a_new_database_has_pages_of_16_kb_and_an_old_one_keeps_its_own(
    tmp_path: Path, old_db: Path
) -> None:
    """A page size is fixed once a file is written (in WAL mode for good), so a database
    made before it was 16 KB keeps SQLite's 4 KB and is migrated and ingested into as is."""
    connection.connect(tmp_path / "new.db").conn.close()
    assert raw(tmp_path / "new.db", "pragma page_size") == [(connection.PAGE_SIZE,)] == [(16384,)]
    assert raw(old_db, "pragma page_size") == [(4096,)]
    ingest(old_db, [ROOT / "sample_ledgers"])
    assert raw(old_db, "pragma page_size") == [(4096,)]
    assert raw(old_db, "pragma integrity_check") == [("ok",)]


def test_steps_are_stored_in_session_order_with_no_other_index(old_db: Path) -> None:
    """Migration 009: a step is written into one B-tree, its primary key's (a source's steps
    are found through its sessions), in a new database and in a migrated one alike."""
    connection.connect(old_db).conn.close()
    (sql,) = raw(old_db, "select sql from sqlite_master where name = 'steps'")[0]
    assert sql.endswith("WITHOUT ROWID")
    assert [origin for (origin,) in raw(old_db, "select origin from pragma_index_list('steps')")
            ] == ["pk"]
    assert raw(old_db, "select name from pragma_index_info('sqlite_autoindex_steps_1')") == [
        ("session_id",), ("idx",)]


def _open_at_once(path: Path, start: Any, answers: Any) -> None:
    start.wait()
    try:
        connection.connect(path).conn.close()
        answers.put("ok")
    except sqlite3.Error as exc:
        answers.put(repr(exc))


def test_processes_opening_a_new_database_at_once_all_get_it() -> None:
    """Two ingests started together on a new database both switch it to WAL; SQLite refuses
    one of two processes that try at the same moment without waiting (before they tried
    again, 5-13% of the processes here failed with "database is locked"), so the refused one
    tries again."""
    context = multiprocessing.get_context("fork")
    answers = []
    with scratch_dir() as tmp:
        for n in range(25):
            start, queue = context.Barrier(4), context.Queue()
            processes = [context.Process(target=_open_at_once,
                                         args=(Path(tmp) / f"new-{n}.db", start, queue))
                         for _ in range(4)]
            for process in processes:
                process.start()
            answers += [queue.get(timeout=60) for _ in processes]
            for process in processes:
                process.join()
    assert answers == ["ok"] * 100


def test_switching_to_wal_gives_up_after_the_timeout(db_path: Path) -> None:
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("CREATE TABLE t (a)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(db_path, isolation_level=None, timeout=0)
    try:
        started = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            connection.use_wal(other, timeout_s=0.2)
        # It gave up after its own timeout, not the default one (BUSY_TIMEOUT_MS, 60 s),
        # however loaded the machine.
        assert 0.2 <= time.monotonic() - started < connection.BUSY_TIMEOUT_MS / 1000 / 2
    finally:
        other.close()
        holder.execute("ROLLBACK")
        holder.close()


# --- binding None ------------------------------------------------------------------------------

_VALUES = st.one_of(
    st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False), st.text(),
    st.binary(max_size=8),
)


@given(
    st.lists(st.tuples(_VALUES, _VALUES, _VALUES, _VALUES), max_size=40, unique_by=lambda r: r[0])
)
@settings(max_examples=300, deadline=None)
def test_none_bound_directly_stores_what_a_null_in_the_statement_stores(rows: list[tuple]) -> None:
    """With None's adapter registered, executemany stores exactly the rows that statements
    with NULL written in (binding no None at all) store, for any mix of values."""
    connection.bind_none_directly()
    ddl = "CREATE TABLE t (k PRIMARY KEY, a, b INTEGER DEFAULT 7, c TEXT)"
    bound, literal = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    for conn in (bound, literal):
        conn.execute(ddl)
    bound.executemany("INSERT OR REPLACE INTO t (k, a, b, c) VALUES (?, ?, ?, ?)", rows)
    for row in rows:
        marks = ", ".join("NULL" if value is None else "?" for value in row)
        literal.execute(f"INSERT OR REPLACE INTO t (k, a, b, c) VALUES ({marks})",
                        [value for value in row if value is not None])
    query = "SELECT k, a, b, c, typeof(k), typeof(a), typeof(b), typeof(c) FROM t ORDER BY rowid"
    assert list(bound.execute(query)) == list(literal.execute(query))


def test_opening_a_database_registers_none_s_adapter(db_path: Path) -> None:
    connection.connect(db_path).conn.close()
    assert sqlite3.adapters[(type(None), sqlite3.PrepareProtocol)] is connection.NONE_ITSELF


def test_opening_a_database_does_not_look_for_sqlite_utils_plugins(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding them reads every installed package's metadata (10 ms of a no-op re-ingest),
    and their SQL functions are nothing agent-ledger calls."""
    import sqlite_utils.db

    def looked(*args: Any) -> None:
        raise AssertionError("sqlite-utils plugins looked for")

    monkeypatch.setattr(sqlite_utils.db, "ensure_plugins_loaded", looked)
    monkeypatch.setattr(sqlite_utils.db.pm.hook, "prepare_connection", looked)
    connection.connect(db_path).conn.close()
    ingest(db_path, [ROOT / "sample_ledgers"])


def test_migration_007_fills_the_parity_groups_from_the_sessions(sample_db: Path) -> None:
    """A database judged before 007 has parity rows without meters and budget digest: the
    migration copies them from the sessions, and the next ingest's verdicts are unchanged."""
    before = raw(sample_db, "select * from task_classes order by task_class")
    conn = sqlite3.connect(sample_db)
    conn.execute("DROP INDEX idx_session_parity_groups")
    for column in ("meters", "budget_digest"):
        conn.execute(f"ALTER TABLE session_parity DROP COLUMN {column}")
    conn.execute("CREATE INDEX idx_session_parity_task_class_session_id "
                 "ON session_parity (task_class, session_id)")
    conn.execute("DELETE FROM _migrations WHERE name = '007_parity_groups'")
    conn.execute("PRAGMA user_version = 6")
    conn.commit()
    conn.close()

    connection.connect(sample_db).conn.close()
    assert raw(sample_db, "select p.session_id from session_parity p join sessions s "
                          "using (session_id) where p.meters is not s.meters "
                          "or p.budget_digest is not s.budget_digest") == []
    assert raw(sample_db, "select count(*) from session_parity where meters is null") == [(0,)]
    indexes = [n for (n,) in raw(sample_db, "select name from pragma_index_list('session_parity')")]
    assert "idx_session_parity_groups" in indexes
    assert "idx_session_parity_task_class_session_id" not in indexes
    db = connection.connect(sample_db)  # bugfix judged again from its stored (migrated) parity
    verdict_tables.after_ingest(db, True, {"bf-0001"})
    db.conn.close()
    assert raw(sample_db, "select * from task_classes order by task_class") == before


def test_migration_008_counts_the_sessions_of_each_parity_group(sample_db: Path) -> None:
    """A database judged before 008 has no group counts: the migration counts its stored
    parity, and the next ingest's verdicts are unchanged."""
    from tests.db.test_verdict_tables import assert_counts_are_the_stored_groups

    before = raw(sample_db, "select * from task_classes order by task_class")
    conn = sqlite3.connect(sample_db)
    conn.execute("DROP TABLE parity_groups")
    conn.execute("DELETE FROM _migrations WHERE name = '008_parity_group_counts'")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()

    db = connection.connect(sample_db)  # bugfix judged again from the migrated counts
    verdict_tables.after_ingest(db, True, {"bf-0001"})
    db.conn.close()
    assert_counts_are_the_stored_groups(sample_db)
    assert raw(sample_db, "select * from task_classes order by task_class") == before


def test_an_ingest_into_a_current_database_does_not_import_sqlite_utils(tmp_path: Path) -> None:
    """A database at SCHEMA_VERSION is opened without migrating, and an ingest uses its
    connection alone (sqlite-utils is imported by the first use of anything else)."""
    import subprocess
    import sys

    db_path, ledger = tmp_path / "l.db", tmp_path / "l.jsonl"
    ledger.write_text('{"session": "s", "type": "round"}\n')
    connection.connect(db_path).conn.close()
    ledger.write_text('{"session": "s", "type": "round"}\n{"session": "s", "type": "end"}\n')
    script = (
        "import sys\n"
        "from ledger.db import connection\n"
        "from ledger.ingest.ingester import ingest\n"
        f"ingest({str(db_path)!r}, [{str(ledger)!r}])\n"
        "assert 'sqlite_utils' not in sys.modules\n"
        f"db = connection.connect({str(db_path)!r})\n"
        "assert db['steps'].count == 2 and 'sqlite_utils' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
