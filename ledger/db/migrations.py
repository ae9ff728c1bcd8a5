"""The schema, as ordered, append-only migrations: the database is a documented contract
(docs/schema.md), and a database made by any earlier agent-ledger is brought up to it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ledger.core.reasons import DECISION_TABLE
from ledger.db import rollup, schema_version
from ledger.db.writes import immediate, now

Migration = Callable[["sqlite_utils.Database"], None]

if TYPE_CHECKING:  # annotations only: ledger.db.connection imports it (without pandas)
    import sqlite_utils


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
    rollup.create(db.conn, rollup.BASE_MEASURES)
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


def _m011_tokens(db: sqlite_utils.Database) -> None:
    """Every token count and the model, per step and per session; each step's record key; and
    which other sources hold records of a session (copies of one transcript in several files).

    A session's totals are NULL where no step carried the count (a log that does not measure
    it), as a step's are. ``session_sources`` lists only the sources that joined a session
    another source owns, so forgetting either finds the other (see ``writes.forget_source``)."""
    for column in ("input_tokens", "cache_creation_tokens", "cache_read_tokens",
                   "reasoning_tokens"):
        db["steps"].add_column(column, int)
        db["sessions"].add_column(column, int)
    db["steps"].add_column("model", str)
    db["steps"].add_column("record_key", str)
    db["sessions"].add_column("models", str)
    db["session_sources"].create(
        {"source_id": str, "session_id": str}, pk=("source_id", "session_id")
    )
    db["session_sources"].create_index(["session_id"])


def _m012_prices(db: sqlite_utils.Database) -> None:
    """Money (issue 19): what each session spent in US dollars, and who priced it.

    ``cost_usd`` is NULL where no round carried a cost (the log gave none and no price was
    known: the ``cost`` meter is missing); ``price_source`` names every source that priced a
    round, with its version (``genai-prices 0.2.3``, ``prices.toml#<digest>``, ``log`` for a
    cost the log gave), comma-separated.

    Each step keeps its round's cost (``cost_usd``, NULL where none) and the session's spend
    after it (``total_cost_usd``, NULL until the session has a cost), so a replay of the stored
    steps measures money and the dashboard draws spend against ``max_cost``; each incident
    keeps what its span spent. The session rollup gains the spend of its sessions, in whole
    nanodollars (``rollup.MONEY_MEASURES``: integer sums stay exact as contributions are
    taken out and added back), and is refilled."""
    db["sessions"].add_column("cost_usd", float)
    db["sessions"].add_column("price_source", str)
    db["steps"].add_column("cost_usd", float)
    db["steps"].add_column("total_cost_usd", float)
    db["incidents"].add_column("cost_usd", float)
    rollup.add_money(db.conn)


def _m013_hook_decisions(db: sqlite_utils.Database) -> None:
    """The live brake's decisions (issue 20): one row per tool call Claude Code asked
    ``agent-ledger hook claude-code`` about, allowed or denied, with the session's counters
    (JSON) as they stood, the stop and the reason the model was given when denied; ``event_idx``
    is the call's step in its session (``steps.idx`` once the transcript is ingested)."""
    db["hook_decisions"].create(
        {
            "id": int, "at": str, "session_id": str, "hook_event": str, "tool_use_id": str,
            "tool_name": str, "action": str, "decision": str, "stop_reason": str,
            "stop_detail": str, "reason": str, "event_idx": int, "counters": str,
            "budget_digest": str, "transcript_path": str, "took_ms": float,
        },
        pk="id",
    )
    db["hook_decisions"].create_index(["session_id", "id"])


def _m014_exports(db: sqlite_utils.Database) -> None:
    """Beyond one machine (issue 23): the host each source was ingested on (``sources.host``,
    NULL for sources ingested before it), and one row per export folder with its watermark:
    ``sources``, a JSON object of each source's ``ingested_at`` and ``offset`` as last exported
    (``agent-ledger export`` rewrites the partitions of the sources that differ)."""
    db["sources"].add_column("host", str)
    db["exports"].create(
        {"out": str, "sources": str, "exported_at": str, "partitions": int, "sessions": int},
        pk="out",
    )


def _m015_cost_nusd(db: sqlite_utils.Database) -> None:
    """Exact money everywhere (issue 23): ``cost_nusd`` beside each ``cost_usd`` of
    ``sessions``, ``steps`` and ``incidents``, the same amount in whole nanodollars (USD 1e-9,
    rounded half away from zero; NULL where the dollars are). Integer sums are exact in every
    engine, so a sum of it is the same number in SQLite, DuckDB and ClickHouse, where float
    sums differ in their last bits. A virtual generated column: computed from ``cost_usd`` as
    it is read, so no writer changes and the database grows by nothing."""
    for table in ("sessions", "steps", "incidents"):
        db.conn.execute(
            f"ALTER TABLE [{table}] ADD COLUMN cost_nusd INTEGER "
            f"GENERATED ALWAYS AS ({rollup.nano_or_null('cost_usd')}) VIRTUAL"
        )


def _m016_family_stops(db: sqlite_utils.Database) -> None:
    """A family counted together (issue 20): with the budget file's
    ``subagents_count_in_parent`` on, one row per parent session that has sub-agents, the
    first step (``session_id``, ``idx``: the parent's or a sub-agent's) at which the family's
    totals trip a cap, and the stop; ``stop_reason`` NULL if they never do. Rewritten by every
    ingest for the families it touched (ledger.db.family_stops)."""
    db["family_stops"].create(
        {
            "parent_session_id": str, "session_id": str, "idx": int, "ts": str,
            "stop_reason": str, "stop_detail": str, "family_events": int, "members": int,
            "budget_digest": str,
        },
        pk="parent_session_id",
    )


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
    ("011_tokens", _m011_tokens),
    ("012_prices", _m012_prices),
    ("013_hook_decisions", _m013_hook_decisions),
    ("014_exports", _m014_exports),
    ("015_cost_nusd", _m015_cost_nusd),
    ("016_family_stops", _m016_family_stops),
)

SCHEMA_VERSION = len(MIGRATIONS)
if SCHEMA_VERSION != schema_version.SCHEMA_VERSION:
    raise ImportError(
        f"ledger.db.schema_version.SCHEMA_VERSION is {schema_version.SCHEMA_VERSION}, but there "
        f"are {SCHEMA_VERSION} migrations: set it to {SCHEMA_VERSION}"
    )


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
