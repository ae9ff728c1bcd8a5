"""Write a ledger database as a Hive-partitioned Parquet tree, incrementally and atomically.

*Incremental*: the ``exports`` table (migration 014) keeps, per export folder, its
watermark: each source's ``ingested_at`` and ``offset`` as they were when it was exported. A
session changes only when one of its sources is ingested, so the partitions to rewrite are
those holding a session of a source whose pair differs now (or is new). Comparing the pairs
rather than a time cannot miss an ingest that committed late or in the same second. A
partition is rewritten whole, from the database, so its files are always complete.
``full`` rewrites every partition and removes those whose sessions are gone (a source re-read
under another session id).

The watermark also holds the exported columns: after a migration adds one (015's
``cost_nusd``), the next export rewrites every partition, so no file lacks it.

*Atomic*: each file is written to a hidden temporary name in its own folder, flushed to disk,
then renamed over the old one (``os.replace``): a reader sees the old file or the new one,
and a crash leaves at most a hidden ``.part.parquet.*.tmp`` that no Parquet reader globs.

The rows are read in one read transaction, so an ingest running meanwhile is seen wholly or
not at all. Texts are written as stored: the database holds only redacted text.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ledger.db.writes import now
from ledger.export.contract import (
    PART_FILE,
    SESSION_TABLES,
    arrow_type,
    day_of,
    host_dir,
    partition_dir,
)

Partition = tuple[str, str]  # (day, host)


@dataclass
class Summary:
    partitions: int = 0
    sessions: int = 0
    removed: int = 0
    sources: int = 0


def export(
    conn: sqlite3.Connection, out: Path, host: str | None = None, full: bool = False
) -> Summary:
    """Write what changed since the last export of ``out`` (everything when ``full``).

    ``host`` names the host of sources that name none and of the database's task classes;
    by default the one host its sources name, else this machine's name."""
    out = out.resolve()
    key = str(out)
    summary = Summary()
    conn.execute("BEGIN")  # one snapshot for every read
    try:
        host = host or default_host(conn)
        mark = _source_marks(conn)
        mark[COLUMNS_KEY] = _columns(conn)
        last = None if full else _watermark(conn, key)
        if last is not None and last.get(COLUMNS_KEY) != mark[COLUMNS_KEY]:
            last = None  # the columns changed since (a migration): every partition again
        partitions = _partitions(conn, host)
        if last is None:
            changed = set(partitions)
        else:
            sessions = _sessions_of(conn, {s for s, v in mark.items() if last.get(s) != v})
            changed = {part for part, ids in partitions.items() if ids & sessions}
            changed |= {part for part in partitions if _missing(out, part)}
        for part in sorted(changed):
            ids = sorted(partitions[part])
            for table in SESSION_TABLES:
                _write(conn, partition_dir(out, table, *part) / PART_FILE, table, ids)
            summary.partitions += 1
            summary.sessions += len(ids)
        _write(conn, host_dir(out, "task_classes", host) / PART_FILE, "task_classes", None)
        _write(conn, out / "stop_reasons" / PART_FILE, "stop_reasons", None)
        if full:
            mine = {_host_name(h) for h in _hosts(conn, host)}
            live = {(d, _host_name(h)) for d, h in partitions}
            summary.removed = _remove_stale(out, live, mine)
    finally:
        conn.execute("COMMIT")
    summary.sources = len(mark) - 1
    conn.execute(
        "INSERT OR REPLACE INTO exports (out, sources, exported_at, partitions, sessions) "
        "VALUES (?, ?, ?, ?, ?)",
        (key, json.dumps(mark, sort_keys=True), now(), summary.partitions, summary.sessions),
    )
    return summary


def _missing(out: Path, part: Partition) -> bool:
    """Whether a file of ``part`` is gone from ``out`` (deleted, or the folder emptied since
    its export): the watermark alone would call it up to date."""
    return not all((partition_dir(out, t, *part) / PART_FILE).exists() for t in SESSION_TABLES)


def _source_marks(conn: sqlite3.Connection) -> dict[str, str]:
    """Each source's state as an export records it: when it was last ingested, and how far."""
    return {source_id: f"{ingested_at}|{offset}" for source_id, ingested_at, offset in
            conn.execute('SELECT source_id, ingested_at, "offset" FROM sources')}


#: The watermark's entry for the exported columns (no source id starts with a space).
COLUMNS_KEY = " columns"


def _columns(conn: sqlite3.Connection) -> str:
    """The columns an export writes, table by table: when a migration adds one, the files
    written before lack it, so the next export rewrites them all."""
    return json.dumps({t: schema(conn, t).names for t in (*SESSION_TABLES, "task_classes")})


def _watermark(conn: sqlite3.Connection, key: str) -> dict[str, str] | None:
    row = conn.execute("SELECT sources FROM exports WHERE out = ?", (key,)).fetchone()
    return None if row is None else json.loads(row[0])


def _partitions(conn: sqlite3.Connection, host: str) -> dict[Partition, set[str]]:
    """Every session's partition: the day it started, the host its source was ingested on
    (``host`` for a source that names none: ingested here before hosts were recorded)."""
    found: dict[Partition, set[str]] = defaultdict(set)
    for session_id, started_at, source_host in conn.execute(
        "SELECT s.session_id, s.started_at, src.host FROM sessions s "
        "LEFT JOIN sources src ON src.source_id = s.source_id"
    ):
        found[(day_of(started_at), source_host or host)].add(session_id)
    return found


def _sessions_of(conn: sqlite3.Connection, sources: set[str]) -> set[str]:
    """The sessions with records in any of these sources."""
    return {row[0] for row in conn.execute(
        "SELECT session_id FROM sessions WHERE source_id IN (SELECT value FROM json_each(:ids)) "
        "UNION SELECT session_id FROM session_sources "
        "WHERE source_id IN (SELECT value FROM json_each(:ids))",
        {"ids": json.dumps(sorted(sources))},
    )}


def schema(conn: sqlite3.Connection, table: str) -> pa.Schema:
    """The Arrow schema of a table: its columns in order, typed by their declared type
    (``table_xinfo``: generated columns too, such as migration 015's ``cost_nusd``)."""
    columns = conn.execute(f"PRAGMA table_xinfo({table})").fetchall()
    return pa.schema([(name, getattr(pa, arrow_type(kind))()) for _, name, kind, *_ in columns])


def _write(conn: sqlite3.Connection, path: Path, table: str, ids: list[str] | None) -> None:
    shape = schema(conn, table)
    names = ", ".join(f'"{n}"' for n in shape.names)
    sql = f"SELECT {names} FROM {table}"
    params: tuple[Any, ...] = ()
    if ids is not None:
        order = "idx" if table == "steps" else "start_idx, kind" if table == "incidents" else ""
        sql += " WHERE session_id IN (SELECT value FROM json_each(?)) ORDER BY session_id"
        sql += f", {order}" if order else ""
        params = (json.dumps(ids),)
    rows = conn.execute(sql, params).fetchall()
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(shape)
    data = pa.table(
        [pa.array(list(c), type=f.type) for c, f in zip(columns, shape, strict=True)],
        schema=shape,
    )
    atomic_write(path, data)


def atomic_write(path: Path, data: pa.Table) -> None:
    """Write ``data`` to ``path`` so that no reader ever sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            pq.write_table(data, f, compression="zstd")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a power cut
    finally:
        os.close(folder)


def _host_name(host: str) -> str:
    return partition_dir(Path(), "", "", host).name.removeprefix("host=")


def default_host(conn: sqlite3.Connection) -> str:
    """The one host a database's sources name, else this machine's name."""
    named = conn.execute("SELECT DISTINCT host FROM sources WHERE host IS NOT NULL").fetchall()
    return named[0][0] if len(named) == 1 else socket.gethostname()


def _hosts(conn: sqlite3.Connection, host: str) -> set[str]:
    """The hosts this database exports: its sources' and ``host`` (for those naming none)."""
    return {host} | {h for (h,) in conn.execute("SELECT DISTINCT host FROM sources") if h}


def _remove_stale(out: Path, live: set[Partition], hosts: set[str]) -> int:
    """Remove the partitions of a full export that no session fills any more, among this
    database's hosts only: other hosts export into the same tree."""
    removed = 0
    for table in SESSION_TABLES:
        for part in sorted((out / table).glob(f"day=*/host=*/{PART_FILE}")):
            day = part.parent.parent.name.removeprefix("day=")
            host = part.parent.name.removeprefix("host=")
            if host in hosts and (day, host) not in live:
                shutil.rmtree(part.parent)
                removed += table == "sessions"
    return removed
