"""Opening a ledger database: connection settings, WAL, and the schema brought up to date."""

from __future__ import annotations

import sqlite3
import sys
import time
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ledger.db.schema_version import SCHEMA_VERSION


def _sqlite_utils() -> ModuleType:
    """sqlite-utils, imported without pandas and numpy.

    sqlite-utils imports both when it is imported, if they are installed (the export's
    pyarrow brings numpy; many machines have pandas), to map their scalar types to column
    types: 0.5 s of every ingest's start here, for values no ledger row holds. Each is
    hidden from that one import only (``sys.modules[name] = None`` makes importing it fail);
    anything that imports them later gets them as ever.
    """
    hidden = [name for name in ("pandas", "numpy") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import sqlite_utils
    finally:
        for name in hidden:
            if sys.modules.get(name, ModuleType(name)) is None:
                del sys.modules[name]
    return sqlite_utils


if TYPE_CHECKING:
    import sqlite_utils

BUSY_TIMEOUT_MS = 60_000
#: The page size of a new database (an existing one keeps its own). ``steps`` is one B-tree
#: in its key order (migration 009), and a page of 16 KB holds four times the rows of
#: SQLite's default 4 KB, so a batch's rows fill, split and write a quarter as many pages.
PAGE_SIZE = 16384


class Ledger:
    """An open ledger database: its connection ``conn``, and sqlite-utils' ``Database`` over
    it for everything else (``db["steps"].count``, ``db.query(...)``, ``db.table_names()``),
    made when first used: importing sqlite-utils costs a process some 50 ms, and an ingest
    that migrates nothing uses the connection alone."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    @cached_property
    def utils(self) -> sqlite_utils.Database:
        # sqlite-utils' plugins add SQL functions that nothing here calls, and finding them
        # reads the metadata of every installed package: 10 ms of a 32 ms no-op re-ingest.
        return _sqlite_utils().Database(self.conn, execute_plugins=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.utils, name)

    def __getitem__(self, table: str) -> Any:
        return self.utils[table]


def connect(path: str | Path) -> Ledger:
    """Open (creating if needed) a ledger database, migrated to the current schema (the
    migrations are imported only when there is one to apply)."""
    bind_none_directly()
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # taken only by a file not yet written
    use_wal(conn)
    conn.execute("PRAGMA synchronous = NORMAL")
    # Deleted rows (a file read again) are overwritten, not left in free pages: a database
    # written before redaction covered some field keeps no trace of it once re-folded.
    conn.execute("PRAGMA secure_delete = ON")
    db = Ledger(conn)
    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        from ledger.db.migrations import migrate

        migrate(db)  # (or refuses a database newer than this agent-ledger)
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
