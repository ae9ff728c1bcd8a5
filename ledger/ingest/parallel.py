"""Folding new files in worker processes while the ingest process writes.

Reading, parsing and folding lines is most of an ingest's work, and for a file the database
has never seen it needs nothing from the database; writing the rows is SQLite's work, done by
one process. So ingest plans the files it has never seen (in file order, with the source ids
its claims will give them), hands them to worker processes round robin, and writes what they
send back in file order, as if it had folded them itself.

A worker sends each batch in parts (:class:`Part`, then the batch's end, :class:`Batch`),
which the writer writes in one unit of work. What a worker cannot know, the writer checks
first (``Ingester._ingest_ahead``): that the source still stands where the worker began the
batch, and that each session the worker looked up in the database is owned now by whom the
worker found (another file of the same run may have opened it since). If not, or if a worker
fails (or meets a session that another file owns: joining it needs the database as the
writer has it, see :mod:`ledger.ingest.source`), the writer rolls the batch back, drops the
rest of that file's messages and goes on with the file itself from its last written batch,
as any resumed ingest does. The database ends as a one-process ingest leaves it.

Workers are forked on Linux (they start in milliseconds and need nothing pickled but their
files), elsewhere spawned. Forking copies only the thread that forks, so it is safe where the
ingest process has no other thread holding a lock (SQLite's among them): the command line's
ingest has none but the one that loads the secret rule set, which is joined before any fork
(:class:`Workers`); a program that calls :class:`ledger.ingest.ingester.Ingester` from a busy
threaded process should pass ``jobs=0``.
"""

from __future__ import annotations

import gc
import json
import marshal
import mmap
import os
import queue
import signal
import sqlite3
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.core import redact, secret_rules
from ledger.core.fold import Fold
from ledger.db import sources, writes
from ledger.formats.detect import DOCUMENTS
from ledger.ingest.bulk import bulk_work
from ledger.ingest.files import read_lines, tail_hash
from ledger.ingest.memory import give_back
from ledger.ingest.options import PART_LINES, Options
from ledger.ingest.source import Cursor, Folded, Output, SharedSession, SourceFold

if TYPE_CHECKING:  # multiprocessing is imported when workers start (an ingest of a few new
    # lines starts none, and it costs a process some 7 ms to import)
    from multiprocessing.connection import Connection

START_METHOD = "fork" if sys.platform == "linux" else "spawn"  # see above
#: Lines a worker folds and sends at a time (a part of a batch; a batch is still committed
#: whole, with its sessions' state), and messages it may have sent ahead of the writer, as
#: bytes: while the writer writes one worker's file, the others fold on into that queue. The
#: ingest and its two workers together at most (PSS), 3M events: parts of 4,000 lines and
#: 16 queued, 100 MB; 4,000 and 8, 90 MB; 4,000 and 4, 84 MB; 2,000 and 8, 73-75 MB. At 1M
#: events, whole batches and nothing queued, 124 MB; 4,000 and nothing queued (a worker waits
#: for the writer after each part), 69 MB but 9.0-9.1 s instead of 7.3. 2,000 and 8 took
#: 7.40-7.66 s against 7.22-7.76 s for 4,000 and 16 (three runs each, alternated). The
#: lines are PART_LINES, kept in ledger.ingest.options (an ingest that starts no worker never
#: imports this module).
QUEUED = 8
#: A part also ends once its lines hold this many bytes (the line that passes it included).
#: Real logs have lines of 1 to 145 KB, so 2,000 of them were a whole file of up to 4 MB,
#: its lines, records and rows held at once in the worker and its message in the writer.
#: The bench's real logs, 130 MB (four rounds alternated): whole files, 92.7-95.4 MB at most;
#: 256 KB, 87.0-87.4; 128 KB, 86.0-86.3 (but 700 parts more than whole files, against 264:
#: each costs the writer its own writes); 1 MB, 88.8-89.5.
PART_BYTES = 256 * 1024
# The first byte of each message: a part or the end of a batch (marshalled, or pickled if it
# holds anything marshal cannot write), the end of a file, a file the worker could not fold,
# or one it handed back for want of the rule set (see Workers).
_MARSHALLED, _PICKLED, _DONE, _FAILED, _WANTS = b"M", b"P", b"D", b"F", b"R"
_MESSAGES = (_MARSHALLED, _PICKLED)


@dataclass(frozen=True)
class Job:
    """A file no ingest has seen, and what its claim will make of it."""

    path: str
    source_id: str
    dialect: str
    task_class: str
    fingerprint: str
    size: int


@dataclass
class Part:
    """The rows of the first :data:`PART_LINES` lines of a batch (or of the next ones; fewer
    if they hold :data:`PART_BYTES`)."""

    start: int  # the batch's first byte in the file
    out: Output
    redactions: int  # secrets the fold redacted in these lines
    owners: dict[str, str | None] = field(default_factory=dict)  # looked up in the database


@dataclass
class Batch:
    """The end of a batch of a file's lines (or a whole document) as a worker folded it: the
    rows of its last lines and the state of every session the batch touched."""

    folded: Folded
    lines: int  # lines consumed (a document: 0)
    start: int  # byte offsets in the file
    end: int
    check_hash: str | None
    size: int
    mtime: float
    redactions: int
    owners: dict[str, str | None] = field(default_factory=dict)
    #: Texts of the source's row the worker cleaned and found storable as they are (its
    #: cursor as JSON): the writer takes them as cleaned (``writes.known_storable``).
    storable: list[str] = field(default_factory=list)


Message = Part | Batch


def encode(message: Message) -> bytes:
    """A part or a batch as one message. Its rows are plain tuples, lists, dicts, strings and
    numbers, which marshal writes about as fast as pickle and reads in 0.6 us a step against
    pickle's 1.0 (the writer reads, so that is the side that counts); both ends run the same
    Python, the one condition marshal sets."""
    if isinstance(message, Part):
        out = message.out
        plain: tuple[Any, ...] = (
            message.start, out.steps, out.incidents, out.errors, dict(out.unknown), out.notes,
            message.redactions, message.owners,
        )
    else:
        folded, out = message.folded, message.folded.out
        plain = (
            out.steps, out.incidents, out.errors, dict(out.unknown), out.notes, folded.sessions,
            folded.states, folded.cursor, message.lines, message.start, message.end,
            message.check_hash, message.size, message.mtime, message.redactions,
            message.owners, message.storable,
        )
    try:
        return _MARSHALLED + marshal.dumps(plain)
    except ValueError:  # a subclass of str or int, say: pickle keeps it
        import pickle  # only here (some 2 ms of every ingest, and rarely needed)

        return _PICKLED + pickle.dumps(plain, protocol=5)


def decode(message: bytes) -> Message:
    """The part or batch :func:`encode` made ``message`` of."""
    body = memoryview(message)[1:]
    if message[:1] == _MARSHALLED:
        plain = marshal.loads(body)
    else:
        import pickle

        plain = pickle.loads(body)
    if len(plain) == 8:
        start, steps, incidents, errors, unknown, notes, redactions, owners = plain
        out = Output(steps, incidents, errors, Counter(unknown), notes)
        return Part(start, out, redactions, owners)
    steps, incidents, errors, unknown, notes, sessions, states, cursor, *rest = plain
    folded = Folded(Output(steps, incidents, errors, Counter(unknown), notes), sessions, states,
                    cursor)
    return Batch(folded, *rest)


class WorkerFailed(Exception):
    """A worker could not fold a file (or died): the writer folds it itself."""


class Workers:
    """Worker processes folding ``jobs`` ahead of the writer; :meth:`batches` in file order.

    They are forked at once, sharing the rule set if this process holds it, and otherwise
    without it: loading it costs a process 0.4 s of CPU (native code that holds the
    interpreter's lock much of the time), and most new files have no text that needs it (the
    bench's real logs have none). Loaded before forking, it once took most of what the second
    core gave. A forked worker never loads it itself (29 MB of its own each; on real logs
    where workers did, 119-160 MB for the ingest): where one of its texts needs it
    (``secret_rules.NotLoaded``), the worker raises a flag this process shares with it, hands
    that file back and ends. At its next file the writer sees the flag and loads the rule set
    on a thread while it writes on; at the file handed back it joins that thread, forks a
    worker in the place of the one that ended for the rest of its files (sharing the rule set
    now), and folds the file itself. Forking copies only the thread that forks, and one that
    forked while the loader ran native code would hand the children its half-built state and
    any lock it held, so the loader is joined before any fork, and before :meth:`close`
    returns."""

    def __init__(self, jobs: list[Job], count: int, options: Options, db_path: str) -> None:
        self._options, self._db_path = options, db_path
        self._where: dict[str, tuple[_Worker, int]] = {}
        self._workers: list[_Worker] = []
        self._loader: threading.Thread | None = None
        self._handed_back = False
        # One byte shared with forked workers: set by one that needs the rule set.
        self._wanted = mmap.mmap(-1, 1) if START_METHOD == "fork" else None
        options.prices.rates("")  # loaded once (any model name does), shared when forked
        if self._wanted is not None:
            self._before_forking()
        for n in range(min(count, len(jobs))):
            self._workers.append(self._start(jobs[n::count], n))

    @property
    def count(self) -> int:
        """The workers that fold at once (one started in the place of another is not
        counted again)."""
        return len(self._workers)

    def batches(self, path: str) -> Iterator[Message] | None:
        """The batches folded from ``path``, each as its parts and its end, in order; raises
        :class:`WorkerFailed`. ``None`` for a file no worker was given."""
        if path not in self._where:
            return None
        wanted = self._wanted is not None and self._wanted[0]
        if wanted and self._loader is None and not secret_rules.loaded():
            self._loader = threading.Thread(target=_load_quietly, name="agent-ledger rules",
                                            daemon=True)
            self._loader.start()
        self._hand_back()
        worker, index = self._where[path]
        return self._batches(worker, index)

    def _batches(self, worker: _Worker, index: int) -> Iterator[Message]:
        try:
            yield from worker.batches(index)
        except RulesWanted as wanted:
            self._replace(worker, wanted.at + 1)
            raise

    def _replace(self, worker: _Worker, first: int) -> None:
        """A worker forked holding the rule set for ``worker``'s files from ``first`` on."""
        if self._loader is not None:
            self._loader.join()  # never fork while it runs (see the class)
        secret_rules.load()  # (loaded by now, unless the loader failed: then it raises here)
        worker.stop()
        rest = worker.jobs[first:]
        if rest:
            self._before_forking()
            n = self._workers.index(worker)
            self._workers[n] = self._start(rest, n)

    def _before_forking(self) -> None:
        """What the workers should share made ready just before they are forked: what loading
        the rule set left behind handed back (:meth:`_hand_back`), and every object this
        process holds moved out of the garbage collector's sight until the workers are done
        (``gc.freeze``, undone by :meth:`close`): a full collection writes to each object it
        walks, so one in a worker made it copy 6.7 MB of the pages it shared with the writer
        (0.5 MB frozen); one in the writer would copy as much."""
        redact.forget()
        self._hand_back()
        gc.freeze()

    def _hand_back(self) -> None:
        """Once this process holds the rule set (loaded before the workers, by the loader, or
        by a text of its own), what loading it left behind is handed back, once
        (:func:`give_back`): the ingest and its two workers held 105-108 MB at most (PSS, the
        bench's 26 MB of real logs), 94-97 MB after."""
        if not self._handed_back and secret_rules.loaded():
            give_back(secret_rules.engine_file())
            self._handed_back = True

    def _start(self, mine: list[Job], n: int) -> _Worker:
        """Fork (or spawn) worker ``n`` for the jobs ``mine``."""
        import multiprocessing

        context = multiprocessing.get_context(START_METHOD)
        receive, send = context.Pipe(duplex=False)
        # A forked worker starts with a copy of every read end the writer holds, its own
        # too: kept open, a writer killed (kill -9) would leave it blocked for ever on a
        # full pipe no one reads. It closes them first (spawned ones are given none).
        forking = self._wanted is not None
        held = (*(w.connection for w in self._workers), receive) if forking else ()
        process = context.Process(
            target=work, args=(mine, send, self._options, self._db_path, held, self._wanted),
            daemon=True, name=f"agent-ledger fold {n + 1}",
        )
        process.start()
        send.close()
        worker = _Worker(process, receive, mine)
        self._where.update((job.path, (worker, i)) for i, job in enumerate(mine))
        return worker

    def close(self) -> None:
        if self._loader is not None:
            self._loader.join()  # nor leave it running: a later pass may fork
        for worker in self._workers:
            worker.stop()
        gc.unfreeze()  # (nothing to undo if the workers were spawned)


def _load_quietly() -> None:
    """The rule set loaded on the loader thread; a failure is left to the writer, which
    loads it again before it forks (:meth:`Workers._replace`) and raises there."""
    try:
        secret_rules.load()
    except Exception:  # raised again where it matters
        pass


class RulesWanted(WorkerFailed):
    """A worker met a text that needs the rule set, which it does not hold: it handed back
    its file ``at`` (an index in its jobs) and ended."""

    def __init__(self, at: int) -> None:
        super().__init__("a text needs the rule set")
        self.at = at


class _Worker:
    """One worker process and the messages it sends: each file's batches, then an end."""

    def __init__(self, process: Any, connection: Connection, jobs: list[Job]) -> None:
        self.process = process
        self.connection = connection
        self.jobs = jobs
        self.at = 0  # the file whose messages come next
        self.alive = True

    def batches(self, index: int) -> Iterator[Message]:
        while self.at < index:  # files the writer did not take (unchanged by now, gone)
            while (kind := self._receive()[:1]) in _MESSAGES:
                pass
            if kind == _WANTS:
                raise RulesWanted(self.at)
            self.at += 1
        while True:
            message = self._receive()
            if message[:1] in _MESSAGES:
                yield decode(message)
                continue
            if message[:1] == _WANTS:
                raise RulesWanted(self.at)
            self.at += 1
            if message[:1] == _FAILED:
                raise WorkerFailed(message[1:].decode(errors="replace"))
            return

    def _receive(self) -> bytes:
        if self.alive:
            try:
                return self.connection.recv_bytes()
            except (EOFError, OSError):
                self.alive = False
        raise WorkerFailed(f"{self.process.name} has stopped")

    def stop(self) -> None:
        self.connection.close()
        self.process.terminate()  # it may be blocked sending a batch nobody will read
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def work(
    jobs: list[Job], connection: Connection, options: Options, db_path: str,
    held: tuple[Connection, ...] = (), wanted: mmap.mmap | None = None,
) -> None:
    """A worker's life: fold each job's file, send its batches and an end (or a failure).
    ``held``: the writer's read ends this forked process holds a copy of, closed first, so
    that its sends fail once the writer is gone, however it went (and the worker ends).
    ``wanted``: a forked worker's flag, raised where it needs the rule set it does not hold
    (it then hands its file back and ends: see :class:`Workers`); a spawned one has none and
    loads the rule set itself."""
    for end in held:
        end.close()
    if wanted is not None:
        secret_rules.refuse_loading()  # (no effect if it was forked holding the rule set)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the writer's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not --follow's handler, inherited
    # The writer is the bottleneck: workers give way to it (7.38-7.45 s against 7.51-7.66 s
    # for 1M events, alternated). Windows has no nice.
    if hasattr(os, "nice"):
        os.nice(5)
    fold = options.make_fold()
    owners = _Owners(db_path)
    sender = _Sender(connection)
    try:
        with bulk_work():
            for job in jobs:
                try:
                    for message in fold_file(job, fold, options, owners):
                        sender.send(encode(message))
                except secret_rules.NotLoaded:
                    assert wanted is not None  # (only a forked worker refuses to load)
                    wanted[0] = 1
                    sender.send(_WANTS)
                    return
                except (OSError, ValueError, sqlite3.Error, SharedSession) as exc:
                    sender.send(_FAILED + f"{job.path}: {exc}".encode())
                else:
                    sender.send(_DONE)
    except BrokenPipeError:
        pass  # the writer has stopped
    finally:
        sender.close()
        owners.close()


class _Sender:
    """Sends a worker's messages from a thread of its own, so that the worker folds on while
    the writer is busy with another worker's file (up to :data:`QUEUED` messages ahead)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.queue: queue.Queue[bytes | None] = queue.Queue(QUEUED)
        self.broken = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (message := self.queue.get()) is not None:
            if not self.broken:
                try:
                    self.connection.send_bytes(message)
                except OSError:  # the writer has stopped: drain, so that send() never waits
                    self.broken = True

    def send(self, message: bytes) -> None:
        if self.broken:
            raise BrokenPipeError
        self.queue.put(message)

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join()


def fold_file(job: Job, fold: Fold, options: Options, owners: _Owners) -> Iterator[Message]:
    """Fold one new file from its start: each batch as its parts, then its end (a document
    whole, as one batch)."""
    source = SourceFold(
        fold, job.source_id, job.path, job.dialect, job.task_class, Cursor(), {},
        owner_of=owners.lookup, exact_copies=True,
    )
    path = Path(job.path)
    if job.dialect in DOCUMENTS:
        data = path.read_bytes()
        before = fold.redactions
        source.feed_document(data)
        stat = path.stat()
        folded = _stored_end(source.take_folded())
        yield Batch(folded, 0, 0, len(data), None, stat.st_size, stat.st_mtime,
                    fold.redactions - before, owners.take(), _storable(folded))
        return
    with path.open("rb") as f:
        start = offset = 0
        lines_in_batch = 0
        while True:
            want = min(PART_LINES, options.batch - lines_in_batch)
            lines, end = read_lines(f, offset, want, options.max_line, PART_BYTES)
            before = fold.redactions
            source.feed_lines(lines, options.max_line)
            lines_in_batch += len(lines)
            offset = end
            if lines and lines_in_batch < options.batch:
                yield Part(start, _stored(source.take_out()), fold.redactions - before,
                           owners.take())
                continue
            if lines_in_batch:
                stat = os.fstat(f.fileno())
                folded = _stored_end(source.take_folded())
                yield Batch(folded, lines_in_batch, start, end,
                            tail_hash(f, end), stat.st_size, stat.st_mtime,
                            fold.redactions - before, owners.take(), _storable(folded))
            if not lines:
                return
            start, lines_in_batch = end, 0


def _stored(out: Output) -> Output:
    """``out`` with its steps rows as the writer stores them (:func:`writes.stored_rows`)."""
    out.steps = writes.stored_rows(out.steps)
    return out


def _stored_end(folded: Folded) -> Folded:
    """The end of a batch with its steps rows and its sessions' states as the writer stores
    them (``write_batch(..., states_stored=True)``): cleaning a state asks the secret rules'
    needs of its every text (the bench's Claude Code logs, 0.2-0.3 s of CPU), which the
    writer, the bottleneck with two workers, did for every file a worker folded."""
    _stored(folded.out)
    folded.states = writes.stored_rows(folded.states)
    return folded


def _storable(folded: Folded) -> list[str]:
    """The batch's cursor as the writer will write it (JSON), if it is storable as it is:
    cleaning it asks the secret rules' needs of its ids (some 0.2 ms a cursor), which the
    writer would otherwise do for every batch a worker folded."""
    cursor = json.dumps(folded.cursor)
    return [cursor] if writes.clean(cursor) is cursor else []


class _Owners:
    """Who owns a session, as the database says now (read only), and what was asked."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self.asked: dict[str, str | None] = {}
        self._conn: sqlite3.Connection | None = None

    def lookup(self, session_id: str) -> str | None:
        owner = self._owner(session_id)
        self.asked[session_id] = owner
        return owner

    def _owner(self, session_id: str) -> str | None:
        if not self.db_path:  # an in-memory database: the writer checks every answer
            return None
        try:
            if self._conn is None:
                # (not urllib.request's pathname2url, the same text here: importing it
                # imported http, ssl and email, 50 ms and 2 MB of each worker's own)
                uri = f"{Path(os.path.abspath(self.db_path)).as_uri()}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True)
            return sources.session_owner(self._conn, session_id)
        except sqlite3.Error:
            return None

    def take(self) -> dict[str, str | None]:
        asked, self.asked = self.asked, {}
        return asked

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


def owners_hold(conn: sqlite3.Connection, owners: dict[str, str | None]) -> bool:
    """Whether each session is owned now as the worker found it."""
    return all(sources.session_owner(conn, sid) == owner for sid, owner in owners.items())

