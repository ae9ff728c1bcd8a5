"""One ledger file's records, routed to their sessions. Pure: lines in, rows out.

The position in the file (:class:`Cursor`) and the open sessions are plain data that the store
saves in the same transaction as the rows they produced, so an ingest can stop anywhere and
carry on later as if it had never stopped.

A session of a real agent log is its session id, wherever its lines are (the seeds' dialects
carry no record identity, so there a session id stays unique to one file, and a second file's
lines of it are put aside). The first file to hold a session *owns* it (``sessions.source_id``,
its state in ``fold_state``); a later file with lines of the same session *joins* it: it folds
on from the owner's saved state, and the session lists both files (``Session.sources``, stored
in ``session_sources``). Records are folded once per session: an event whose record key
(:attr:`Event.key`: a Claude Code line's uuid, a Codex line's digest, a Langfuse
observation's id) the session already holds is dropped and counted in the cursor's
``duplicates``. So a snapshot of a transcript and the transcript itself, or the history a
resumed Claude Code session copies into its new file, count once, whichever file is read first.

An importer reads a line in the light of the lines before it (the response a line continues,
the call a result answers), so a file goes on with a session only where it continues it
exactly: the file has read the session's records, each once, from its first to its last
(:attr:`Cursor.ends` against :attr:`Session.first_key`, ``last_key`` and ``keyed``), so its
importer stands where the transcript alone would. Any other piece (a middle or a suffix read
before what precedes it, a prefix read after a later piece, overlapping pieces, a file that
repeats lines and goes on; a copy read in another order than the session holds it) is not
folded here: the session is listed in
:attr:`SourceFold.refold`, and the ingester folds again, as one transcript, the lines of every
file that holds it (:mod:`ledger.ingest.copies`); a worker process gives the file back to the
writer (:class:`SharedSession`).

The keys a session holds are bounded: a session in one file keeps its last
:data:`~ledger.core.fold.RECENT_KEYS` in its state (a record repeated later than that in one
file counts again); a session in several files is checked against all its keys, read from
its ``steps`` rows (``record_key``, with the step's index for the order) once per batch
that touches it, and held only while the batch is folded.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

import msgspec

from ledger.core import ids
from ledger.core.fold import RECENT_KEYS, Fold, Session, StepRow
from ledger.core.ids import CUT_MARK, HASH_DIGITS, ID_MAX
from ledger.core.redact import drop_cut_token
from ledger.formats import langfuse, otlp
from ledger.formats.agent_records import UnknownRecord, bounded
from ledger.formats.detect import IMPORTED, LANGFUSE, OTLP_DOCUMENT, line_reader
from ledger.formats.seed_dialects import (
    GATE,
    NATIVE,
    Record,
    RecordError,
    gate_line,
    native_line,
    parse_json,
    trace_rounds,
)
from ledger.ingest.files import BOM, Line

RAW_MAX = 500
REASON_MAX = 300
RAW_WINDOW = RAW_MAX * 4  # bytes of a record looked at (and redacted) for its raw text
_SESSION = itemgetter(0)  # a steps row's session_id
_CUT_TAIL = len(CUT_MARK) + HASH_DIGITS  # how a cut id ends, quoted in its note

#: Given a native session id, the source that already owns it (None if nobody does).
OwnerLookup = Callable[[str], "str | None"]
#: Given a session id, the session as a previous ingest of this source left it (None if new).
SessionLoader = Callable[[str], "Session | None"]
#: Given a source and a session id it owns, the session as it stands (None if it is gone).
SessionJoin = Callable[[str, str], "Session | None"]
#: Given a session id, the record keys of every step it holds, each with its step's index.
KeysLookup = Callable[[str], "dict[str, int]"]


class SharedSession(Exception):
    """A record of a session another file owns, or a piece that does not continue its
    session exactly, met where the session cannot be joined or folded again (a worker
    process: the writer folds the file itself, see :mod:`ledger.ingest.parallel`)."""


class Cursor(msgspec.Struct):
    """How far into a source the fold has got.

    ``reader`` is an importer's state between lines (JSON-serialisable, see
    ``ledger.formats.agent_records``); ``unknown`` counts the records of unknown types skipped,
    by type.
    """

    line: int = 0
    gate_runs: int = 0
    gate_last_step: int = 0
    blank_lines: int = 0
    reader: dict[str, Any] = msgspec.field(default_factory=dict)
    unknown: dict[str, int] = msgspec.field(default_factory=dict)
    duplicates: int = 0  # events dropped: their record was folded already (another copy)
    #: Per session of the file, the record keys of the first and the last of its events read
    #: here (folded or dropped as copies), and how many were read: where the file stands.
    ends: dict[str, list[Any]] = msgspec.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The cursor as plain data, its reader state copied (the fold goes on changing it).

        Copied by a MessagePack round trip, which keeps every value JSON or marshal can hold
        (floats bit for bit, infinities too; tuples come back as lists, which they write the
        same): 0.04 ms against a deep copy's 1.08 (``dataclasses.asdict``'s) for the reader
        state of a 1 MB Claude Code transcript, written after every batch. What it cannot
        write (a lone surrogate, an integer beyond 64 bits) takes a deep copy.
        """
        try:
            return _copy_decode(_copy_encode(self))
        except (UnicodeEncodeError, OverflowError):
            import copy  # (rare: not imported by every ingest)

            return copy.deepcopy(msgspec.structs.asdict(self))


class Output(msgspec.Struct):
    """A fold's rows (its records, as Folded and Cursor, are msgspec structs: an ingest's start
    makes them for a fiftieth of a dataclass)."""

    steps: list[StepRow] = msgspec.field(default_factory=list)  # values in STEP_COLUMNS order
    incidents: list[dict[str, Any]] = msgspec.field(default_factory=list)
    errors: list[dict[str, Any]] = msgspec.field(default_factory=list)
    unknown: Counter[str] = msgspec.field(default_factory=Counter)
    notes: list[str] = msgspec.field(default_factory=list)  # for the ingest's notices (ids cut)


class Folded(msgspec.Struct):
    """What the lines fed since the last take folded into, as the store writes it: the rows,
    and the touched sessions' rows, resumable state and the cursor. Plain data, so a worker
    process can fold and hand it to the process that writes (:mod:`ledger.ingest.parallel`)."""

    out: Output  # its steps in primary-key order
    sessions: list[dict[str, Any]]
    states: list[tuple[str, str, str]]  # session id, source id, resumable state as JSON
    cursor: dict[str, Any]
    #: (source id, session id): the sources that joined a session another source owns
    shared: list[tuple[str, str]] = msgspec.field(default_factory=list)
    #: Sessions to fold again from all their files (see :attr:`SourceFold.refold`)
    refold: list[str] = msgspec.field(default_factory=list)


class SourceFold:
    def __init__(
        self,
        fold: Fold,
        source_id: str,
        path: str,
        dialect: str,
        task_class: str | None,
        cursor: Cursor | None = None,
        sessions: dict[str, Session] | None = None,
        owner_of: OwnerLookup | None = None,
        load: SessionLoader | None = None,
        join: SessionJoin | None = None,
        keys_of: KeysLookup | None = None,
        dry: bool = False,
        exact_copies: bool = False,
    ) -> None:
        self.fold = fold
        self.source_id = source_id
        self.path = path
        self.dialect = dialect
        self.task_class = task_class
        self.cursor = cursor or Cursor()
        self.sessions: dict[str, Session] = sessions if sessions is not None else {}
        self.owner_of = owner_of or (lambda _sid: None)
        self.load = load or (lambda _sid: None)
        self.join = join
        self.keys_of = keys_of or (lambda _sid: {})
        #: The keys of the sessions in several files, each with its step's index
        self._keys: dict[str, dict[str, int]] = {}
        #: Sessions this file does not continue exactly (see the module doc): left unfolded
        #: here, for the ingester to fold again from all their files.
        self.refold: set[str] = set()
        #: The lines fed are every file of their sessions, merged in the transcript's order
        #: (:mod:`ledger.ingest.copies`): each line's file is set before it is fed.
        self.canonical = False
        #: Read only for the cursor (the reader's state and where each session stands), as
        #: after a merged fold: nothing is folded or put aside.
        self.dry = dry
        #: Whether pieces that do not continue a session exactly are found (the ingester and
        #: its workers); replays and the hook read one file and fold it as it comes.
        self.exact_copies = exact_copies
        # Native and gate lines hold one record each: read straight into one record and its
        # session (about 0.2 us a line less than the general way, which allows several).
        self._one_record = {NATIVE: native_line, GATE: gate_line}.get(dialect)
        self.out = Output()
        self.touched: set[str] = set()

    # -- JSONL -----------------------------------------------------------------------------

    def feed_lines(self, lines: Iterable[Line], max_line: int) -> None:
        """Lines as :func:`~ledger.ingest.files.read_lines` gives them: complete, or too long to
        keep (put aside, quoting their head)."""
        feed_line = self.feed_line
        for line in lines:
            if line.oversize:
                self.cursor.line += 1
                self.error(
                    self.cursor.line,
                    line.offset,
                    f"line is {line.oversize} bytes, longer than the limit of {max_line} "
                    "(--max-line-bytes)",
                    line.raw,
                )
            else:
                feed_line(line.raw, line.offset)

    def feed_line(self, raw: bytes, offset: int) -> None:
        """One complete line (without its newline) starting at byte ``offset``."""
        cursor = self.cursor
        cursor.line += 1
        line = cursor.line
        if raw.startswith(BOM):  # at the start of a file, or of one concatenated after it
            raw = raw[len(BOM):]
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            cursor.blank_lines += 1
            return
        one_record = self._one_record
        try:
            if one_record is None:
                records = self._records(raw)
            else:
                record = one_record(raw)
                session = self._session_for(record, line)
        except UnknownRecord as exc:
            self._unknown([exc.kind])
            return
        except RecordError as exc:
            self.error(line, offset, str(exc), raw)
            return
        if one_record is None:
            self._steps(records, line, offset, raw)
        else:
            self._step(session, record, line, offset)

    def _steps(
        self, records: Iterable[Record | RecordError], line: int | None, offset: int | None,
        raw: bytes,
    ) -> None:
        for record in records:
            try:
                if isinstance(record, RecordError):
                    raise record
                session = self._session_for(record, line)
            except RecordError as exc:
                self.error(line, offset, str(exc), raw)
                continue
            self._step(session, record, line, offset)

    def _unknown(self, kinds: Iterable[str]) -> None:
        """Records of types this version does not know: counted per file, skipped."""
        for kind in kinds:
            self.cursor.unknown[kind] = self.cursor.unknown.get(kind, 0) + 1
            self.out.unknown[kind] += 1

    def error(self, line: int | None, offset: int | None, reason: str, raw: bytes) -> None:
        """Put a record aside. Its reason may quote the record, so both are redacted."""
        if self.dry:
            return
        text = raw[:RAW_WINDOW].decode("utf-8", "replace").replace("\x00", "\ufffd")
        cut = len(raw) > RAW_WINDOW
        if cut:  # a secret cut in two would not be recognised: drop the cut token
            text = drop_cut_token(text)
        text = _shorten(self.fold.redact_aside(text), RAW_MAX, cut)
        reason = _shorten(self.fold.redact_aside(reason), REASON_MAX)  # redacted whole, then cut
        self.out.errors.append(
            {
                "source_id": self.source_id,
                "path": self.path,
                "line": line,
                "offset": offset,
                "reason": reason,
                "raw": text,
            }
        )

    def _records(self, raw: bytes) -> list[Record]:
        value = parse_json(raw)
        reader = line_reader(self.dialect)
        if reader is None:
            raise RecordError(f"the {self.dialect} dialect is not line-based")
        return reader(value, self.cursor.reader, self.source_id, self.fold.actions)

    def _session_for(self, record: Record, line: int | None) -> Session:
        if self.dialect == GATE:
            assert record.step is not None
            if not self.cursor.gate_runs or record.step <= self.cursor.gate_last_step:
                self.cursor.gate_runs += 1
            self.cursor.gate_last_step = record.step
            return self._open(f"{self.source_id}-{self.cursor.gate_runs}", None)
        if record.session is None:
            raise RecordError("record names no session")
        session_id = record.session
        if len(session_id) > ID_MAX:
            session_id = self._cut(session_id)
        session = self.sessions.get(session_id)
        if session is not None:  # most records: a session open here (_step sets its class)
            return session
        owner = self.owner_of(session_id)
        if owner is not None and owner != self.source_id:
            if self.dialect not in IMPORTED:
                # The seeds' records carry no identity: a copy of one could not be told from
                # a record of its own, so their session ids stay unique to one file.
                raise RecordError(
                    f"session {session_id!r} already belongs to another ledger file "
                    f"(source {owner}); session ids must be unique to one file"
                )
            return self._join(session_id, owner)
        parent = None if record.parent is None else self._cut(record.parent)
        named = self._class_of(record)
        task_class = None if named is None else self._cut(named)
        session = self._open(session_id, task_class, parent=parent)
        if session_id != record.session and session.state.events == 0:
            self._note_cut(line, "session id", record.session)
        return session

    def _join(self, session_id: str, owner: str) -> Session:
        """A session another file owns: fold on from where it stands (see the module doc)."""
        if self.join is None:
            raise SharedSession(session_id)
        session = self.join(owner, session_id)
        if session is None:
            raise RecordError(f"session {session_id!r} of source {owner} has no saved state")
        if not session.sources:
            session.sources.append(owner)
        if self.source_id not in session.sources:
            session.sources.append(self.source_id)
        self.sessions[session_id] = session
        return session

    def _open(
        self, session_id: str, task_class: str | None, task: str | None = None,
        parent: str | None = None,
    ) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            # Sessions of earlier ingests are loaded when their file goes on with them, so
            # new lines cost what they hold, not what the file held before.
            session = self.load(session_id)
            if session is not None:
                self.sessions[session_id] = session
        if session is None:
            session = self.fold.new_session(
                session_id,
                source_id=self.source_id,
                source_path=self.path,
                dialect=self.dialect,
                task_class=task_class or self.task_class,
                task=task,
                parent_session_id=parent,
                sources=[self.source_id],
            )
            self.sessions[session_id] = session
        elif task_class and session.state.events == 0:
            session.task_class = task_class
        return session

    def _step(self, session: Session, record: Record, line: int | None, offset: int | None) -> None:
        key = record.event.key
        if key is not None:
            sid = session.session_id
            ends = self.cursor.ends.get(sid)
            read = [ends[0] if ends else key, key, ends[2] + 1 if ends else 1]
            if self.dry or self._seen(session, key):
                if self.exact_copies and not self._in_order(session, ends, key):
                    self._fold_again(sid)
                self.cursor.duplicates += not self.dry
                self.cursor.ends[sid] = read
                return
            if self.exact_copies and (sid in self.refold or not self._continues(session, ends)):
                self._fold_again(sid)
                return
            self.cursor.ends[sid] = read
            session.first_key = session.first_key or key
            session.last_key = key
            session.keyed += 1
        elif self.dry:
            return
        if record.task_class and session.state.events == 0:
            session.task_class = self._task_class(line, self._class_of(record) or record.task_class)
        row, closed = self.fold.step(session, record.event, line, offset)
        self.out.steps.append(row)
        if closed:
            self.out.incidents.extend(closed)
        self.touched.add(session.session_id)

    def _fold_again(self, session_id: str) -> None:
        """A piece that does not continue its session exactly: for the ingester to fold
        again with all its files, or, in a worker, for the writer."""
        if self.join is None:
            raise SharedSession(session_id)
        self.refold.add(session_id)

    def _in_order(self, session: Session, ends: list[Any] | None, key: str) -> bool:
        """Whether a copy of a record read here comes after the record read before it, as the
        session holds them: a file may tell the order where the files read before could not
        (pieces that did not overlap yet), and then the session is folded again."""
        if ends is None or len(session.sources) < 2:
            return True
        places = self._places(session)
        return places.get(ends[1], -1) < places.get(key, -1)

    def _places(self, session: Session) -> dict[str, int]:
        """The keys of a session in several files, with their steps' indexes."""
        keys = self._keys.get(session.session_id)
        if keys is None:
            keys = self._keys[session.session_id] = self.keys_of(session.session_id)
        return keys

    def _continues(self, session: Session, ends: list[Any] | None) -> bool:
        """Whether a new record read here goes on with ``session`` exactly (see the module
        doc); always for lines merged in order."""
        if self.canonical:
            if self.source_id not in session.sources:
                session.sources.append(self.source_id)
            return True
        if session.last_key is None:
            return True
        return ends == [session.first_key, session.last_key, session.keyed]

    def _class_of(self, record: Record) -> str | None:
        """The budget file's name for the record's working folder, else the importer's class."""
        return self.fold.task_classes.name_for(record.folder) or record.task_class

    def _task_class(self, line: int | None, text: str) -> str:
        """A task class within :data:`ID_MAX` characters, with a note if it was cut."""
        if len(text) <= ID_MAX:
            return text
        self._note_cut(line, "task class", text)
        return self._cut(text)

    def _cut(self, text: str) -> str:
        """An id or task class within :data:`ID_MAX` characters: redacted first, then cut, so
        a secret across the cut leaves no head for the writer's redaction to miss."""
        if len(text) <= ID_MAX:
            return text
        return ids.bounded(self.fold.redact(text)[0])

    def _note_cut(self, line: int | None, what: str, text: str) -> None:
        where = self.path if line is None else f"{self.path}:{line}"
        tail = self._cut(text)[-_CUT_TAIL:]
        self.out.notes.append(
            f"{where}: a {what} of {len(text)} characters, cut to {ID_MAX}: its head and "
            f"a hash of the whole ('{tail}')"
        )

    def _seen(self, session: Session, key: str) -> bool:
        """Whether the session holds this record already; if not, it does from now on."""
        recent = session.recent
        if key in recent:
            return True
        if len(session.sources) > 1:
            keys = self._places(session)
            if key in keys:
                return True
            keys[key] = session.state.events + 1  # the index of the step it will be
        recent[key] = 0
        if len(recent) > RECENT_KEYS:
            bounded(recent, RECENT_KEYS)
        return False

    # -- whole documents ---------------------------------------------------------------------

    def feed_document(self, raw: bytes) -> None:
        """A whole-document dialect: a trace (seed 000) or a Langfuse export, one session each,
        or one OTLP export request (its sessions)."""
        if raw.startswith(BOM):
            raw = raw[len(BOM):]
        try:
            value = parse_json(raw)
            if self.dialect == OTLP_DOCUMENT:
                records = otlp.read(value, {}, self.source_id, self.fold.actions)
            elif self.dialect == LANGFUSE:
                doc = langfuse.document(value, self.fold.actions)
            else:
                header, rounds = trace_rounds(value)
        except RecordError as exc:
            self.error(_error_line(str(exc)), 0, str(exc), raw)
            return
        if self.dialect == OTLP_DOCUMENT:
            self._steps(records, None, None, b"")
        elif self.dialect == LANGFUSE:
            self._unknown(doc.unknown.elements())
            self._steps(doc.items, None, None, b"")
        else:
            self._feed_trace(header, rounds)
        self.cursor.line = raw.count(b"\n") + 1

    def _feed_trace(
        self, header: dict[str, Any], rounds: Iterable[tuple[int, Record | RecordError]]
    ) -> None:
        task_class = header.get("task_class") if isinstance(header.get("task_class"), str) else None
        task = header.get("task") if isinstance(header.get("task"), str) else None
        if task_class is not None:
            task_class = self._task_class(None, task_class)
        session = self._open(self.source_id, task_class)
        session.task = self.fold.clean(session, task)
        for index, item in rounds:
            if isinstance(item, RecordError):
                self.error(None, None, f"rounds[{index - 1}]: {item}", b"")
                continue
            self._step(session, item, None, None)

    def take(self) -> tuple[Output, list[Session]]:
        """The rows produced since the last take, and the sessions they touched."""
        out, self.out = self.out, Output()
        touched = [self.sessions[sid] for sid in sorted(self.touched)]
        self.touched = set()
        for session in touched:
            out.incidents.extend(session.open_incidents())
        return out, touched

    def take_out(self) -> Output:
        """The rows produced since the last take, without the touched sessions (a batch's
        first parts, see :mod:`ledger.ingest.parallel`; :meth:`take_folded` gives them at its
        end)."""
        out, self.out = self.out, Output()
        out.steps.sort(key=_SESSION)
        return out

    def take_folded(self) -> Folded:
        """:meth:`take`, with the touched sessions as the rows and state the store keeps.

        The steps are put in primary-key order: a file interleaves its sessions, and B-tree
        inserts in key order touch each page once instead of jumping between sessions (about
        3 us less a row). The fold numbers a session's steps as it goes, so a stable sort on
        the session alone gives (session_id, idx) order, for less than comparing pairs."""
        out, touched = self.take()
        out.steps.sort(key=_SESSION)
        self._keys = {}  # read again for the next batch: another file may add to them
        refold, self.refold = sorted(self.refold), set()
        return Folded(
            out,
            [s.row() for s in touched],
            [(s.session_id, s.source_id, state_json(s)) for s in touched],
            self.cursor.to_dict(),
            [(src, s.session_id) for s in touched for src in s.sources[1:]],
            refold,
        )


def state_json(session: Session) -> str:
    """A session's resumable state as JSON text, as ``fold_state`` keeps it.

    msgspec writes it in a seventh of the standard library's time (1.6 against 11.2 us for a
    session of the benchmark's corpus; a file's sessions are written at the end of each of
    its batches). A string msgspec cannot write (a lone surrogate) the standard library
    escapes; nothing that reaches a session should hold one.
    """
    state = session.to_resume()
    try:
        return _encode_json(state).decode()
    except UnicodeEncodeError:
        return json.dumps(state)


_encode_json = msgspec.json.Encoder().encode
_copy_encode = msgspec.msgpack.Encoder().encode
_copy_decode = msgspec.msgpack.Decoder().decode


def _shorten(text: str, limit: int, cut: bool = False) -> str:
    """``text`` in at most ``limit`` characters, ending in an ellipsis if anything is lost."""
    if cut or len(text) > limit:
        return text[: limit - 1] + "…"
    return text


def _error_line(reason: str) -> int | None:
    """The line number inside a JSON decoding error message, if there is one."""
    marker = "(line "
    if marker in reason:
        number = reason.split(marker, 1)[1].split(" ", 1)[0]
        if number.isdigit():
            return int(number)
    return None

