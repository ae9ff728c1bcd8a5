"""The SQLite side: connection settings, ordered migrations, and the writes of one batch.

Every batch of rows is written in one ``BEGIN IMMEDIATE`` transaction together with the
source's new offset and the sessions' resumable state, so a killed ingest loses nothing that
was committed and never commits half a batch (exactly-once effects from at-least-once reads).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from operator import itemgetter
from pathlib import Path
from typing import Any

import sqlite_utils

from . import rollup
from .fold import STEP_COLUMNS, StepRow
from .reasons import DECISION_TABLE

BUSY_TIMEOUT_MS = 60_000
#: The page size of a new database (an existing one keeps its own). ``steps`` is one B-tree
#: in its key order (migration 009), and a page of 16 KB holds four times the rows of
#: SQLite's default 4 KB, so a batch's rows fill, split and write a quarter as many pages.
PAGE_SIZE = 16384

Migration = Callable[[sqlite_utils.Database], None]


def connect(path: str | Path) -> sqlite_utils.Database:
    """Open (creating if needed) a ledger database, migrated to the current schema."""
    bind_none_directly()
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # taken only by a file not yet written
    use_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    # Deleted rows (a file read again) are overwritten, not left in free pages: a database
    # written before redaction covered some field keeps no trace of it once re-folded.
    conn.execute("PRAGMA secure_delete = ON")
    # sqlite-utils' plugins add SQL functions that nothing here calls, and finding them reads
    # the metadata of every installed package: 10 ms of a 32 ms no-op re-ingest.
    db = sqlite_utils.Database(conn, execute_plugins=False)
    migrate(db)
    return db


def use_wal(conn: sqlite3.Connection, timeout_s: float = BUSY_TIMEOUT_MS / 1000) -> None:
    """Switch the database to WAL, waiting as long as for any lock.

    Processes that open a new database at once (two ingests started together) may all hold
    a read lock on it and all want the write lock that the switch takes: SQLite refuses all
    but one of them at once, without waiting (a deadlock, not a busy lock), so the refused
    try again."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def bind_none_directly() -> None:
    """Have Python's ``sqlite3`` bind ``None`` without searching for an adapter first.

    For a value that is not exactly an int, float, str or bytes, ``sqlite3`` looks for an
    adapter (a key tuple, a dict lookup, then two attribute lookups that fail) before it
    binds it: 0.29 us for each None, against 0.04 us for an int, and a ``steps`` row holds
    five or six. An adapter registered for None itself is found by the first lookup and
    returns the None it is given, which ``sqlite3`` binds as NULL: the same values stored,
    for less (a whole ingest of the 1M corpus: 12.8 to 12.1 s of CPU). ``sqlite3`` keeps one
    registry per process, so this holds for every connection of the process, and changes
    nothing for them but that."""
    sqlite3.register_adapter(type(None), NONE_ITSELF)


#: None's adapter: the ``get`` of an empty dict returns None for any key, None included. A
#: function written in Python would enter a frame for every None bound (180,000 rows of the
#: corpus: 0.54 s with one, 0.52 s with this, best of seven, alternated).
NONE_ITSELF = {}.get


@contextmanager
def immediate(db: sqlite_utils.Database) -> Iterator[sqlite3.Connection]:
    """A write transaction that takes the write lock up front (never a deferred upgrade)."""
    conn = db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# --- migrations ----------------------------------------------------------------------------


def _m001_initial(db: sqlite_utils.Database) -> None:
    db["sources"].create(
        {
            "source_id": str, "path": str, "dialect": str, "task_class": str,
            "fingerprint": str, "check_hash": str, "offset": int, "size": int,
            "mtime": float, "lines": int, "blank_lines": int, "fold_digest": str,
            "cursor": str, "first_ingested_at": str, "ingested_at": str,
        },
        pk="source_id",
    )
    db["sessions"].create(
        {
            "session_id": str, "task_class": str, "task": str, "dialect": str,
            "source_id": str, "source_path": str, "started_at": str, "ended_at": str,
            "stop_reason": str, "stop_at": int, "stop_detail": str,
            "recorded_stop": str, "vendor_stop": str,
            "events": int, "rounds": int, "steps": int, "tool_calls": int,
            "output_tokens": int, "tool_errors": int, "writes": int, "elapsed_s": float,
            "events_after_stop": int, "redactions": int, "meters": str,
            "budget": str, "budget_digest": str,
        },
        pk="session_id",
    )
    db["steps"].create(
        {
            "session_id": str, "idx": int, "action": str, "tool": str, "detail": str,
            "tool_calls": int, "output_tokens": int, "tool_error": int,
            "observation_hash": str, "vendor_stop": str, "outcome": str, "ts": str,
            "elapsed_s": float, "total_rounds": int, "total_steps": int,
            "total_tool_calls": int, "total_output_tokens": int, "consecutive_errors": int,
            "total_writes": int, "stop_reason": str, "after_stop": int,
            "source_id": str, "source_line": int, "source_offset": int,
        },
        pk=("session_id", "idx"),
    )
    db["incidents"].create(
        {
            "session_id": str, "kind": str, "start_idx": int, "end_idx": int, "length": int,
            "key": str, "detail": str, "output_tokens": int, "tool_calls": int,
            "blocked": int, "task_class": str, "started_at": str, "ended_at": str,
        },
        pk=("session_id", "kind", "start_idx"),
    )
    db["ingest_errors"].create(
        {
            "id": int, "source_id": str, "path": str, "line": int, "offset": int,
            "reason": str, "raw": str,
        },
        pk="id",
    )
    db["fold_state"].create({"session_id": str, "source_id": str, "state": str}, pk="session_id")
    db["stop_reasons"].create(
        {
            "reason": str, "seed": str, "must_observe": str, "safe_action": str,
            "fail_closed_if_missing": str, "description": str,
        },
        pk="reason",
    )
    for table, columns in (
        ("sessions", ["task_class"]),
        ("sessions", ["stop_reason"]),
        ("sessions", ["recorded_stop"]),
        ("sessions", ["source_id"]),
        ("sessions", ["started_at"]),
        ("steps", ["source_id"]),
        ("incidents", ["kind", "length"]),
        ("ingest_errors", ["source_id"]),
        ("fold_state", ["source_id"]),
    ):
        db[table].create_index(columns)
    _write_stop_reasons(db)


def _write_stop_reasons(db: sqlite_utils.Database) -> None:
    db.conn.executemany(
        "INSERT OR REPLACE INTO stop_reasons VALUES (?, ?, ?, ?, ?, ?)",
        [
            (d.reason.value, d.seed, d.must_observe, d.safe_action,
             d.fail_closed_if_missing, d.description)
            for d in DECISION_TABLE
        ],
    )


def _m002_verdicts(db: sqlite_utils.Database) -> None:
    """Migration verdicts (see ledger/verdicts.py): derived tables, rewritten after each ingest."""
    db["session_parity"].create(
        {
            "session_id": str, "task_class": str, "dialect": str, "parity": str,
            "recorded_stop": str, "vendor_stop": str, "replay_stop": str, "stop_detail": str,
            "unit": str, "recorded_count": int, "replay_count": int, "count_diff": int,
            "recorded_tool_calls": int, "replay_tool_calls": int, "tool_call_diff": int,
            "tolerance": int, "parity_detail": str,
        },
        pk="session_id",
    )
    db["cap_coverage"].create(
        {
            "task_class": str, "rule": str, "cap": str, "meter": str,
            "sessions_in_force": int, "sessions_missing": int, "honoured": int,
            "missing_sessions": str, "must_observe": str, "fail_closed_if_missing": str,
            "instrument": str,
        },
        pk=("task_class", "rule"),
    )
    db["task_classes"].create(
        {
            "task_class": str, "verdict": str, "reason_kinds": str, "reasons": str,
            "sessions": int, "checked_sessions": int, "matches": int, "mismatches": int,
            "no_recorded_stop": int, "completes_without_signal": int,
            "unknown_vendor_stops": str, "unmetered_caps": str, "stop_reasons": str,
            "recorded_stops": str, "meter_coverage": str, "tolerance": int,
            "min_sessions": int,
        },
        pk="task_class",
    )
    db["verdict_settings"].create(
        {"id": int, "tolerance": int, "min_sessions": int, "computed_at": str}, pk="id"
    )
    db.create_view(
        "meter_gaps",
        "select task_class, cap, rule, meter, sessions_missing, sessions_in_force, "
        "missing_sessions, fail_closed_if_missing, instrument "
        "from cap_coverage where sessions_missing > 0",
    )
    for table, columns in (
        ("session_parity", ["task_class"]),
        ("session_parity", ["parity"]),
        ("task_classes", ["verdict"]),
    ):
        db[table].create_index(columns)


def _m003_leftovers(db: sqlite_utils.Database) -> None:
    """Findings of ``agent-ledger leftovers``: second control planes in a code base."""
    db["leftovers"].create(
        {
            "repo": str, "path": str, "line": int, "category": str, "matched": str,
            "text": str, "action": str, "scanned_at": str,
        },
        pk=("repo", "path", "line", "category"),
    )
    db["leftovers"].create_index(["category"])


def _m004_real_agent_logs(db: sqlite_utils.Database) -> None:
    """Imported agent logs: sub-agent links, round continuations, unknown records, and source
    lookups by path and fingerprint."""
    db["sessions"].add_column("parent_session_id", str)
    db["steps"].add_column("same_round", int)
    db["sources"].add_column("unknown_records", str)
    db["sessions"].create_index(["parent_session_id"])
    # A folder of agent logs holds thousands of files: look each one's identity up, not scan.
    db["sources"].create_index(["path"])
    db["sources"].create_index(["fingerprint"])


def _m005_dashboard(db: sqlite_utils.Database) -> None:
    """The dashboard's session rollup (see rollup.py) and the indexes its pages page through."""
    rollup.create(db.conn)
    db["incidents"].create_index(["kind", "key"])
    db["incidents"].create_index(["kind", "length", "session_id", "start_idx"])
    db["incidents"].create_index(["kind", "length", "output_tokens", "session_id", "start_idx"])


def _m006_class_parity_index(db: sqlite_utils.Database) -> None:
    """A class's stored parity in session order, read after every ingest that touches the
    class (see verdict_store.py): a range of one index, with no sort (half the time)."""
    db["session_parity"].create_index(["task_class", "session_id"])
    db.conn.execute("DROP INDEX IF EXISTS idx_session_parity_task_class")


def _m007_parity_groups(db: sqlite_utils.Database) -> None:
    """Each session's meters and budget digest kept with its parity, under one index that
    holds everything a class's verdict groups sessions by: after an ingest, a touched class
    is judged from a range of that index (counts and a few ids per group, no join with
    ``sessions``, no row per session in Python)."""
    table = db["session_parity"]
    for column in ("meters", "budget_digest"):
        table.add_column(column, str)
    db.conn.execute(
        "UPDATE session_parity SET "
        "meters = (SELECT meters FROM sessions s WHERE s.session_id = session_parity.session_id), "
        "budget_digest = (SELECT budget_digest FROM sessions s "
        "WHERE s.session_id = session_parity.session_id)"
    )
    db.conn.execute("DROP INDEX IF EXISTS idx_session_parity_task_class_session_id")
    table.create_index([*PARITY_GROUP_INDEX], index_name="idx_session_parity_groups")


#: The columns of ``idx_session_parity_groups``: a class, what tells its sessions apart for a
#: verdict (see ``verdicts.Group``), and the session.
PARITY_GROUP_INDEX = (
    "task_class", "dialect", "budget_digest", "meters", "replay_stop", "recorded_stop",
    "parity", "session_id",
)


def _m008_parity_group_counts(db: sqlite_utils.Database) -> None:
    """How many sessions each group of a class holds (the groups a verdict reads, see
    ``verdicts.Group``), kept up to date as parity rows are written: a class is judged from
    its few dozen groups, not from a scan of its sessions, so what an ingest costs does not
    grow with the database."""
    group = PARITY_GROUP_INDEX[:-1]
    db["parity_groups"].create({**{column: str for column in group}, "sessions": int})
    db["parity_groups"].create_index(["task_class"])
    db.conn.execute(
        f"INSERT INTO parity_groups SELECT {', '.join(group)}, count(*) FROM session_parity "
        f"GROUP BY {', '.join(group)}"
    )


def _m009_steps_by_session(db: sqlite_utils.Database) -> None:
    """``steps`` stored in its primary key's order (``WITHOUT ROWID``), without the index on
    ``source_id``: a row is written into one B-tree instead of three. A source's steps are
    deleted through its sessions (a session belongs to one source). An ingest that appends to
    many files wrote about a third of its pages into the two B-trees this drops (1% more
    events on a 1M-event database: 0.31 to 0.25 s), and the database is a quarter smaller.
    Migrating copies the table (about 3 s for 1M steps); the pages the old one held are free
    for later rows (``sqlite-utils vacuum DB`` gives them back to the disk)."""
    conn = db.conn
    columns = ", ".join(
        f"[{name}] {kind}" for _, name, kind, *_ in conn.execute("PRAGMA table_info(steps)")
    )
    conn.execute(
        f"CREATE TABLE steps_by_session ({columns}, PRIMARY KEY (session_id, idx)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO steps_by_session SELECT * FROM steps ORDER BY session_id, idx")
    conn.execute("DROP TABLE steps")
    conn.execute("ALTER TABLE steps_by_session RENAME TO steps")


#: Ordered and append-only: never edit a migration that has shipped, add a new one.
MIGRATIONS: Sequence[tuple[str, Migration]] = (
    ("001_initial", _m001_initial),
    ("002_verdicts", _m002_verdicts),
    ("003_leftovers", _m003_leftovers),
    ("004_real_agent_logs", _m004_real_agent_logs),
    ("005_dashboard", _m005_dashboard),
    ("006_class_parity_index", _m006_class_parity_index),
    ("007_parity_groups", _m007_parity_groups),
    ("008_parity_group_counts", _m008_parity_group_counts),
    ("009_steps_by_session", _m009_steps_by_session),
)

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations in order, in one immediate transaction (safe with concurrent
    ingests: the second process waits, then finds nothing to do). Returns the names applied."""
    conn = db.conn
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version == SCHEMA_VERSION:
        return []
    if version > SCHEMA_VERSION:
        raise sqlite3.DatabaseError(
            f"database schema version {version} is newer than this agent-ledger "
            f"({SCHEMA_VERSION}); upgrade agent-ledger"
        )
    applied: list[str] = []
    with immediate(db):
        conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
        )
        done = {row[0] for row in conn.execute("SELECT name FROM _migrations")}
        for name, migration in MIGRATIONS:
            if name in done:
                continue
            migration(db)
            conn.execute("INSERT INTO _migrations VALUES (?, ?)", (name, now()))
            applied.append(name)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return applied


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


# --- batch writes --------------------------------------------------------------------------


def _upsert(conn: sqlite3.Connection, table: str, rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    _upsert_values(conn, table, columns, map(itemgetter(*columns), rows))


def _upsert_values(
    conn: sqlite3.Connection, table: str, columns: Sequence[str], values: Iterable[Sequence[Any]]
) -> None:
    """Insert or replace rows given as values in ``columns`` order."""
    sql = (
        f"INSERT OR REPLACE INTO [{table}] ({', '.join(f'[{c}]' for c in columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )
    conn.executemany(sql, values)




def write_batch(
    conn: sqlite3.Connection,
    *,
    steps: Sequence[StepRow],
    incidents: Sequence[dict[str, Any]],
    errors: Sequence[dict[str, Any]],
    sessions: Sequence[dict[str, Any]],
    states: Sequence[tuple[str, str, str]],
    source: dict[str, Any] | None,
) -> None:
    """Write one batch as :meth:`SourceFold.take_folded` gives it (``steps`` rows in primary-key
    order, values in :data:`STEP_COLUMNS` order; ``states`` as JSON), inside a write
    transaction (``source``: its new ``sources`` row, if it has moved on). The sessions'
    contributions to the rollup must have been taken out first (see
    :class:`rollup.Pending`)."""
    if steps:
        _upsert_values(conn, "steps", STEP_COLUMNS, steps)
    _upsert(conn, "incidents", incidents)
    if errors:
        columns = list(errors[0])
        conn.executemany(
            f"INSERT INTO ingest_errors ({', '.join(columns)}) "
            f"VALUES ({', '.join('?' for _ in columns)})",
            [tuple(e[c] for c in columns) for e in errors],
        )
    _upsert(conn, "sessions", sessions)
    _upsert(
        conn,
        "fold_state",
        [
            {"session_id": sid, "source_id": src, "state": state}
            for sid, src, state in states
        ],
    )
    if source is not None:
        _upsert(conn, "sources", [source])


def replace_all(
    conn: sqlite3.Connection, table: str, rows: Sequence[dict[str, Any]], keep: bool = False
) -> None:
    """Replace a derived table's rows (``keep``: add to them). Call inside :func:`immediate`."""
    if not keep:
        conn.execute(f"DELETE FROM [{table}]")
    _upsert(conn, table, rows)


def forget_source(conn: sqlite3.Connection, source_id: str, pending: rollup.Pending) -> None:
    """Delete everything that came from one source (before it is read again from the start);
    its sessions' contributions are taken out of the rollup through ``pending``."""
    sessions = "SELECT session_id FROM sessions WHERE source_id = ?"
    pending.take_out(conn, [sid for (sid,) in conn.execute(sessions, (source_id,))])
    for table in ("incidents", "steps"):
        conn.execute(f"DELETE FROM {table} WHERE session_id IN ({sessions})", (source_id,))
    conn.execute("DELETE FROM fold_state WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM sessions WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM ingest_errors WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM sources WHERE source_id = ?", (source_id,))


def source_row(conn: sqlite3.Connection, source_id: str) -> dict[str, Any] | None:
    cursor = conn.execute("SELECT * FROM sources WHERE source_id = ?", (source_id,))
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cursor.description], row, strict=True))


def sources_like(
    conn: sqlite3.Connection, paths: Sequence[str], fingerprint: str
) -> list[dict[str, Any]]:
    """The sources at one of ``paths`` or with ``fingerprint``: all a file's identity can
    match (one lookup per file, not a scan of every source, so ingest stays linear in the
    files)."""
    marks = ", ".join("?" for _ in paths)
    cursor = conn.execute(
        f"SELECT * FROM sources WHERE path IN ({marks}) OR fingerprint = ?",
        (*paths, fingerprint),
    )
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def source_ids_from(conn: sqlite3.Connection, prefix: str) -> set[str]:
    """Source ids that start with ``prefix`` (the candidates a new id must not collide with)."""
    rows = conn.execute(
        "SELECT source_id FROM sources WHERE substr(source_id, 1, ?) = ?", (len(prefix), prefix)
    )
    return {source_id for (source_id,) in rows}


def load_state(conn: sqlite3.Connection, source_id: str, session_id: str) -> dict[str, Any] | None:
    """The resumable state of one session of ``source_id``, if an ingest saved it."""
    row = conn.execute(
        "SELECT state FROM fold_state WHERE session_id = ? AND source_id = ?",
        (session_id, source_id),
    ).fetchone()
    return json.loads(row[0]) if row else None


def session_owner(conn: sqlite3.Connection, session_id: str) -> str | None:
    row = conn.execute(
        "SELECT source_id FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return row[0] if row else None
