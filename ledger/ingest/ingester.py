"""Ingest: ledger files into the database, incrementally, one committed batch at a time.

The thin shell around the pure fold. For each file it works out what the database already
holds of it (the ``sources`` table: identity, byte offset, fold settings), reads only the new
complete lines, folds them, and commits rows, resumable session state and the new offset
together. Truncated, replaced or re-budgeted files are read again from the start.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.core.fold import Session
from ledger.db import connection, family_stops, sources, verdict_tables, writes
from ledger.formats.detect import DOCUMENTS
from ledger.ingest import claims, unchanged
from ledger.ingest.bulk import bulk_work
from ledger.ingest.files import (
    FileInfo,
    Line,
    Listed,
    check_paths,
    listing,
    open_file,
    read_lines,
    shown,
    sniff,
    storable,
    tail_hash,
    unread,
    why,
)
from ledger.ingest.options import DEFAULT_INTERVAL, PART_LINES, Options, Progress
from ledger.ingest.source import Cursor, Folded, SourceFold
from ledger.ingest.summary import Summary
from ledger.ingest.transaction import Transaction

if TYPE_CHECKING:  # annotations only: ledger.db.connection imports sqlite-utils (without
    # pandas); the workers' module, the copies' fold and threading (--follow's event) are
    # imported where they are used (an ingest of a few new lines needs none: some 5 ms)
    import threading

    import sqlite_utils

    from ledger.ingest import copies, parallel


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
        self._tx = Transaction(db, self.options.batch)
        self._workers: parallel.Workers | None = None
        self._jobs: dict[str, parallel.Job] = {}
        self._redactions_ahead = 0
        self._told: set[str] = set()  # notices given (follow: once, not every pass)

    def ingest(self, paths: Iterable[str | Path], missing_ok: bool = False) -> Summary:
        """One pass over ``paths``; stops between batches once ``should_stop()`` is true.

        A file that cannot be read (not a regular file, unreadable, a link loop) is skipped
        with a notice naming it and why, in ``summary.skipped`` too; the others are ingested.
        """
        self.summary.files = self.summary.unchanged_files = 0
        self.summary.waiting = []
        self._touched: set[str] = set()
        self._forgot = False
        self._incidents = False  # whether an incident a verdict reads was written
        self._settings = claims.Settings(self.options)
        before = (self.summary.new_files, self.summary.updated_files)
        listed = self._storable(listing(paths, missing_ok, self._skip, self._tell))
        idle = self._idle(listed)
        with bulk_work():
            self._workers = self._start_workers([f for f in listed if f[0] not in idle])
            try:
                for name, _ in listed:
                    if self.should_stop():
                        break
                    try:
                        if name in idle:
                            self.summary.files += 1
                            self.summary.unchanged_files += 1
                            self.progress(idle[name])
                        else:
                            self._ingest_file(Path(name))
                    except FileNotFoundError:
                        pass  # gone since it was listed (rotated away): nothing to read
                    except OSError as exc:  # unreadable, or no longer a regular file
                        self._skip(name, why(exc))
            except BaseException:
                self._tx.end("ROLLBACK")
                raise
            finally:
                if self._workers is not None:  # (started once the rule set is loaded)
                    self.summary.workers = max(self.summary.workers, self._workers.count)
                    self._workers.close()
                    self._workers, self._jobs = None, {}
            self._tx.end("COMMIT")
        # One fold for every pass, and what workers folded and this process wrote.
        self.summary.redactions = self.fold.redactions + self._redactions_ahead
        self.summary.stop_reasons = sources.count_stop_reasons(self.db.conn, self.summary.sessions)
        changed = (self.summary.new_files, self.summary.updated_files) != before
        verdict_tables.after_ingest(
            self.db, changed, None if self._forgot else self._touched, self._incidents
        )
        options = self.options
        family_stops.after_ingest(
            self.db, options.subagents_count_in_parent, options.budget, options.vendor_map,
            None if self._forgot else self._touched,
        )
        return self.summary

    def _idle(self, listed: list[Listed]) -> dict[str, int]:
        """The files with nothing to read (sources read to their end, untouched since, under
        these fold settings), and their sizes: one query, and the stat each was listed with,
        so a pass costs what its new lines cost, however many files are only counted
        (:mod:`ledger.ingest.unchanged`)."""
        known = unchanged.read_to_end(self.db.conn)
        digest = self._settings.digest
        return {
            name: stat.st_size for name, stat in listed
            if unchanged.is_unchanged(known, name, stat, digest)
        }

    def _forget(self, conn: Any, source_id: str) -> None:
        """Delete what came from a source; the verdicts then need a full recomputation."""
        self._forgot = True
        for path in writes.forget_source(conn, source_id, self._tx.rollup):
            self._notice(f"{path}: shares a session with a file read again; its rows are "
                         "forgotten too, and it is read again from the start when next ingested")

    def _ingest_file(self, path: Path) -> None:
        self.summary.files += 1
        info = sniff(path, self.options.max_line, self.options.dialect)
        if info.fingerprint is None:
            self._waiting(path, 0, info.size)
            self.progress(info.size)
            return
        with self._tx.unit() as conn:
            claimed = claims.claim(conn, info, self._settings, self._notice,
                                   lambda source_id: self._forget(conn, source_id))
        source = claimed.source
        if source is None:
            self.summary.unchanged_files += 1
            self.progress(info.size)
            return
        if claimed.status == claims.NEW:
            self.summary.new_files += 1
        else:
            self.summary.updated_files += 1
        batches = self._batches_ahead(info, source)
        if batches is not None:
            self._ingest_ahead(info, source, batches)
        elif info.dialect is None:
            self._ingest_unknown(info, source)
        else:
            self._ingest_here(info, source)
        if info.dialect not in DOCUMENTS and not self.should_stop():
            self._report_unfinished(info, source["source_id"])

    def _report_unfinished(self, info: FileInfo, source_id: str) -> None:
        """A file read to its last newline whose last line is not a whole record yet: an agent
        still writing it, or a file cut short. Never silent: it is in the summary's waiting.
        A file read to the size it had when sniffed and when last read has none: no second
        look at it."""
        path = info.path
        row = sources.source_row(self.db.conn, source_id)
        if row is not None and row["offset"] < max(info.size, row["size"] or 0):
            left = unread(path, row["offset"])
            if left:
                self._waiting(path, row["offset"], left)

    def _waiting(self, path: Path, offset: int, size: int) -> None:
        self.summary.waiting.append({"path": str(path), "offset": offset, "bytes": size})

    def _ingest_here(self, info: FileInfo, source: dict[str, Any]) -> None:
        """Fold a file of a known dialect in this process, from where ``source`` stands."""
        if info.dialect in DOCUMENTS:
            self._ingest_document(info, source)
        else:
            self._ingest_lines(info, source)

    # -- new files folded by workers (ledger.ingest.parallel) ------------------------------------

    def _start_workers(self, listed: list[Listed]) -> parallel.Workers | None:
        """Workers for the files no ingest has seen, if there is enough of them to gain: not
        even planned when the files to read that are not this host's sources by their path
        (which :func:`claims.plan` leaves out) hold less than that (grown files, however big,
        start none)."""
        least = self.options.parallel_min_bytes
        if self.options.jobs <= 0 or _bytes(listed) < least:
            return None
        known = sources.paths_of(self.db.conn, self.options.host)
        unseen = [f for f in listed if f[0] not in known]
        if _bytes(unseen) < least:
            return None
        from ledger.ingest import parallel  # here: an ingest of grown files never needs it

        planned = claims.plan(self.db.conn, [Path(name) for name, _ in unseen], self._settings)
        jobs = [
            parallel.Job(str(p.path), p.source_id, p.info.dialect, p.task_class,
                         p.info.fingerprint, p.info.size)
            for p in planned
        ]
        if len(jobs) < 2 or sum(j.size for j in jobs) < least:
            return None
        self._jobs = {job.path: job for job in jobs}
        db_file = self.db.conn.execute("PRAGMA database_list").fetchone()[2]
        return parallel.Workers(jobs, self.options.jobs, self.options, db_file)

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
        from ledger.ingest import parallel  # (imported already: its workers sent these)

        try:
            for message in batches:
                if self.should_stop():
                    return
                tally = _Tally()
                absent: set[str] = set()  # the batch's sessions with no sessions row
                with self._tx.unit() as conn:
                    current = sources.source_row(conn, source["source_id"])
                    if claims.replaced(current, source) or current["offset"] != message.start:
                        break
                    while isinstance(message, parallel.Part):
                        self._write_part(conn, message, tally, absent)
                        message = next(batches, None)
                        if message is None:
                            raise parallel.WorkerFailed("a batch ended without its end")
                    self._check_owners(conn, message.owners, absent)
                    current.update(offset=message.end, check_hash=message.check_hash,
                                   size=message.size, mtime=message.mtime)
                    writes.known_storable(message.storable)
                    self._commit(conn, message.folded, current, steps_stored=True,
                                 absent=absent, states_stored=True)
                self._tx.add(message.lines or 1)
                self._count_rows(source["path"], tally.steps, tally.errors, tally.unknown)
                self._redactions_ahead += tally.redactions + message.redactions
                source = current
                self._count_read(message.lines, message.end - message.start)
            else:
                return
        except (parallel.WorkerFailed, _Refused):
            pass  # the batch in hand was rolled back with its unit
        self._ingest_here(info, source)

    def _write_part(
        self, conn: Any, part: parallel.Part, tally: _Tally, absent: set[str]
    ) -> None:
        """The rows of a batch's first lines (its sessions' state comes with its end)."""
        self._check_owners(conn, part.owners, absent)
        out = part.out
        self._tx.rollup.take_out(conn, {row[0] for row in out.steps}, absent)
        writes.write_batch(conn, steps=out.steps, incidents=out.incidents, errors=out.errors,
                          sessions=[], states=[], source=None, steps_stored=True)
        self._incidents |= verdict_tables.read_by_verdicts(out.incidents)
        tally.add(out, part.redactions)
        self._notices(out.notes)

    @staticmethod
    def _check_owners(conn: Any, owners: dict[str, str | None], absent: set[str]) -> None:
        """Refuse a batch folded on owners that are no longer so; add to ``absent`` the
        sessions found to have none (no ``sessions`` row: nothing to take out of the rollup)."""
        from ledger.ingest.parallel import owners_hold  # (imported already, as above)

        if not owners_hold(conn, owners):
            raise _Refused
        absent.update(sid for sid, owner in owners.items() if owner is None)

    # -- reading -------------------------------------------------------------------------------

    def _source_fold(
        self, conn: Any, source: dict[str, Any], absent: set[str] | None = None
    ) -> SourceFold:
        """The fold of ``source`` from where it stands; the sessions it finds no owner of
        (no ``sessions`` row) are added to ``absent``, if given."""
        source_id = source["source_id"]

        def owner_of(session_id: str) -> str | None:
            owner = sources.session_owner(conn, session_id)
            if owner is None and absent is not None:
                absent.add(session_id)
            return owner

        def load(session_id: str, owner: str = source_id) -> Session | None:
            data = sources.load_state(conn, owner, session_id)
            return None if data is None else Session.from_resume(data)

        return SourceFold(
            self.fold,
            source_id,
            source["path"],
            source["dialect"],
            source["task_class"],
            Cursor(**json.loads(source["cursor"])),
            {},
            owner_of=owner_of,
            load=load,
            join=lambda owner, sid: load(sid, owner),
            keys_of=lambda sid: sources.session_keys(conn, sid),
            exact_copies=True,
        )

    def _ingest_lines(self, info: FileInfo, source: dict[str, Any]) -> None:
        source_id = source["source_id"]
        absent: set[str] = set()  # a batch's sessions with no sessions row (see _commit)
        with open_file(info.path) as f:
            fold: SourceFold | None = None
            while not self.should_stop():
                offset = source["offset"]
                lines, end = read_lines(f, offset, self.options.batch, self.options.max_line)
                if end == offset:  # (no lines, or only the newline of a line read before)
                    break
                with self._tx.unit(len(lines)) as conn:
                    current = sources.source_row(conn, source_id)
                    if claims.replaced(current, source):
                        return  # another ingest replaced this source meanwhile
                    absent.clear()  # (looked up in this unit only)
                    if fold is None or current["offset"] != offset:
                        source = current
                        fold = self._source_fold(conn, source, absent)
                        if current["offset"] != offset:
                            continue  # another process got further: read from its offset
                    _fold_stored(fold, lines, self.options.max_line)
                    source["offset"] = end
                    source["check_hash"] = tail_hash(f, end)
                    stat = os.fstat(f.fileno())
                    source["size"], source["mtime"] = stat.st_size, stat.st_mtime
                    folded = fold.take_folded()
                    self._commit(conn, folded, source, steps_stored=True, absent=absent)
                    if folded.refold:  # a piece that does not continue its session exactly
                        source.update(self._fold_copies(conn, source, folded.refold))
                self._count_read(len(lines), end - offset)
                if folded.refold:
                    break  # (read whole with the other files of its sessions)

    def _fold_copies(
        self, conn: Any, source: dict[str, Any], sessions: list[str]
    ) -> dict[str, Any]:
        """Fold again, merged as one transcript, this file and every file holding one of
        ``sessions`` (and what shares a session with them, see :mod:`ledger.ingest.copies`);
        this file's new ``sources`` row."""
        path = source["path"]
        self._forgot = True
        owners = {sources.session_owner(conn, sid) for sid in sessions}
        paths = dict.fromkeys([path])
        for each in sorted({source["source_id"], *owners} - {None}):
            row = sources.source_row(conn, each)
            if row is not None:  # (None: forgotten with another already)
                paths.update(dict.fromkeys(
                    [row["path"], *writes.forget_source(conn, each, self._tx.rollup)]
                ))
        from ledger.ingest import copies  # here: only a piece of a shared session needs it

        pieces = self._pieces(conn, paths)
        self._notice(f"{path}: a piece of a session other files hold too: "
                     f"{len(pieces)} files folded again as one transcript")
        if not pieces:
            return {}
        folded, rows = copies.fold_merged(
            pieces, self._source_fold(conn, pieces[0].source), self.options.max_line,
            lambda source: SourceFold(self.fold, source["source_id"], source["path"],
                                      source["dialect"], source["task_class"], dry=True),
        )
        touched = [row["session_id"] for row in folded.sessions]
        self._tx.rollup.take_out(conn, touched)
        out = folded.out
        writes.write_batch(conn, steps=out.steps, incidents=out.incidents, errors=out.errors,
                           sessions=folded.sessions, states=folded.states, source=None,
                           shared=folded.shared)
        for row in rows:
            writes.write_batch(conn, steps=[], incidents=[], errors=[], sessions=[], states=[],
                               source=row)
        self._count_rows(path, len(out.steps), len(out.errors), out.unknown)
        self.summary.sessions.update(touched)
        self._touched.update(touched)
        return next((row for row in rows if row["path"] == path), {})

    def _pieces(self, conn: Any, paths: Iterable[str]) -> list[copies.Piece]:
        """The forgotten files of one dialect, claimed again and read whole (any other is
        read again from the start when next ingested)."""
        from ledger.ingest import copies  # (as in _fold_copies)

        pieces: list[copies.Piece] = []
        for each in paths:
            try:
                info = sniff(Path(each), self.options.max_line, self.options.dialect)
                dialect = pieces[0].source["dialect"] if pieces else info.dialect
                if info.fingerprint is None or info.dialect in (None, *DOCUMENTS) or (
                    info.dialect != dialect
                ):
                    continue
                claimed = claims.claim(conn, info, self._settings, self._notice,
                                       lambda sid: self._forget(conn, sid))
                if claimed.source is not None:
                    pieces.append(copies.read_whole(info.path, claimed.source,
                                                    self.options.max_line))
            except OSError as exc:
                self._skip(Path(each), why(exc))
        return pieces

    def _count_read(self, lines: int, size: int) -> None:
        self.summary.lines += lines
        self.summary.bytes_read += size
        self.progress(size)

    def _ingest_document(self, info: FileInfo, source: dict[str, Any]) -> None:
        with open_file(info.path) as f:
            data = f.read()
        with self._tx.unit(1) as conn:
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
        with self._tx.unit(1) as conn, open_file(info.path) as f:
            self._forget(conn, source["source_id"])
            fold = self._source_fold(conn, source)
            fold.error(1, 0, info.problem or "cannot tell the dialect", f.read(2048))
            source["offset"] = info.size
            source["check_hash"] = tail_hash(f, info.size)
            source["size"], source["mtime"] = info.size, info.mtime
            self._commit(conn, fold.take_folded(), source)
        self.progress(info.size)

    def _commit(
        self, conn: Any, folded: Folded, source: dict[str, Any], steps_stored: bool = False,
        absent: set[str] | frozenset[str] = frozenset(), states_stored: bool = False,
    ) -> None:
        """Write a folded batch with its source's new row (``steps_stored``: a worker cleaned
        its steps rows, see :func:`writes.stored_rows`; ``absent``: sessions found in this
        unit to have no row yet, see :meth:`rollup.Pending.take_out`; ``states_stored``: a
        worker cleaned its states too)."""
        out, cursor = folded.out, folded.cursor
        source["cursor"] = json.dumps(cursor)
        source["lines"] = cursor["line"]
        self.summary.blank_lines += cursor["blank_lines"] - (source["blank_lines"] or 0)
        source["blank_lines"] = cursor["blank_lines"]
        unknown = cursor["unknown"]
        source["unknown_records"] = json.dumps(unknown, sort_keys=True) if unknown else None
        source["ingested_at"] = writes.now()
        source["host"] = source.get("host") or self.options.host  # kept from the first ingest
        touched = [row["session_id"] for row in folded.sessions]
        self._tx.rollup.take_out(conn, touched, absent)
        writes.write_batch(
            conn,
            steps=out.steps,
            incidents=out.incidents,
            errors=out.errors,
            sessions=folded.sessions,
            states=folded.states,
            source=source,
            shared=folded.shared,
            steps_stored=steps_stored,
            states_stored=states_stored,
        )
        self._incidents |= verdict_tables.read_by_verdicts(out.incidents)
        self._count_rows(source["path"], len(out.steps), len(out.errors), out.unknown)
        self._notices(out.notes)
        self.summary.sessions.update(touched)
        self._touched.update(touched)

    def _count_rows(self, path: str, steps: int, errors: int, unknown: Counter[str]) -> None:
        self.summary.steps += steps
        self.summary.errors += errors
        if unknown:
            self.summary.unknown_records.setdefault(path, Counter()).update(unknown)

    def _storable(self, listed: list[Listed]) -> list[Listed]:
        """The files whose path the database can keep; the others are skipped, each with a
        notice (its lines cannot be traced back to a file the database cannot name)."""
        kept = []
        for each in listed:
            if storable(each[0]):
                kept.append(each)
            else:
                self._skip(each[0], "the path is not valid UTF-8, which the database cannot store",
                           advice=" (rename the file to ingest it)")
        return kept

    def _skip(self, path: str | Path, reason: str, advice: str = "") -> None:
        """A file left unread: a notice naming it (absolute, as ``sources`` would) and why,
        and in ``summary.skipped``."""
        name = shown(Path(os.path.abspath(path)))
        self.summary.skipped[name] = reason
        self._notice(f"{name}: {reason}; skipped{advice}")

    def _tell(self, path: Path, what: str) -> None:
        self._notice(f"{shown(Path(os.path.abspath(path)))}: {what}")

    def _notices(self, messages: Iterable[str]) -> None:
        for message in messages:
            self._notice(message)

    def _notice(self, message: str) -> None:
        if message not in self._told:
            self._told.add(message)
            self.summary.notices.append(message)


def _bytes(listed: list[Listed]) -> int:
    return sum(stat.st_size for _, stat in listed)


class _Refused(Exception):
    """A worker's batch folded on a session owner that is no longer so (see _ingest_ahead)."""


class _Tally:
    """What the parts of a batch added, counted into the summary once the batch is written
    (a plain class: a dataclass costs the import of every ingest some 0.5 ms to make)."""

    def __init__(self) -> None:
        self.steps = self.errors = self.redactions = 0
        self.unknown: Counter[str] = Counter()

    def add(self, out: Any, redactions: int) -> None:
        self.steps += len(out.steps)
        self.errors += len(out.errors)
        self.unknown.update(out.unknown)
        self.redactions += redactions


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
    if stop is None:
        import threading  # here: only following files waits on an event

        stop = threading.Event()
    paths = list(paths)
    check_paths(paths)  # a missing path is an error before any database is made
    db = connection.connect(db_path)
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



def _fold_stored(fold: SourceFold, lines: list[Line], max_line: int) -> None:
    """Fold ``lines`` a part at a time, each part's ``steps`` rows cleaned as the writer
    stores them (:func:`writes.stored_rows`) right after it is folded, as a worker does: the
    memo of redactions holds fewer texts than a batch has lines, so cleaning a whole batch's
    rows at the write redacted most of its texts a second time when they all differ."""
    steps = fold.out.steps
    for start in range(0, len(lines), PART_LINES):
        done = len(steps)
        fold.feed_lines(lines[start:start + PART_LINES], max_line)
        steps[done:] = writes.stored_rows(steps[done:])


def ingest(
    db_path: str | os.PathLike[str],
    paths: Iterable[str | Path],
    options: Options | None = None,
    progress: Progress | None = None,
) -> Summary:
    """Ingest ``paths`` into the database at ``db_path``."""
    paths = list(paths)
    check_paths(paths)  # a missing path is an error before any database is made
    db = connection.connect(db_path)
    try:
        return Ingester(db, options, progress).ingest(paths)
    finally:
        db.conn.close()
