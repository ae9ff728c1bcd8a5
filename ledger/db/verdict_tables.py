"""The verdict tables: read what :mod:`ledger.analysis.verdicts` needs, write what it finds.

``session_parity``, ``cap_coverage`` and ``task_classes`` are derived from ``sessions``,
``steps`` and ``incidents``. After an ingest, the parity of the sessions it wrote is checked
again and the verdicts of their task classes are recomputed from the stored parity, grouped:
the cost follows what the ingest added, not the size of the database. ``agent-ledger verdicts``
(and an ingest that deleted sessions) rewrites them whole. The settings they were computed with
(tolerance, minimum sessions) are kept in ``verdict_settings`` so that a later ingest keeps them.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ledger.analysis.verdicts import (
    LISTED,
    STAY,
    Group,
    Settings,
    Verdicts,
    by_task_class,
    compute,
    coverage,
    judge,
    parity,
)
from ledger.db import migrations, writes

SESSIONS_SQL = """
select
  s.session_id, s.task_class, s.dialect, s.stop_reason, s.stop_at, s.stop_detail,
  s.recorded_stop, s.vendor_stop, s.rounds, s.steps, s.tool_calls, s.meters, s.budget,
  s.budget_digest,
  st.total_rounds as stop_rounds, st.total_steps as stop_steps,
  st.total_tool_calls as stop_tool_calls
from sessions s
left join steps st on st.session_id = s.session_id and st.idx = s.stop_at
"""

#: What tells a class's sessions apart for its verdict, as ``session_parity`` holds it: the
#: columns of ``migrations.PARITY_GROUP_INDEX`` between the class and the session.
_GROUP_KEY = migrations.PARITY_GROUP_INDEX[1:-1]

#: A session's group: its class and what tells it apart (the columns ``parity_groups`` counts
#: sessions by).
_GROUP = ("task_class", *_GROUP_KEY)
_group_of = itemgetter(*_GROUP)

#: A class's groups and how many sessions each holds (kept up to date by :func:`_check`).
GROUPS_SQL = f"select {', '.join(_GROUP_KEY)}, sessions from parity_groups where task_class = ?"

#: The first ids of one group of a class, as many as a verdict names (a range of the
#: parity index: ``IS`` matches the NULLs a key may hold).
_IN_GROUP = "task_class = ? and " + " and ".join(f"{k} is ?" for k in _GROUP_KEY)
LISTED_SQL = f"""
select session_id from session_parity where {_IN_GROUP}
order by session_id limit {LISTED}
"""

#: The groups some sessions are in, as their stored parity has it (before it is replaced).
_GROUPS_OF_SQL = f"select {', '.join(_GROUP)} from session_parity where session_id in ({{marks}})"
#: Some sessions' stored parity rows (before they are replaced).
_PARITY_OF_SQL = "select * from session_parity where session_id in ({marks})"
#: Whether a group holds a session before this one (which is then not its first).
_BEFORE_SQL = f"select 1 from session_parity where {_IN_GROUP} and session_id < ? limit 1"

_MOVE_SQL = f"update parity_groups set sessions = sessions + ? where {_IN_GROUP}"
_NEW_GROUP_SQL = (
    f"insert into parity_groups ({', '.join(_GROUP)}, sessions) "
    f"values ({', '.join('?' for _ in _GROUP)}, ?)"
)
_EMPTY_SQL = f"delete from parity_groups where {_IN_GROUP} and sessions <= 0"

#: The parity detail and the budget of a group's first session.
FIRSTS_SQL = """
select p.session_id, p.parity_detail, s.budget
from session_parity p join sessions s on s.session_id = p.session_id
where p.session_id in ({marks})
"""

#: (``{of_classes}``: nothing, for every class, or :data:`OF_CLASSES`, see :func:`_incidents`.)
UNKNOWN_VENDOR_SQL = """
select session_id, task_class, key from incidents where kind = 'unknown_vendor'{of_classes}
order by session_id, start_idx
"""

#: The tools the action map did not name, per session: one row each, with its calls.
UNCLASSIFIED_SQL = """
select session_id, task_class, key, count(*) as calls from incidents
where kind = 'unclassified_tool'{of_classes}
group by session_id, task_class, key order by session_id, key
"""

#: The kinds of incident a verdict reads (the two queries above).
VERDICT_INCIDENTS = frozenset({"unknown_vendor", "unclassified_tool"})


def read_by_verdicts(incidents: Iterable[dict[str, Any]]) -> bool:
    """Whether any of these incident rows is of a kind a verdict reads."""
    return any(incident["kind"] in VERDICT_INCIDENTS for incident in incidents)


#: Some classes' incidents only (a class is its ``task_class``, NULL as empty: task_class_of).
OF_CLASSES = " and ifnull(task_class, '') in ({marks})"

CHUNK = 500  # ids per "IN (...)" list

if TYPE_CHECKING:  # annotations only: ledger.db.connection imports it (without pandas)
    import sqlite_utils


def _dicts(cursor: sqlite3.Cursor) -> Iterator[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return (dict(zip(names, row, strict=True)) for row in cursor)


def _chunks(ids: Iterable[str]) -> Iterator[tuple[list[str], str]]:
    """Sorted ids in chunks, each with its ``?, ?, ...`` placeholders."""
    ordered = sorted(ids)
    for start in range(0, len(ordered), CHUNK):
        chunk = ordered[start : start + CHUNK]
        yield chunk, ", ".join("?" for _ in chunk)


def stored_settings(conn: sqlite3.Connection) -> Settings:
    """The settings of the last computation, or the defaults."""
    row = conn.execute(
        "SELECT tolerance, min_sessions FROM verdict_settings WHERE id = 1"
    ).fetchone()
    return Settings(*row) if row else Settings()


def compute_from(conn: sqlite3.Connection, settings: Settings | None = None) -> Verdicts:
    """Verdicts over the database as it stands, without writing anything."""
    settings = settings or stored_settings(conn)
    sessions = list(_dicts(conn.execute(SESSIONS_SQL + "order by s.session_id")))
    return compute(sessions, _dicts(conn.execute(UNKNOWN_VENDOR_SQL.format(of_classes=""))),
                   settings, _dicts(conn.execute(UNCLASSIFIED_SQL.format(of_classes=""))))


def refresh(db: sqlite_utils.Database, settings: Settings | None = None) -> Verdicts:
    """Recompute the verdict tables whole and store them with the settings used; returns
    every row written."""
    with writes.immediate(db) as conn:
        verdicts = _recompute(conn, settings or stored_settings(conn), keep=True)
    verdicts.classes.sort(key=lambda c: (c["verdict"] != STAY, c["task_class"]))
    return verdicts


def _recompute(conn: sqlite3.Connection, settings: Settings, keep: bool) -> Verdicts:
    """Rewrite the verdict tables whole; ``keep``: return every row (else none, so memory
    holds a chunk of sessions and one class's groups, whatever the size of the database)."""
    verdicts = Verdicts(settings)
    for table in ("session_parity", "parity_groups", "cap_coverage", "task_classes"):
        writes.replace_all(conn, table, [])
    sessions = conn.execute(SESSIONS_SQL)
    classes = _check(conn, settings, sessions, verdicts.parity if keep else None)
    for part in _judge(conn, settings, classes):
        verdicts.coverage += part.coverage
        verdicts.classes += part.classes
    _settle(conn, settings)
    return verdicts


def after_ingest(
    db: sqlite_utils.Database, changed: bool, touched: set[str] | None = None,
    incidents: bool = True,
) -> None:
    """Called at the end of every ingest: bring the verdict tables up to date if the data
    changed, or compute them if they never were (a database made before they existed).

    ``touched``: the sessions the ingest wrote, when it deleted none; then only their parity
    is checked and only their task classes judged again (a class's verdict depends on its own
    sessions alone). None (it deleted some, to read them again): every session's parity is
    checked, and every class judged (:func:`_parity_changes`), or, past a chunk of changed
    sessions, everything is recomputed. Either way a class's rows are written only if they
    differ from the stored ones (writing cleans every text again, most of the cost: a grown
    session seldom changes its class's verdict).

    ``incidents``: whether the ingest wrote any incident a verdict reads (of unknown vendor
    stops or unclassified tools: :func:`read_by_verdicts`). When it wrote none, a touched
    class is judged only if what its verdict reads of its parity changed (see
    :func:`_reads_changed`: a grown session's counts change its parity row, but a verdict
    quotes only each group's first session); else judging it would give the rows stored.
    """
    never = db.conn.execute("SELECT count(*) FROM verdict_settings").fetchone()[0] == 0
    if not (changed or never):
        return
    with writes.immediate(db) as conn:
        settings = stored_settings(conn)
        changes = None if never or touched is not None else _parity_changes(conn, settings)
        if never or (touched is None and changes is None):
            _recompute(conn, settings, keep=False)
            return
        classes: set[str] = set()
        moved: set[str] | None = None if incidents or touched is None else set()
        if changes is not None:
            rows, gone = changes
            classes.update(_store_parity(conn, iter(rows)))
            classes.update(_drop_parity(conn, gone))
            classes.update(task_class for (task_class,) in conn.execute(
                "SELECT DISTINCT task_class FROM parity_groups"))
        for chunk, marks in _chunks(touched or ()):
            cursor = conn.execute(SESSIONS_SQL + f"where s.session_id in ({marks})", chunk)
            classes.update(_check(conn, settings, cursor, moved=moved))
        for _ in _judge(conn, settings, classes if moved is None else moved,
                        unchanged_kept=True):
            pass  # written as it goes (what changed); nothing kept
        _settle(conn, settings)


#: The stored parity, in the order of :data:`SESSIONS_SQL` by session.
_STORED_PARITY_SQL = "SELECT * FROM session_parity ORDER BY session_id"


def _parity_changes(
    conn: sqlite3.Connection, settings: Settings
) -> tuple[list[dict[str, Any]], list[str]] | None:
    """The parity rows of the sessions whose stored row is not what it would be now (a new
    session's too), and the sessions gone whose rows are still stored: the two tables read
    side by side in the order of their ids (memory holds what changed, no more than a
    :data:`CHUNK` of each; None past that, for the whole recomputation)."""
    stored = _dicts(conn.execute(_STORED_PARITY_SQL))
    old = next(stored, None)
    changed: list[dict[str, Any]] = []
    gone: list[str] = []
    for session in _dicts(conn.execute(SESSIONS_SQL + "order by s.session_id")):
        row = parity(session, settings.tolerance)
        while old is not None and old["session_id"] < row["session_id"]:
            gone.append(old["session_id"])
            old = next(stored, None)
        if old is not None and old["session_id"] == row["session_id"]:
            if not same_row(row, old):
                changed.append(row)
            old = next(stored, None)
        else:
            changed.append(row)
        if len(changed) > CHUNK or len(gone) > CHUNK:
            return None
    while old is not None:
        gone.append(old["session_id"])
        old = next(stored, None)
    return (changed, gone) if len(gone) <= CHUNK else None


def same_row(row: dict[str, Any], stored: dict[str, Any]) -> bool:
    """Whether writing ``row`` would store ``stored`` again: the same columns, each value of
    the same type and equal (a flag as the integer SQLite keeps; a text that differs is
    written, whatever redacting it would give)."""
    return row.keys() == stored.keys() and all(
        type(stored[k]) is type(int(v) if type(v) is bool else v)
        and stored[k] == v for k, v in row.items()
    )


def _drop_parity(conn: sqlite3.Connection, gone: list[str]) -> set[str]:
    """Delete the stored parity of sessions gone, out of their groups' counts; their classes."""
    moves: Counter[tuple[Any, ...]] = Counter()
    for chunk, marks in _chunks(gone):
        for group in conn.execute(_GROUPS_OF_SQL.format(marks=marks), chunk):
            moves[group] -= 1
        conn.execute(f"DELETE FROM session_parity WHERE session_id IN ({marks})", chunk)
    _count(conn, moves)
    return {group[0] for group in moves}


def _check(
    conn: sqlite3.Connection, settings: Settings, sessions: sqlite3.Cursor,
    into: list[dict[str, Any]] | None = None, moved: set[str] | None = None,
) -> set[str]:
    """Check and store the parity of ``sessions`` (rows of :data:`SESSIONS_SQL`), a chunk at a
    time, and move them between the counted groups; returns the task classes they were and
    are in (a class a session left is judged again too), and adds the rows to ``into`` and
    to ``moved`` the classes whose groups changed (see :func:`_store_parity`)."""
    checked = (parity(session, settings.tolerance) for session in _dicts(sessions))
    return _store_parity(conn, checked, into, moved)


def _store_parity(
    conn: sqlite3.Connection, checked: Iterator[dict[str, Any]],
    into: list[dict[str, Any]] | None = None, moved: set[str] | None = None,
) -> set[str]:
    """Store parity rows a chunk at a time, moving their sessions between the counted groups;
    the classes they were and are in (and the rows added to ``into``; to ``moved``, the
    classes whose verdicts read something that changed: :func:`_reads_changed`)."""
    classes: set[str] = set()
    while chunk := list(islice(checked, CHUNK)):
        moves: Counter[tuple[Any, ...]] = Counter()
        ids = [row["session_id"] for row in chunk]
        marks = ", ".join("?" for _ in ids)
        rows = _dicts(conn.execute(_PARITY_OF_SQL.format(marks=marks), ids))
        stored = {old["session_id"]: old for old in rows}
        moves.subtract(map(_group_of, stored.values()))
        writes.replace_all(conn, "session_parity", chunk, keep=True)
        moves.update(map(_group_of, chunk))
        _count(conn, moves)
        classes.update(group[0] for group in moves)
        if moved is not None:
            for row in chunk:
                old = stored.get(row["session_id"])
                if _reads_changed(conn, row, old):
                    moved.update([row["task_class"], *([old["task_class"]] if old else [])])
        if into is not None:
            into += chunk
    return classes


def _reads_changed(
    conn: sqlite3.Connection, row: dict[str, Any], old: dict[str, Any] | None
) -> bool:
    """Whether the parity ``row`` written over the stored one (``old``: None if there was
    none) changed what a verdict reads: its class's groups (a session joined or left one),
    or the detail of a group's first session (by id), which a verdict quotes. Its other
    columns (the counts) only make that detail, and its budget is the group's (its digest)."""
    if old is None or _group_of(old) != _group_of(row):
        return True
    if old["parity_detail"] == row["parity_detail"]:
        return False
    return conn.execute(_BEFORE_SQL, (*_group_of(row), row["session_id"])).fetchone() is None


def _count(conn: sqlite3.Connection, moves: Counter[tuple[Any, ...]]) -> None:
    """Add to each group's count of sessions what it gained or lost; drop emptied groups."""
    for group, change in moves.items():
        if change == 0:
            continue
        if conn.execute(_MOVE_SQL, (change, *group)).rowcount == 0:
            conn.execute(_NEW_GROUP_SQL, (*group, change))
        elif change < 0:
            conn.execute(_EMPTY_SQL, group)


def _judge(
    conn: sqlite3.Connection, settings: Settings, classes: set[str], unchanged_kept: bool = False
) -> Iterator[Verdicts]:
    """Rewrite the coverage and verdict of each class in ``classes`` from its stored parity,
    one class at a time (memory holds its groups, not its sessions); yields each part.
    ``unchanged_kept``: a class whose rows would be written as they are stored is left."""
    unknown = _incidents(conn, UNKNOWN_VENDOR_SQL, classes)
    tools = _incidents(conn, UNCLASSIFIED_SQL, classes)
    for cls in sorted(classes):
        groups = stored_groups(conn, cls)
        part = Verdicts(settings)
        if groups:  # (none: its last session left the database)
            covered = coverage(cls, groups)
            part.coverage = [c.row() for c in covered]
            part.classes = [judge(cls, groups, covered, unknown[cls], settings, tools[cls])]
        written = {"cap_coverage": part.coverage, "task_classes": part.classes}
        if unchanged_kept and all(_stored_as(conn, t, cls, rows) for t, rows in written.items()):
            continue
        for table, rows in written.items():
            conn.execute(f"DELETE FROM [{table}] WHERE task_class = ?", (cls,))
            writes.replace_all(conn, table, rows, keep=True)
        if groups:
            yield part


def _incidents(
    conn: sqlite3.Connection, sql: str, classes: set[str]
) -> dict[str, list[dict[str, Any]]]:
    """The incidents ``sql`` reads, by task class: of ``classes`` alone when they are a chunk
    or fewer (after an ingest, the classes of its sessions: not every incident of the
    database read each time), else of every class."""
    if len(classes) > CHUNK:
        return by_task_class(_dicts(conn.execute(sql.format(of_classes=""))))
    marks = ", ".join("?" for _ in classes)
    where = OF_CLASSES.format(marks=marks)
    return by_task_class(_dicts(conn.execute(sql.format(of_classes=where), sorted(classes))))


def _stored_as(conn: sqlite3.Connection, table: str, cls: str, rows: list[dict[str, Any]]) -> bool:
    """Whether ``table`` holds exactly ``rows`` for the class ``cls``, in their order."""
    stored = list(_dicts(conn.execute(
        f"SELECT * FROM [{table}] WHERE task_class = ? ORDER BY rowid", (cls,))))
    return len(stored) == len(rows) and all(map(same_row, rows, stored))


def stored_groups(conn: sqlite3.Connection, task_class: str) -> list[Group]:
    """A class's sessions as :class:`~ledger.analysis.verdicts.Group` s, read from its group counts
    and stored parity (what :func:`~ledger.analysis.verdicts.group` makes of the sessions
    themselves, in its order: by each group's first session)."""
    listed = [
        (key, count, [i for (i,) in conn.execute(LISTED_SQL, (task_class, *key))])
        for *key, count in conn.execute(GROUPS_SQL, (task_class,)).fetchall()
    ]
    firsts: dict[str, tuple[str | None, str | None]] = {}
    for chunk, marks in _chunks(ids[0] for _, _, ids in listed):
        for session_id, detail, budget in conn.execute(FIRSTS_SQL.format(marks=marks), chunk):
            firsts[session_id] = (detail, budget)
    groups = []
    for key, count, ids in sorted(listed, key=lambda group: group[2][0]):
        dialect, _digest, meters, stop_reason, recorded_stop, parity_ = key
        detail, budget = firsts[ids[0]]
        groups.append(Group(dialect, budget, meters, stop_reason, recorded_stop, parity_,
                            count, ids, detail or ""))
    return groups


def _settle(conn: sqlite3.Connection, settings: Settings) -> None:
    writes.replace_all(conn, "verdict_settings", [{
        "id": 1,
        "tolerance": settings.tolerance,
        "min_sessions": settings.min_sessions,
        "computed_at": writes.now(),
    }])
