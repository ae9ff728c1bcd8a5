"""Other hosts' ledger databases combined into one (``agent-ledger merge``, docs/merge.md).

A host is the machine a source was ingested on (``sources.host``; a source that names none
takes its database's file name, ``laptop-2`` for ``laptop-2.db``). What is merged is keyed
by host, so two hosts' rows never collide and merging a database again changes nothing:

* a **source** keeps its id unless the target holds that id for another host; then it is
  ``ID@HOST`` (``ID@HOST-2``, ... should that be taken too). A source id the target holds for
  the same host is the same source.
* a **session** likewise: it keeps its id unless the target holds the id for a session of
  another host, then ``ID@HOST``. Its steps, incidents, saved state and links to the files
  that hold it (``session_sources``), and its sub-agents' ``parent_session_id``, follow.
* a source whose row (offset, time of its last ingest, ...) the target already holds as it
  is has nothing new: neither it nor its sessions are written again. A source that differs
  replaces the target's copy whole: its sessions, their rows and its lines put aside.
* ``hook_decisions`` rows are added where the target lacks an equal one; ``leftovers`` rows
  replace those of the same key. ``exports`` is not merged (folders of another machine);
  the next ``agent-ledger export`` of the target writes what the merge brought.

Every row is written through :mod:`ledger.db.writes`, so its texts are cleaned
(:func:`~ledger.db.writes.clean`) as every other write's. The rollup is kept in step as an
ingest keeps it; the verdict tables are recomputed whole once the databases are merged.
A source database is read, never written: one made by an older agent-ledger is copied and
the copy migrated; one made by a newer agent-ledger, or that is no ledger, is refused.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.db import connection, migrations, rollup, verdict_tables, writes

if TYPE_CHECKING:  # annotations only: ledger.db.connection imports it (without pandas)
    import sqlite_utils

#: Tables a ledger has had since its first schema: a database without them is no ledger.
LEDGER_TABLES = frozenset({"sources", "sessions", "steps", "incidents"})
CHUNK = 500  # sessions copied per round of reads and writes


class Refused(Exception):
    """A source database that cannot be merged, with the reason (the others still are)."""


@dataclass
class Merged:
    """What one source database brought."""

    path: str
    hosts: list[str] = field(default_factory=list)
    migrated_from: int | None = None  # its schema version, when a migrated copy was read
    sources: int = 0  # sources written (new, or changed since the last merge)
    unchanged_sources: int = 0
    sessions: int = 0
    renamed_sessions: int = 0  # of those, written as ID@HOST (the id is another host's)
    steps: int = 0
    incidents: int = 0
    ingest_errors: int = 0
    hook_decisions: int = 0
    leftovers: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Source:
    """A source database open for reading: its connection, and the host of sources that
    name none."""

    conn: sqlite3.Connection
    path: str
    fallback_host: str
    migrated_from: int | None


@contextmanager
def open_source(path: str | Path, target: str | Path) -> Iterator[Source]:
    """Open a ledger database to merge into ``target``, read-only; one of an older schema
    is copied (beside ``target``) and the copy migrated. Raises :class:`Refused`."""
    path = Path(path)
    if Path(target).exists() and os.path.samefile(path, target):
        raise Refused("is the database merged into")
    conn = read_only(path)
    try:
        version = _ledger_version(conn)
        if version == migrations.SCHEMA_VERSION:
            yield Source(conn, str(path), path.stem, None)
            return
        with tempfile.TemporaryDirectory(prefix=".merge-", dir=Path(target).parent) as tmp:
            copy = Path(tmp) / path.name
            out = sqlite3.connect(copy)
            try:
                conn.backup(out)
            finally:
                out.close()
            migrated = connection.connect(copy).conn
            try:
                yield Source(migrated, str(path), path.stem, version)
            finally:
                migrated.close()
    finally:
        conn.close()


def read_only(path: str | Path) -> sqlite3.Connection:
    """A read-only connection to a SQLite database (:class:`Refused` if it is none).

    A WAL database in a folder this process cannot write (a read-only mount, another user's
    folder) cannot be read with ``mode=ro`` alone, which must make its ``-shm`` file: with no
    ``-wal`` file beside it (or an empty one) no write is pending, so the file is read as it
    is (``immutable``). A writer that could still start there (another user's, allowed to
    write that folder) would not be seen: a copy is then the safe thing to merge."""
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    try:
        return _opened(sqlite3.connect(uri, uri=True))
    except sqlite3.OperationalError as exc:
        if not _wal_unreadable(path, exc):
            raise Refused(f"cannot be read ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise Refused(f"not a SQLite database ({exc})") from None
    try:
        return _opened(sqlite3.connect(f"{uri}&immutable=1", uri=True))
    except sqlite3.DatabaseError as exc:
        raise Refused(f"cannot be read ({exc})") from None


def _opened(conn: sqlite3.Connection) -> sqlite3.Connection:
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def _wal_unreadable(path: str | Path, exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` is a WAL database's ``-shm`` file that cannot be made, with no write
    pending (no ``-wal`` file, or an empty one)."""
    wal = Path(f"{path}-wal")
    return "readonly" in str(exc) and (not wal.exists() or wal.stat().st_size == 0)


def check_ledger(path: str | Path, new_ok: bool = False) -> None:
    """:class:`Refused` unless ``path`` is an agent-ledger database of this schema or an
    older one: a command that reads a ledger must not migrate another SQLite database into
    one. With ``new_ok``, a missing or empty file passes (the command makes the ledger)."""
    if new_ok and (not os.path.exists(path) or os.path.getsize(path) == 0):
        return
    conn = read_only(path)
    try:
        _ledger_version(conn)
    finally:
        conn.close()


def sessions_in(path: str | Path) -> int:
    """How many sessions a ledger database holds (0 for one that cannot be read)."""
    try:
        conn = read_only(path)
    except Refused:
        return 0
    try:
        return conn.execute("SELECT count(*) FROM sessions").fetchone()[0]
    except sqlite3.DatabaseError:
        return 0
    finally:
        conn.close()


def _ledger_version(conn: sqlite3.Connection) -> int:
    """The schema version of a ledger database; :class:`Refused` for any other database."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if not LEDGER_TABLES <= tables or "_migrations" not in tables or version < 1:
        missing = ", ".join(sorted(LEDGER_TABLES - tables)) or "_migrations"
        raise Refused(f"not an agent-ledger database (no {missing} table)")
    if version > migrations.SCHEMA_VERSION:
        raise Refused(
            f"schema version {version} is newer than this agent-ledger "
            f"({migrations.SCHEMA_VERSION}); upgrade agent-ledger to read it"
        )
    return version


def merge(
    db: sqlite_utils.Database, source: Source, progress: Callable[[int], None] = lambda n: None
) -> Merged:
    """Merge one source database into ``db`` in one write transaction (see the module doc),
    reading it in one read transaction (an ingest into it meanwhile is in it wholly or not at
    all); ``progress(n)`` is called as its sessions are read, ``n`` at a time."""
    src = source.conn
    src.execute("BEGIN")
    try:
        return _merge(db, source, progress)
    finally:
        src.execute("ROLLBACK")  # it only read


def _merge(db: sqlite_utils.Database, source: Source, progress: Callable[[int], None]) -> Merged:
    src = source.conn
    merged = Merged(source.path, migrated_from=source.migrated_from)
    with writes.immediate(db) as conn:
        hosts = _source_hosts(src, source.fallback_host)
        merged.hosts = sorted(set(hosts.values()))
        source_ids = _map_ids(conn, hosts, _SOURCE_HOST)
        changed = _changed_sources(conn, src, hosts, source_ids)
        merged.sources, merged.unchanged_sources = len(changed), len(hosts) - len(changed)
        owners = dict(src.execute("SELECT session_id, source_id FROM sessions").fetchall())
        session_hosts = {
            sid: hosts.get(owner, source.fallback_host) for sid, owner in owners.items()
        }
        session_ids = _map_ids(conn, session_hosts, _SESSION_HOST)
        ids = Ids(source_ids, session_ids)
        todo = _sessions_to_copy(conn, src, changed, ids)
        merged.renamed_sessions = sum(session_ids[s] != s for s in todo)
        progress(len(owners) - len(todo))
        pending = rollup.Pending()
        _forget_sessions(conn, pending, [ids.sessions[s] for s in todo], changed, ids)
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start : start + CHUNK]
            _copy_sessions(conn, src, chunk, ids, merged)
            progress(len(chunk))
        merged.sessions = len(todo)
        _copy_sources(conn, src, changed, ids, hosts)
        merged.ingest_errors = _copy_rows(
            conn, src, "ingest_errors", "source_id", changed, ids, skip=("id",)
        )
        merged.hook_decisions = _add_hook_decisions(conn, src, ids)
        merged.leftovers = _replace_leftovers(conn, src)
        pending.add_back(conn)
    return merged


def finish(db: sqlite_utils.Database, changed: bool) -> None:
    """After the merges: the verdict tables recomputed whole if a merge wrote a session (or
    if they never were computed)."""
    verdict_tables.after_ingest(db, changed, touched=None)


@dataclass(frozen=True)
class Ids:
    """Source and session ids of the source database, as the target knows them."""

    sources: dict[str, str]
    sessions: dict[str, str]

    def source(self, source_id: str | None) -> str | None:
        return self.sources.get(source_id, source_id) if source_id is not None else None

    def session(self, session_id: str | None) -> str | None:
        return self.sessions.get(session_id, session_id) if session_id is not None else None

    def mapper(self, names: Sequence[str]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
        """A function from a row of the source database (values in ``names`` order) to the
        row with its ids as the target knows them."""
        maps = {"session_id": self.session, "parent_session_id": self.session,
                "source_id": self.source}
        at = [(i, maps[name]) for i, name in enumerate(names) if name in maps]

        def mapped(row: Sequence[Any]) -> tuple[Any, ...]:
            out = list(row)
            for i, rename in at:
                out[i] = rename(out[i])
            return tuple(out)

        return mapped


def _source_hosts(src: sqlite3.Connection, fallback: str) -> dict[str, str]:
    """Each source of the source database and its host (``fallback`` where it names none)."""
    rows = src.execute("SELECT source_id, host FROM sources")
    return {source_id: host or fallback for source_id, host in rows}


#: The host that holds an id in the target (no row: the id is free; NULL: a source that
#: names no host, which is no host merged here).
_SOURCE_HOST = "SELECT host FROM sources WHERE source_id = ?"
_SESSION_HOST = (
    "SELECT src.host FROM sessions s LEFT JOIN sources src ON src.source_id = s.source_id "
    "WHERE s.session_id = ?"
)


def _map_ids(conn: sqlite3.Connection, hosts: dict[str, str], held_by: str) -> dict[str, str]:
    """Each id (of a source or a session, with its host) and its name in the target."""
    mapping: dict[str, str] = {}
    taken: set[str] = set()
    for old, host in hosts.items():
        mapping[old] = _name_in_target(conn, old, host, held_by, taken)
        taken.add(mapping[old])
    return mapping


def _name_in_target(
    conn: sqlite3.Connection, old: str, host: str, held_by: str, taken: set[str]
) -> str:
    """The first of ``ID``, ``ID@HOST``, ``ID@HOST-2``, ... that the target holds for the
    same host, else the first it does not hold (``ID@HOST`` is always looked at: an earlier
    merge gave it while ``ID`` was another host's, which ``ID`` may no longer be)."""
    free = None
    for n, candidate in enumerate(_candidates(old, host)):
        if candidate in taken:
            continue
        row = conn.execute(held_by, (candidate,)).fetchone()
        if row is not None and row[0] == host:
            return candidate
        if row is None:
            free = free or candidate
        if free is not None and n >= 1:
            return free
    raise AssertionError("unreachable: the candidates never end")


def _candidates(old: str, host: str) -> Iterator[str]:
    yield old
    yield f"{old}@{host}"
    for n in count(2):
        yield f"{old}@{host}-{n}"


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    """A table's stored columns (``table_info`` leaves out generated ones, which no one
    writes)."""
    return [name for _, name, *_ in conn.execute(f"PRAGMA table_info([{table}])")]


def _shared_columns(conn: sqlite3.Connection, src: sqlite3.Connection, table: str) -> list[str]:
    theirs = set(_columns(src, table))
    return [c for c in _columns(conn, table) if c in theirs]


def _select(names: Sequence[str], table: str) -> str:
    return f"SELECT {', '.join(f'[{n}]' for n in names)} FROM [{table}]"


def _changed_sources(
    conn: sqlite3.Connection, src: sqlite3.Connection, hosts: dict[str, str], ids: dict[str, str]
) -> set[str]:
    """The sources (their ids in the source database) that the target lacks or holds
    otherwise: those to write again."""
    names = _shared_columns(conn, src, "sources")
    changed = set()
    for row in src.execute(_select(names, "sources")):
        mine = _source_row(names, row, hosts, ids)
        theirs = conn.execute(
            _select(names, "sources") + " WHERE source_id = ?", (mine["source_id"],)
        ).fetchone()
        if theirs is None or tuple(mine.values()) != tuple(theirs):
            changed.add(row[names.index("source_id")])
    return changed


def _source_row(
    names: Sequence[str], row: Sequence[Any], hosts: dict[str, str], ids: dict[str, str]
) -> dict[str, Any]:
    """A ``sources`` row as the target stores it: its id mapped, its host named, cleaned."""
    out = dict(zip(names, row, strict=True))
    source_id = out["source_id"]
    out.update(source_id=ids[source_id], host=hosts[source_id])
    return {name: writes.clean(value) for name, value in out.items()}


def _sessions_to_copy(
    conn: sqlite3.Connection, src: sqlite3.Connection, changed: set[str], ids: Ids
) -> list[str]:
    """The sessions (ids in the source database) of a changed source (its own, or joined by
    it), and those the target does not hold yet."""
    marks = as_json(changed)
    picked = {sid for (sid,) in src.execute(
        "SELECT session_id FROM sessions WHERE source_id IN (SELECT value FROM json_each(?)) "
        "UNION SELECT session_id FROM session_sources "
        "WHERE source_id IN (SELECT value FROM json_each(?))", (marks, marks),
    )}
    for (sid,) in src.execute("SELECT session_id FROM sessions"):
        if sid not in picked and conn.execute(
            "SELECT 1 FROM sessions WHERE session_id = ?", (ids.session(sid),)
        ).fetchone() is None:
            picked.add(sid)
    return sorted(picked)


def as_json(values: set[str] | Sequence[Any]) -> str:
    """A list of values as JSON, for ``json_each(?)``."""
    return json.dumps(sorted(values) if isinstance(values, set) else list(values))


def _forget_sessions(
    conn: sqlite3.Connection, pending: rollup.Pending, sessions: list[str],
    changed: set[str], ids: Ids,
) -> None:
    """Delete from the target the sessions about to be copied, and those its copies of the
    changed sources own (a source written again replaces its copy whole), with their rows;
    their contributions are taken out of the rollup."""
    owned = as_json({ids.sources[s] for s in changed})
    doomed = sorted({*sessions} | {sid for (sid,) in conn.execute(
        "SELECT session_id FROM sessions WHERE source_id IN (SELECT value FROM json_each(?))",
        (owned,),
    )})
    pending.take_out(conn, doomed)
    for start in range(0, len(doomed), CHUNK):
        chunk = as_json(doomed[start : start + CHUNK])
        for table in ("steps", "incidents", "fold_state", "session_sources", "sessions"):
            conn.execute(
                f"DELETE FROM [{table}] WHERE session_id IN (SELECT value FROM json_each(?))",
                (chunk,),
            )
    conn.execute(
        "DELETE FROM ingest_errors WHERE source_id IN (SELECT value FROM json_each(?))", (owned,)
    )


def _copy_sessions(
    conn: sqlite3.Connection, src: sqlite3.Connection, chunk: list[str], ids: Ids,
    merged: Merged,
) -> None:
    """Copy some sessions and every row that belongs to them."""
    wanted = set(chunk)
    for table in ("sessions", "steps", "incidents", "fold_state", "session_sources"):
        written = _copy_rows(conn, src, table, "session_id", wanted, ids)
        if table in ("steps", "incidents"):
            setattr(merged, table, getattr(merged, table) + written)


def _copy_rows(
    conn: sqlite3.Connection, src: sqlite3.Connection, table: str, key: str, wanted: set[str],
    ids: Ids, skip: Sequence[str] = (),
) -> int:
    """Copy the rows of ``table`` whose ``key`` is among ``wanted`` (ids in the source
    database), ids mapped, into the target, which holds none of them (:func:`_forget_sessions`
    deleted them); returns how many."""
    names = [c for c in _shared_columns(conn, src, table) if c not in skip]
    cursor = src.execute(
        _select(names, table) + f" WHERE [{key}] IN (SELECT value FROM json_each(?))",
        (as_json(wanted),),
    )
    mapped = ids.mapper(names)
    written = 0
    while rows := cursor.fetchmany(CHUNK * 4):
        writes.insert(conn, table, names, map(mapped, rows))
        written += len(rows)
    return written


def _copy_sources(
    conn: sqlite3.Connection, src: sqlite3.Connection, changed: set[str], ids: Ids,
    hosts: dict[str, str],
) -> None:
    names = _shared_columns(conn, src, "sources")
    rows = src.execute(
        _select(names, "sources") + " WHERE source_id IN (SELECT value FROM json_each(?))",
        (as_json(changed),),
    )
    writes.replace_all(
        conn, "sources", [_source_row(names, r, hosts, ids.sources) for r in rows], keep=True
    )


def _add_hook_decisions(conn: sqlite3.Connection, src: sqlite3.Connection, ids: Ids) -> int:
    """Add the live brake's decisions the target lacks (an equal row, but for its ``id``)."""
    names = [c for c in _shared_columns(conn, src, "hook_decisions") if c != "id"]
    rows = src.execute(_select(names, "hook_decisions") + " ORDER BY id")
    new = _missing(conn, "hook_decisions", names, map(ids.mapper(names), rows))
    writes.insert(conn, "hook_decisions", names, new)
    return len(new)


def _replace_leftovers(conn: sqlite3.Connection, src: sqlite3.Connection) -> int:
    """The findings of ``agent-ledger leftovers`` the target lacks or holds otherwise (a
    finding of the same key is replaced)."""
    names = _shared_columns(conn, src, "leftovers")
    new = _missing(conn, "leftovers", names, src.execute(_select(names, "leftovers")))
    writes.replace_all(conn, "leftovers", [dict(zip(names, r, strict=True)) for r in new],
                       keep=True)
    return len(new)


def _missing(
    conn: sqlite3.Connection, table: str, names: Sequence[str], rows: Iterator[Sequence[Any]]
) -> list[list[Any]]:
    """The rows, cleaned, that ``table`` holds no equal of (in ``names``)."""
    match = " AND ".join(f"[{n}] IS ?" for n in names)
    new = []
    for row in rows:
        values = [writes.clean(v) for v in row]
        if conn.execute(f"SELECT 1 FROM [{table}] WHERE {match}", values).fetchone() is None:
            new.append(values)
    return new
