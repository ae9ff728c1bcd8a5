"""Ingest: ledger files into the database, incrementally, one committed batch at a time.

The thin shell around the pure fold. For each file it works out what the database already
holds of it (the ``sources`` table: identity, byte offset, fold settings), reads only the new
complete lines, folds them, and commits rows, resumable session state and the new offset
together. Truncated, replaced or re-budgeted files are read again from the start.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from . import parallel, rollup, store, verdict_store
from .budget import Budget
from .bulk import bulk_work
from .files import (
    DEFAULT_MAX_LINE,
    FileInfo,
    discover,
    read_lines,
    sha,
    shown,
    sniff,
    storable,
    tail_hash,
)
from .fold import Fold, Session
from .importers import DOCUMENTS
from .redact import redact
from .source import Cursor, Folded, SourceFold
from .vendors import DEFAULT_VENDOR_MAP

#: Bumped when the same file would give other rows: every source is then folded again.
#: 2: agent-log importers, round continuations. 3: the retry-storm key and the stop detail
#: are redacted (rows of 1 and 2 may hold secrets there).
FOLD_VERSION = "3"
DEFAULT_BATCH = 20_000
DEFAULT_INTERVAL = 1.0  # seconds between two passes of --follow
#: New files hold at least this much before workers are started for them: under about 2 MB,
#: starting them and handing rows over cost what they save (measured on 2 cores: 1.1 MB
#: 0.09 s either way, 4.5 MB 0.27-0.34 s against 0.31-0.36 s, 237 MB 7.4 s against 12.2 s).
PARALLEL_MIN_BYTES = 4 * 1024 * 1024
#: TEST ONLY, not an option: seconds the writer sleeps after each commit, read once from
#: AGENT_LEDGER_TEST_BATCH_PAUSE (unset or 0: no pause, no cost). Tests that must stop or kill
#: an ingest in the middle of its work set it, so that the work lasts at least this long per
#: batch however fast the machine is (with workers too: every batch is committed here).
TEST_BATCH_PAUSE = float(os.environ.get("AGENT_LEDGER_TEST_BATCH_PAUSE") or 0)


@dataclass
class Options:
    budget: Budget = field(default_factory=Budget)
    vendor_map: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_VENDOR_MAP))
    task_class: str | None = None
    dialect: str | None = None
    max_line: int = DEFAULT_MAX_LINE
    batch: int = DEFAULT_BATCH
    jobs: int = 0  # worker processes folding new files (see ledger.parallel)
    parallel_min_bytes: int = PARALLEL_MIN_BYTES

    @property
    def fold_digest(self) -> str:
        """Changes whenever the same file would fold differently."""
        settings = {
            "fold": FOLD_VERSION,
            "budget": self.budget.to_dict(),
            "vendor_map": dict(sorted(self.vendor_map.items())),
        }
        return sha(json.dumps(settings, sort_keys=True).encode())[:16]

    def make_fold(self) -> Fold:
        return Fold(self.budget, self.vendor_map, redact)


@dataclass
class Summary:
    files: int = 0
    new_files: int = 0
    updated_files: int = 0
    unchanged_files: int = 0
    lines: int = 0
    blank_lines: int = 0
    steps: int = 0
    errors: int = 0
    bytes_read: int = 0
    notices: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    stop_reasons: Counter[str] = field(default_factory=Counter)
    redactions: int = 0
    unknown_records: dict[str, Counter[str]] = field(default_factory=dict)  # path -> type -> n
    passes: int = 1
    workers: int = 0  # worker processes that folded new files (the most in any pass)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "new_files": self.new_files,
            "updated_files": self.updated_files,
            "unchanged_files": self.unchanged_files,
            "lines": self.lines,
            "blank_lines": self.blank_lines,
            "sessions": len(self.sessions),
            "steps": self.steps,
            "errors": self.errors,
            "redactions": self.redactions,
            "bytes_read": self.bytes_read,
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
            "notices": self.notices,
            "waiting": self.waiting,
            "unknown_records": {
                path: dict(sorted(counts.items()))
                for path, counts in sorted(self.unknown_records.items())
            },
            "passes": self.passes,
            "workers": self.workers,
        }


Progress = Callable[[int], None]


def task_class_for(path: Path, options: Options) -> str:
    """``--task-class`` if given, else the ledger file's parent folder name."""
    return options.task_class or path.resolve().parent.name


class Ingester:
    def __init__(
        self,
        db: sqlite_utils.Database,
        options: Options | None = None,
        progress: Progress | None = None,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> None:
        self.db = db
        self.options = options or Options()
        self.fold = self.options.make_fold()
        self.progress = progress or (lambda _n: None)
        self.should_stop = should_stop
        self.summary = Summary()
        self._pending = 0  # lines in the open write transaction (see _unit)
        self._rollup = rollup.Pending()  # sessions it has taken out of the rollup
        self._workers: parallel.Workers | None = None
        self._jobs: dict[str, parallel.Job] = {}
        self._redactions_ahead = 0

    def ingest(self, paths: Iterable[str | Path], missing_ok: bool = False) -> Summary:
        """One pass over ``paths``; stops between batches once ``should_stop()`` is true."""
        self.summary.files = self.summary.unchanged_files = 0
        self.summary.waiting = []
        self._touched: set[str] = set()
        self._forgot = False
        before = (self.summary.new_files, self.summary.updated_files)
        files = self._storable(discover(paths, missing_ok))
        with bulk_work():
            self._workers = self._start_workers(files)
            try:
                for path in files:
                    if self.should_stop():
                        break
                    try:
                        self._ingest_file(path)
                    except OSError as exc:  # gone or unreadable since it was listed
                        self._notice(
                            f"{path}: could not be read ({exc.strerror or exc}); skipped")
            except BaseException:
                self._end_transaction("ROLLBACK")
                raise
            finally:
                if self._workers is not None:
                    self._workers.close()
                    self._workers, self._jobs = None, {}
            self._end_transaction("COMMIT")
        # One fold for every pass, and what workers folded and this process wrote.
        self.summary.redactions = self.fold.redactions + self._redactions_ahead
        self.summary.stop_reasons = count_stop_reasons(self.db, self.summary.sessions)
        changed = (self.summary.new_files, self.summary.updated_files) != before
        verdict_store.after_ingest(
            self.db, changed, None if self._forgot else self._touched
        )
        return self.summary

    @contextmanager
    def _unit(self, lines: int = 0) -> Iterator[sqlite3.Connection]:
        """One unit of work on one file (claiming it, or a batch of its lines), atomic.

        Units share one write transaction (each in a savepoint, so a file that fails takes
        back only its own unit) until it holds ``--batch-size`` lines: a night of many small
        files costs a commit per batch, not one or two per file. ``lines``: how many the unit
        adds. What a commit covers is consistent: rows, resumable state and offsets together.
        """
        conn = self.db.conn
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
        conn.execute("SAVEPOINT unit")
        taken_out = self._rollup.mark()
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK TO unit")
            conn.execute("RELEASE unit")
            self._rollup.reset(taken_out)
            raise
        conn.execute("RELEASE unit")
        self._add_pending(lines)

    def _add_pending(self, lines: int) -> None:
        self._pending += lines
        if self._pending >= self.options.batch:
            self._end_transaction("COMMIT")

    def _end_transaction(self, how: str) -> None:
        conn = self.db.conn
        if conn.in_transaction:
            if how == "COMMIT":
                self._rollup.add_back(conn)
            conn.execute(how)
            if TEST_BATCH_PAUSE and how == "COMMIT":
                time.sleep(TEST_BATCH_PAUSE)
        self._rollup = rollup.Pending()
        self._pending = 0

    def _forget(self, conn: Any, source_id: str) -> None:
        """Delete what came from a source; the verdicts then need a full recomputation."""
        self._forgot = True
        store.forget_source(conn, source_id, self._rollup)

    def _ingest_file(self, path: Path) -> None:
        self.summary.files += 1
        info = sniff(path, self.options.max_line, self.options.dialect)
        if info.fingerprint is None:
            self.summary.waiting.append(str(path))
            self.progress(info.size)
            return
        with self._unit() as conn:
            source = self._claim(conn, info)
        if source is None:
            self.summary.unchanged_files += 1
            self.progress(info.size)
            return
        batches = self._batches_ahead(info, source)
        if batches is not None:
            self._ingest_ahead(info, source, batches)
        elif info.dialect is None:
            self._ingest_unknown(info, source)
        else:
            self._ingest_here(info, source)

    def _ingest_here(self, info: FileInfo, source: dict[str, Any]) -> None:
        """Fold a file of a known dialect in this process, from where ``source`` stands."""
        if info.dialect in DOCUMENTS:
            self._ingest_document(info, source)
        else:
            self._ingest_lines(info, source)

    # -- new files folded by workers (ledger.parallel) ------------------------------------

    def _start_workers(self, files: list[Path]) -> parallel.Workers | None:
        """Workers for the files no ingest has seen, if there is enough of them to gain."""
        jobs = self._plan(files) if self.options.jobs > 0 else []
        if len(jobs) < 2 or sum(j.size for j in jobs) < self.options.parallel_min_bytes:
            return None
        self._jobs = {job.path: job for job in jobs}
        db_file = self.db.conn.execute("PRAGMA database_list").fetchone()[2]
        workers = parallel.Workers(jobs, self.options.jobs, self.options, db_file)
        self.summary.workers = max(self.summary.workers, workers.count)
        return workers

    def _plan(self, files: list[Path]) -> list[parallel.Job]:
        """The files whose claims will make new sources, and the ids those claims will give
        (:meth:`_claim` gives a new file the first free id from its fingerprint)."""
        conn = self.db.conn
        taken: dict[str, set[str]] = {}
        jobs = []
        for path in files:
            try:
                info = sniff(path, self.options.max_line, self.options.dialect)
            except OSError:
                continue
            if info.dialect is None or info.fingerprint is None:
                continue
            if store.sources_like(conn, _names_of(path), info.fingerprint):
                continue
            base = info.fingerprint[:12]
            ids = taken.setdefault(base, store.source_ids_from(conn, base))
            source_id = _unique_id(base, ids)
            ids.add(source_id)
            jobs.append(parallel.Job(
                str(path), source_id, info.dialect, task_class_for(path, self.options),
                info.fingerprint, info.size,
            ))
        return jobs

    def _batches_ahead(
        self, info: FileInfo, source: dict[str, Any]
    ) -> Iterator[parallel.Message] | None:
        """A worker's batches for this file, if its claim made the source the worker folded."""
        job = self._jobs.get(str(info.path))
        if self._workers is None or job is None:
            return None
        claimed = (source["source_id"], source["offset"], source["dialect"],
                   source["task_class"], source["fingerprint"])
        if claimed != (job.source_id, 0, job.dialect, job.task_class, job.fingerprint):
            return None
        return self._workers.batches(job.path)

    def _ingest_ahead(
        self, info: FileInfo, source: dict[str, Any], batches: Iterator[parallel.Message]
    ) -> None:
        """Write a worker's batches as :meth:`_ingest_lines` would have folded them, each in one
        unit with its parts, checking first what the worker could not know; where that fails,
        go on here from the last batch written."""
        try:
            for message in batches:
                if self.should_stop():
                    return
                tally = _Tally()
                with self._unit() as conn:
                    current = store.source_row(conn, source["source_id"])
                    if _replaced(current, source) or current["offset"] != message.start:
                        break
                    while isinstance(message, parallel.Part):
                        self._write_part(conn, message, tally)
                        message = next(batches, None)
                        if message is None:
                            raise parallel.WorkerFailed("a batch ended without its end")
                    self._check_owners(conn, message.owners)
                    current.update(offset=message.end, check_hash=message.check_hash,
                                   size=message.size, mtime=message.mtime)
                    self._commit(conn, message.folded, current)
                self._add_pending(message.lines or 1)
                self._count_rows(source["path"], tally.steps, tally.errors, tally.unknown)
                self._redactions_ahead += tally.redactions + message.redactions
                source = current
                self._count_read(message.lines, message.end - message.start)
            else:
                return
        except (parallel.WorkerFailed, _Refused):
            pass  # the batch in hand was rolled back with its unit
        self._ingest_here(info, source)

    def _write_part(self, conn: Any, part: parallel.Part, tally: _Tally) -> None:
        """The rows of a batch's first lines (its sessions' state comes with its end)."""
        self._check_owners(conn, part.owners)
        out = part.out
        self._rollup.take_out(conn, {row[0] for row in out.steps})
        store.write_batch(conn, steps=out.steps, incidents=out.incidents, errors=out.errors,
                          sessions=[], states=[], source=None)
        tally.add(out, part.redactions)

    @staticmethod
    def _check_owners(conn: Any, owners: dict[str, str | None]) -> None:
        if not parallel.owners_hold(conn, owners):
            raise _Refused

    # -- identity ------------------------------------------------------------------------------

    def _claim(self, conn: Any, info: FileInfo) -> dict[str, Any] | None:
        """The ``sources`` row to continue from (new, resumed or reset), or None if unchanged."""
        digest = self.options.fold_digest
        names = _names_of(info.path)
        known = store.sources_like(conn, names, info.fingerprint or "")
        here = [s for s in known if s["path"] in names]
        same = [s for s in here if s["fingerprint"] == info.fingerprint]
        if not same:
            same = [
                s for s in known
                if s["fingerprint"] == info.fingerprint and _gone_or_changed(s)
            ]
            # Files may share a first line: prefer the source this file continues.
            same.sort(key=lambda s: not _continues(s, info))
            for moved in same[:1]:
                self._notice(f"{info.path}: moved from {moved['path']}, not read again")
        for stale in here:
            if stale["fingerprint"] != info.fingerprint:
                self._notice(f"{info.path}: replaced (its first line changed); read again")
                self._forget(conn, stale["source_id"])
        if same:
            source = same[0]
            reason = self._reset_reason(source, info, digest)
            if reason:
                self._notice(f"{info.path}: {reason}; read again from the start")
                self._forget(conn, source["source_id"])
                return self._new_source(conn, info, source["source_id"], digest)
            if source["offset"] >= info.size:
                if source["path"] != str(info.path):
                    conn.execute(
                        "UPDATE sources SET path = ? WHERE source_id = ?",
                        (str(info.path), source["source_id"]),
                    )
                return None
            source["path"] = str(info.path)
            self.summary.updated_files += 1
            return source
        base = (info.fingerprint or "")[:12]
        source_id = _unique_id(base, store.source_ids_from(conn, base))
        return self._new_source(conn, info, source_id, digest)

    def _reset_reason(self, source: dict[str, Any], info: FileInfo, digest: str) -> str | None:
        if source["fold_digest"] != digest:
            return ("budget or vendor map changed since the last ingest "
                    "(or a newer agent-ledger folds differently)")
        if info.size < source["offset"]:
            return f"truncated (now {info.size} bytes, {source['offset']} were read)"
        if source["dialect"] != info.dialect:
            # A file too short to tell its dialect at first, and now long enough.
            return f"now read as {info.dialect or 'unknown'}, not {source['dialect'] or 'unknown'}"
        if source["dialect"] in DOCUMENTS and info.size != source["offset"]:
            return "changed (a JSON document is read whole)"
        if not _continues(source, info):
            return "rewritten (the bytes already read have changed)"
        return None

    def _new_source(
        self, conn: Any, info: FileInfo, source_id: str, digest: str
    ) -> dict[str, Any]:
        self.summary.new_files += 1
        at = store.now()
        source = {
            "source_id": source_id,
            "path": str(info.path),
            "dialect": info.dialect,
            "task_class": task_class_for(info.path, self.options),
            "fingerprint": info.fingerprint,
            "check_hash": None,
            "offset": 0,
            "size": info.size,
            "mtime": info.mtime,
            "lines": 0,
            "blank_lines": 0,
            "fold_digest": digest,
            "cursor": json.dumps(Cursor().to_dict()),
            "unknown_records": None,
            "first_ingested_at": at,
            "ingested_at": at,
        }
        store.write_batch(
            conn, steps=[], incidents=[], errors=[], sessions=[], states=[], source=source
        )
        return source

    # -- reading -------------------------------------------------------------------------------

    def _source_fold(self, conn: Any, source: dict[str, Any]) -> SourceFold:
        source_id = source["source_id"]

        def load(session_id: str) -> Session | None:
            data = store.load_state(conn, source_id, session_id)
            return None if data is None else Session.from_resume(data)

        return SourceFold(
            self.fold,
            source_id,
            source["path"],
            source["dialect"],
            source["task_class"],
            Cursor(**json.loads(source["cursor"])),
            {},
            owner_of=lambda sid: store.session_owner(conn, sid),
            load=load,
        )

    def _ingest_lines(self, info: FileInfo, source: dict[str, Any]) -> None:
        source_id = source["source_id"]
        with info.path.open("rb") as f:
            fold: SourceFold | None = None
            while not self.should_stop():
                offset = source["offset"]
                lines, end = read_lines(f, offset, self.options.batch, self.options.max_line)
                if not lines:
                    break
                with self._unit(len(lines)) as conn:
                    current = store.source_row(conn, source_id)
                    if _replaced(current, source):
                        return  # another ingest replaced this source meanwhile
                    if fold is None or current["offset"] != offset:
                        source = current
                        fold = self._source_fold(conn, source)
                        if current["offset"] != offset:
                            continue  # another process got further: read from its offset
                    fold.feed_lines(lines, self.options.max_line)
                    source["offset"] = end
                    source["check_hash"] = tail_hash(f, end)
                    stat = os.fstat(f.fileno())
                    source["size"], source["mtime"] = stat.st_size, stat.st_mtime
                    self._commit(conn, fold.take_folded(), source)
                self._count_read(len(lines), end - offset)

    def _count_read(self, lines: int, size: int) -> None:
        self.summary.lines += lines
        self.summary.bytes_read += size
        self.progress(size)

    def _ingest_document(self, info: FileInfo, source: dict[str, Any]) -> None:
        data = info.path.read_bytes()
        with self._unit(1) as conn:
            fold = self._source_fold(conn, source)
            fold.feed_document(data)
            source["offset"] = len(data)
            source["size"], source["mtime"] = info.size, info.mtime
            self._commit(conn, fold.take_folded(), source)
        self._count_read(0, len(data))

    def _ingest_unknown(self, info: FileInfo, source: dict[str, Any]) -> None:
        """A file whose dialect cannot be told: one error with its head, and consume it whole.

        When it grows and still cannot be told, its error is replaced, not repeated.
        """
        with self._unit(1) as conn, info.path.open("rb") as f:
            self._forget(conn, source["source_id"])
            fold = self._source_fold(conn, source)
            fold.error(1, 0, info.problem or "cannot tell the dialect", f.read(2048))
            source["offset"] = info.size
            source["check_hash"] = tail_hash(f, info.size)
            source["size"], source["mtime"] = info.size, info.mtime
            self._commit(conn, fold.take_folded(), source)
        self.progress(info.size)

    def _commit(self, conn: Any, folded: Folded, source: dict[str, Any]) -> None:
        out, cursor = folded.out, folded.cursor
        source["cursor"] = json.dumps(cursor)
        source["lines"] = cursor["line"]
        self.summary.blank_lines += cursor["blank_lines"] - (source["blank_lines"] or 0)
        source["blank_lines"] = cursor["blank_lines"]
        unknown = cursor["unknown"]
        source["unknown_records"] = json.dumps(unknown, sort_keys=True) if unknown else None
        source["ingested_at"] = store.now()
        touched = [row["session_id"] for row in folded.sessions]
        self._rollup.take_out(conn, touched)
        store.write_batch(
            conn,
            steps=out.steps,
            incidents=out.incidents,
            errors=out.errors,
            sessions=folded.sessions,
            states=folded.states,
            source=source,
        )
        self._count_rows(source["path"], len(out.steps), len(out.errors), out.unknown)
        self.summary.sessions.update(touched)
        self._touched.update(touched)

    def _count_rows(self, path: str, steps: int, errors: int, unknown: Counter[str]) -> None:
        self.summary.steps += steps
        self.summary.errors += errors
        if unknown:
            self.summary.unknown_records.setdefault(path, Counter()).update(unknown)

    def _storable(self, files: list[Path]) -> list[Path]:
        """The files whose path the database can keep; the others are skipped, each with a
        notice (its lines cannot be traced back to a file the database cannot name)."""
        kept = []
        for path in files:
            if storable(path):
                kept.append(path)
            else:
                self._notice(f"{shown(path)}: the path is not valid UTF-8, which the database "
                             "cannot store; skipped (rename the file to ingest it)")
        return kept

    def _notice(self, message: str) -> None:
        self.summary.notices.append(message)



class _Refused(Exception):
    """A worker's batch folded on a session owner that is no longer so (see _ingest_ahead)."""


@dataclass
class _Tally:
    """What the parts of a batch added, counted into the summary once the batch is written."""

    steps: int = 0
    errors: int = 0
    redactions: int = 0
    unknown: Counter[str] = field(default_factory=Counter)

    def add(self, out: Any, redactions: int) -> None:
        self.steps += len(out.steps)
        self.errors += len(out.errors)
        self.unknown.update(out.unknown)
        self.redactions += redactions


def count_stop_reasons(db: sqlite_utils.Database, sessions: Iterable[str]) -> Counter[str]:
    """How many of ``sessions`` stopped for each reason, as the database holds them now."""
    ids = sorted(sessions)
    counts: Counter[str] = Counter()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        for reason, count in db.conn.execute(
            f"SELECT stop_reason, count(*) FROM sessions "
            f"WHERE session_id IN ({marks}) GROUP BY stop_reason",
            chunk,
        ):
            counts[reason] += count
    return counts


def _replaced(current: dict[str, Any] | None, source: dict[str, Any]) -> bool:
    """Whether the ``sources`` row as it is now (``current``) is no longer ``source``:
    gone, or made again for another file or fold (by another ingest, meanwhile)."""
    return current is None or any(current[k] != source[k] for k in ("fingerprint", "fold_digest"))


def _gone_or_changed(source: dict[str, Any]) -> bool:
    """A known source whose file is no longer at its recorded path (so it may have moved)."""
    path = Path(source["path"])
    if not path.exists():
        return True
    try:
        info = sniff(path)
    except OSError:
        return True
    return info.fingerprint != source["fingerprint"]


def _continues(source: dict[str, Any], info: FileInfo) -> bool:
    """Whether the file ``info`` still holds the bytes ``source`` has read."""
    if source["offset"] > info.size:
        return False
    if source["dialect"] in DOCUMENTS or not source["offset"]:
        return True
    try:
        with info.path.open("rb") as f:
            return tail_hash(f, source["offset"]) == source["check_hash"]
    except OSError:
        return False


def _names_of(path: Path) -> list[str]:
    """The names ``sources`` may know a file by: its absolute path, and its path relative to
    this folder (databases made before paths were stored absolute). A source found by its old
    name takes the absolute one from this ingest on."""
    names = [str(path)]
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows): no relative name
        return names
    return names if relative == names[0] else [*names, relative]


def _unique_id(base: str, taken: set[str]) -> str:
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def follow(
    db_path: str | os.PathLike[str],
    paths: Iterable[str | Path],
    options: Options | None = None,
    interval: float = DEFAULT_INTERVAL,
    stop: threading.Event | None = None,
    on_pass: Callable[[Summary], None] | None = None,
) -> Summary:
    """Ingest ``paths`` every ``interval`` seconds until ``stop`` is set (Ctrl-C in the CLI).

    Each pass is an ordinary incremental ingest, committed batch by batch, so stopping loses
    nothing that was consumed; a pass stops between two batches. Files that appear under the
    folders are picked up; paths that vanish (rotated away) are waited for. ``on_pass`` gets
    the summary so far after each pass; the summary returned covers every pass.
    """
    stop = stop or threading.Event()
    paths = list(paths)
    discover(paths)  # a bad path is an error before any database is made
    db = store.connect(db_path)
    try:
        ingester = Ingester(db, options, should_stop=stop.is_set)
        ingester.ingest(paths)
        while True:
            if on_pass is not None:
                on_pass(ingester.summary)
            if stop.wait(interval):
                return ingester.summary
            ingester.summary.passes += 1
            ingester.ingest(paths, missing_ok=True)
    finally:
        db.conn.close()



def ingest(
    db_path: str | os.PathLike[str],
    paths: Iterable[str | Path],
    options: Options | None = None,
    progress: Progress | None = None,
) -> Summary:
    """Ingest ``paths`` into the database at ``db_path``."""
    files = discover(paths)  # a bad path is an error before any database is made
    db = store.connect(db_path)
    try:
        return Ingester(db, options, progress).ingest(files)
    finally:
        db.conn.close()
