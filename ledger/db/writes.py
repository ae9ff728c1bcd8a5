"""The writes of one batch, and of derived tables, inside one write transaction.

Every row written here passes through :func:`clean` first: each text value is redacted
(:func:`ledger.core.redact.redact`), and a text that holds JSON (``sources.cursor``,
``fold_state.state``, a line put aside) has every string inside it redacted too. This is the
one place that enforces it, whatever the caller did before: readers' state, error rows,
sessions, steps and derived tables alike. Redaction is idempotent, so text the fold already
redacted comes out the same, and :func:`~ledger.core.redact.redact` remembers both what it
was given and what it gave back, so that second look is a dict lookup.

Every batch of rows is written in one ``BEGIN IMMEDIATE`` transaction together with the
source's new offset and the sessions' resumable state, so a killed ingest loses nothing that
was committed and never commits half a batch (exactly-once effects from at-least-once reads).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ledger.core.fold import STEP_COLUMNS, StepRow
from ledger.core.redact import MEMO_CHARS, PLAIN_TEXT, redact, redact_json
from ledger.db import rollup

if TYPE_CHECKING:  # annotations only: the live hook imports clean() without sqlite-utils
    import sqlite_utils


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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


def clean(value: Any) -> Any:
    """A value as it may be stored: a text redacted, a JSON text with every string in it
    redacted; anything else as it is."""
    if type(value) is not str:
        return value
    cleaned, _ = redact(value)
    if not value.startswith(("{", "[")):
        return cleaned
    return _clean_json(value, cleaned)


def _clean_json(text: str, cleaned: str) -> str:
    """A text that may be JSON, redacted as a whole (``cleaned``), and string by string.

    The text rules saw its keys and values together (``"password": "..."``). An escape can
    hide a secret from them (``\\nghp_...`` reads as one word), so the strings inside are
    also redacted one by one, decoded, and the text is written again if they held a secret.
    Should the text rules have broken the JSON (a key block cut short runs to the end of the
    text), the original is walked instead. Text with no escape that the text rules left
    alone has nothing more to find.
    """
    if cleaned is text and "\\" not in text:
        return text
    for candidate in (cleaned, text):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        data, found = redact_json(data)
        return json.dumps(data, ensure_ascii=False) if found else candidate
    return cleaned


#: Texts known to be storable as they are (clean, and not JSON with secrets inside): most
#: texts of a row (ids, tool names, what the fold already redacted) are looked up here, one
#: set lookup each, instead of being cleaned again; the others, hashes and times, are
#: :data:`~ledger.core.redact.PLAIN_TEXT`. Bounded, in count and in the length of its texts.
_STORABLE: set[str] = set()
STORABLE_MAX = 1 << 16


def _cleaned_rows(values: Iterable[Sequence[Any]]) -> Iterator[Sequence[Any]]:
    """Each row as it may be stored: itself when every text in it is clean, else a copy with
    its texts cleaned (redaction gives a clean text back as the very same object). Only the
    texts not known to be storable are cleaned, and only those are remembered."""
    storable, plain = _STORABLE, PLAIN_TEXT.fullmatch
    for row in values:
        for value in row:
            if type(value) is str and value not in storable and not plain(value):
                break
        else:
            yield row
            continue
        copy: list[Any] | None = None
        for i, value in enumerate(row):
            if type(value) is not str or value in storable or plain(value):
                continue
            cleaned = clean(value)
            if cleaned is not value:
                copy = list(row) if copy is None else copy
                copy[i] = cleaned
            elif len(value) <= MEMO_CHARS:  # JSON states: not kept
                _remember(value)
        yield row if copy is None else tuple(copy)


def _remember(text: str) -> None:
    if len(_STORABLE) >= STORABLE_MAX:
        _STORABLE.clear()
    _STORABLE.add(text)


def known_storable(texts: Iterable[str]) -> None:
    """Texts another process of this ingest cleaned and found storable as they are (a
    worker: the cursor of a batch it folded, see :mod:`ledger.ingest.parallel`), each then
    one set lookup here instead of being cleaned again."""
    for text in texts:
        if len(text) <= MEMO_CHARS:
            _remember(text)


def stored_rows(values: Iterable[Sequence[Any]]) -> list[Sequence[Any]]:
    """Rows as :func:`write_batch` would store them, cleaned here: a worker process cleans the
    ``steps`` rows it folded before sending them (``write_batch(..., steps_stored=True)``).
    It redacts each text right after folding it, while its memo of redactions still holds it;
    the writer, the one process that writes and the bottleneck with two workers, would
    otherwise redact every text it had not seen again (all of them, when every detail differs)."""
    return list(_cleaned_rows(values))


def _upsert(
    conn: sqlite3.Connection, table: str, rows: Sequence[dict[str, Any]], stored: bool = False
) -> None:
    if not rows:
        return
    columns = list(rows[0])
    _upsert_values(conn, table, columns, map(itemgetter(*columns), rows), stored)


def _upsert_values(
    conn: sqlite3.Connection, table: str, columns: Sequence[str], values: Iterable[Sequence[Any]],
    stored: bool = False,
) -> None:
    """Insert or replace rows given as values in ``columns`` order, every text cleaned (here,
    or by :func:`stored_rows` when ``stored``)."""
    sql = _insert_sql("INSERT OR REPLACE", table, tuple(columns))
    conn.executemany(sql, values if stored else _cleaned_rows(values))


def insert(
    conn: sqlite3.Connection, table: str, columns: Sequence[str], values: Iterable[Sequence[Any]]
) -> None:
    """Insert rows given as values in ``columns`` order, every text cleaned."""
    conn.executemany(_insert_sql("INSERT", table, tuple(columns)), _cleaned_rows(values))


@functools.lru_cache(maxsize=64)
def _insert_sql(verb: str, table: str, columns: tuple[str, ...]) -> str:
    """The statement, written once per table and columns (a file writes five or six tables:
    joining their column names again for each cost more than binding its one row)."""
    return (
        f"{verb} INTO [{table}] ({', '.join(f'[{c}]' for c in columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)})"
    )


def write_batch(
    conn: sqlite3.Connection,
    *,
    steps: Sequence[StepRow],
    incidents: Sequence[dict[str, Any]],
    errors: Sequence[dict[str, Any]],
    sessions: Sequence[dict[str, Any]],
    states: Sequence[tuple[str, str, str]],
    source: dict[str, Any] | None,
    shared: Sequence[tuple[str, str]] = (),
    steps_stored: bool = False,
    states_stored: bool = False,
) -> None:
    """Write one batch as :meth:`SourceFold.take_folded` gives it (``steps`` rows in primary-key
    order, values in :data:`STEP_COLUMNS` order; ``states`` as JSON), inside a write
    transaction (``source``: its new ``sources`` row, if it has moved on; ``steps_stored``:
    the steps rows come from :func:`stored_rows`; ``states_stored``: so do the states, as
    ``(session_id, source_id, state)`` rows). The sessions' contributions to the rollup
    must have been taken out first (see :class:`rollup.Pending`)."""
    if steps:
        _upsert_values(conn, "steps", STEP_COLUMNS, steps, steps_stored)
    _upsert(conn, "incidents", incidents)
    if errors:
        columns = list(errors[0])
        insert(conn, "ingest_errors", columns, (tuple(e[c] for c in columns) for e in errors))
    _upsert(conn, "sessions", sessions)
    _upsert(
        conn,
        "fold_state",
        [
            {"session_id": sid, "source_id": src, "state": state}
            for sid, src, state in states
        ],
        states_stored,
    )
    if shared:
        conn.executemany(
            "INSERT OR IGNORE INTO session_sources (source_id, session_id) VALUES (?, ?)", shared
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


def move_source(conn: sqlite3.Connection, source_id: str, path: str) -> None:
    """A source's file found at a new path (a rename)."""
    conn.execute("UPDATE sources SET path = ? WHERE source_id = ?", (clean(path), source_id))


def forget_source(conn: sqlite3.Connection, source_id: str, pending: rollup.Pending) -> list[str]:
    """Delete everything that came from one source (before it is read again from the start);
    its sessions' contributions are taken out of the rollup through ``pending``.

    A session whose records are in several files (``session_sources``) goes whole, so the
    other files that hold it are forgotten too (and so on, for their other sessions): each is
    read again from its start when next ingested. Returns the paths of those others."""
    linked = _linked_sources(conn, source_id)
    paths = []
    for each in (source_id, *sorted(linked)):
        row = conn.execute("SELECT path FROM sources WHERE source_id = ?", (each,)).fetchone()
        if each != source_id and row is not None:
            paths.append(row[0])
        _forget_one(conn, each, pending)
    return paths


def _linked_sources(conn: sqlite3.Connection, source_id: str) -> set[str]:
    """The other sources that share a session with ``source_id``, directly or through others."""
    found, todo = {source_id}, [source_id]
    while todo:
        current = todo.pop()
        rows = conn.execute(
            "SELECT source_id FROM sessions WHERE session_id IN ("
            "  SELECT session_id FROM session_sources WHERE source_id = ?) "
            "UNION SELECT source_id FROM session_sources WHERE session_id IN ("
            "  SELECT session_id FROM sessions WHERE source_id = ? "
            "  UNION SELECT session_id FROM session_sources WHERE source_id = ?)",
            (current, current, current),
        )
        for (other,) in rows:
            if other not in found:
                found.add(other)
                todo.append(other)
    return found - {source_id}


def _forget_one(conn: sqlite3.Connection, source_id: str, pending: rollup.Pending) -> None:
    sessions = "SELECT session_id FROM sessions WHERE source_id = ?"
    pending.take_out(conn, [sid for (sid,) in conn.execute(sessions, (source_id,))])
    conn.execute(
        f"DELETE FROM session_sources WHERE source_id = ? OR session_id IN ({sessions})",
        (source_id, source_id),
    )
    for table in ("incidents", "steps"):
        conn.execute(f"DELETE FROM {table} WHERE session_id IN ({sessions})", (source_id,))
    conn.execute("DELETE FROM fold_state WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM sessions WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM ingest_errors WHERE source_id = ?", (source_id,))
    conn.execute("DELETE FROM sources WHERE source_id = ?", (source_id,))
