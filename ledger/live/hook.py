"""The live brake for Claude Code: should the pending tool call be taken? (docs/hooks.md)

Claude Code runs a hook command before each tool call (``PreToolUse``) with the call on stdin
and the session's transcript on disk. This module answers from the transcript alone, with
the ingest's own path: the new lines of the transcript go through the Claude Code importer and
:class:`~ledger.ingest.source.SourceFold` (the fold and its :class:`~ledger.core.budget.Machine`)
exactly as ``ingest`` reads them, resumed from the state the last call saved
(:class:`HookState`: each file's offset and cursor, each session's resumable state), so a
call reads only the bytes written since the last one, and the call is denied exactly when
``ingest`` of the transcript, under the same budget, records its stop at or before this call.

The transcript holds the pending call already (Claude Code writes the assistant line with the
``tool_use`` block before it runs the tool); if it does not yet, the call is folded, on a copy
that is not kept, as the line the importer would read. A sub-agent's call (``agent_id`` in the
payload) is the sub-agent session's (``<session>:agent-<id>``, as the importer names it) and is
also denied once its parent session has stopped: the parent's caps count the parent's own
events, as ``ingest`` counts them. With the budget file's ``subagents_count_in_parent`` on,
every sub-agent file beside the transcript is read too, the steps each call reads are fed to
the family's fold (:class:`~ledger.core.family.FamilyFold`, kept in the state), and a call of
the parent or of any sub-agent is also denied at or after the step where the family's totals
trip a cap, as ``ingest`` records it in ``family_stops``.

Pure but for the one file read (:func:`read_new_lines`); the state is loaded and saved, and
the decision recorded, by :mod:`ledger.live.hook_store`.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from ledger.core.budget import State
from ledger.core.family import FamilyFold, FamilyStop, family_row, key_of
from ledger.core.fold import STEP_COLUMNS, Fold, Session, StepRow, families_for
from ledger.core.reasons import DECISIONS, StopReason
from ledger.formats.agent_records import bounded
from ledger.formats.detect import CLAUDE_CODE
from ledger.ingest.files import DEFAULT_MAX_LINE, Line, open_file, read_lines
from ledger.ingest.source import Cursor, SourceFold

ALLOW = "allow"
DENY = "deny"
PRE_TOOL_USE = "PreToolUse"
#: Tool calls remembered (a digest of their id, their session and event number), for a call
#: asked about after its line was read (Claude Code runs the parallel calls of one response
#: one after another, so the last responses' calls are enough).
CALLS_MAX = 128
READ_LINES = 10_000
_SESSION, _IDX, _ACTION, _TS = (
    STEP_COLUMNS.index(c) for c in ("session_id", "idx", "action", "ts")
)
#: The counters a decision records and ``hook status`` shows.
COUNTERS = (
    "steps", "writes", "rounds", "tool_calls", "output_tokens", "consecutive_tool_errors",
    "observation_repeats", "cost", "elapsed_s",
)


class HookInputError(ValueError):
    """A payload that is not what Claude Code sends."""


class FileState(Struct):
    offset: int = 0
    cursor: dict[str, Any] = field(default_factory=dict)


class HookState(Struct):
    """What one call leaves for the next: plain JSON data (saved beside the database)."""

    fold_digest: str = ""
    files: dict[str, FileState] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)  # Session.to_resume()
    #: call_key(tool_use_id) -> [session, idx, action, ts]
    calls: dict[str, list[Any]] = field(default_factory=dict)
    #: The family's fold (FamilyFold.to_dict()), when sub-agents count in their parent.
    family: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fold_digest": self.fold_digest,
            "files": {p: {"offset": f.offset, "cursor": f.cursor} for p, f in self.files.items()},
            "sessions": self.sessions,
            "calls": self.calls,
            "family": self.family,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HookState:
        return cls(
            str(data.get("fold_digest", "")),
            {p: FileState(int(f["offset"]), dict(f["cursor"])) for p, f in data["files"].items()},
            dict(data["sessions"]),
            dict(data["calls"]),
            dict(data.get("family") or {}),
        )


class Payload(Struct, frozen=True):
    """The fields of Claude Code's hook input the brake reads."""

    event: str
    session_id: str
    transcript_path: str
    cwd: str | None = None
    tool_name: str | None = None
    tool_input: Any = None
    tool_use_id: str | None = None
    agent_id: str | None = None

    @classmethod
    def parse(cls, text: str | bytes) -> Payload:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise HookInputError(f"hook input is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise HookInputError("hook input is not a JSON object")
        for key in ("hook_event_name", "session_id", "transcript_path"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise HookInputError(f"hook input has no {key!r}")

        def text_or_none(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) and value else None

        return cls(
            data["hook_event_name"], data["session_id"], data["transcript_path"],
            text_or_none("cwd"), text_or_none("tool_name"), data.get("tool_input"),
            text_or_none("tool_use_id"), text_or_none("agent_id"),
        )

    @property
    def fold_session(self) -> str:
        """The session the importer puts this call's lines in."""
        if self.agent_id:
            return f"{self.session_id}:agent-{self.agent_id}"
        return self.session_id

    def transcripts(self, family: bool = False) -> list[str]:
        """The files that hold the session's lines: the transcript and, for a sub-agent's
        call, its own file (``<session>/subagents/agent-<id>.jsonl`` beside the transcript,
        where Claude Code 2.1 writes sub-agents' lines) if there is one; for a ``family``,
        every sub-agent's file there."""
        paths = [self.transcript_path]
        main = Path(self.transcript_path)
        folder = main.parent / main.stem / "subagents"
        if family:
            paths.extend(sorted(str(p) for p in folder.glob("agent-*.jsonl")))
        elif self.agent_id:
            side = folder / f"agent-{self.agent_id}.jsonl"
            if side.exists():
                paths.append(str(side))
        return paths


class Verdict(Struct, frozen=True):
    """The answer to one call, and what is recorded of it."""

    decision: str  # ALLOW or DENY
    session_id: str
    reason: str | None = None
    stop_reason: str | None = None
    stop_detail: str | None = None
    event_idx: int | None = None  # the pending call's event in its session (ingest's idx)
    action: str | None = None  # the call's action class
    counters: dict[str, Any] = field(default_factory=dict)


def read_new_lines(path: str, offset: int, max_line: int = DEFAULT_MAX_LINE) -> tuple[
    list[Line], int
]:
    """The complete lines of ``path`` after byte ``offset``, and the offset after them (a
    FIFO or a device named as the transcript is refused, not read forever)."""
    out: list[Line] = []
    with open_file(Path(path)) as f:
        while True:
            lines, offset = read_lines(f, offset, READ_LINES, max_line)
            if not lines:
                return out, offset
            out.extend(lines)


def advance(
    state: HookState, fold: Fold, path: str, max_line: int = DEFAULT_MAX_LINE
) -> list[StepRow]:
    """Fold the lines of ``path`` written since the last call into ``state``; their steps."""
    known = state.files.get(path) or FileState()
    lines, offset = read_new_lines(path, known.offset, max_line)
    if not lines and path in state.files:
        return []
    source = _source(state, fold, path, known)
    steps = source.out.steps
    for line in lines:
        before = len(steps)
        source.feed_lines([line], max_line)
        if not line.oversize and b'"tool_use"' in line.raw:
            _note_calls(state, line.raw, steps[before:])
    new = list(steps)
    _keep(state, source, path, offset)
    return new


def count_family(state: HookState, fold: Fold, parent: str, rows: list[StepRow]) -> None:
    """Feed the family's fold the steps of ``parent`` and its sub-agents among ``rows`` (the
    steps this call read)."""
    family = _family(state, fold)
    family.feed(family_row(r) for r in rows if _in_family(state, parent, r[_SESSION]))
    state.family = family.to_dict()


def decide(state: HookState, fold: Fold, payload: Payload, family: bool = False) -> Verdict:
    """Whether the pending call of ``payload`` may be taken, given the transcript in ``state``
    (already advanced to the end of the transcript; with ``family``, its family counted by
    :func:`count_family`)."""
    sid = payload.fold_session
    found = state.calls.get(call_key(payload.tool_use_id or ""))
    if found is not None and found[0] == sid:
        session = Session.from_resume(state.sessions[sid])
        idx, action = found[1], found[2]
        pending = None
        place = ((found[3] if len(found) > 3 else None) or "", sid, idx)
    else:
        session, pending = _pending(state, fold, payload)
        idx, action = pending[_IDX], pending[_ACTION]
        place = key_of(family_row(pending))
    verdict = _own(state, session, payload, idx, action)
    if family and verdict.decision == ALLOW:
        stop = _family_stop(state, fold, place, pending)
        if stop is not None:
            detail = f"the family of session {payload.session_id}: {stop.detail}"
            return _deny(session, idx, action, stop.reason, detail)
    return verdict


def _own(
    state: HookState, session: Session, payload: Payload, idx: int, action: str | None
) -> Verdict:
    """The verdict of the session's own caps and its parent's."""
    sid = session.session_id
    s = session.state
    if s.stop_at is not None and s.stop_at <= idx:
        return _deny(session, idx, action, s.stop_reason, s.stop_detail)
    parent = session.parent_session_id or (payload.session_id if payload.agent_id else None)
    if parent and parent in state.sessions:
        p = State.from_dict(state.sessions[parent]["state"])
        if p.stop_reason is not None:
            detail = f"parent session {parent}: {p.stop_detail}"
            return _deny(session, idx, action, p.stop_reason, detail)
    return Verdict(ALLOW, sid, event_idx=idx, action=action, counters=counters(s))


def _family(state: HookState, fold: Fold) -> FamilyFold:
    return FamilyFold.resume(
        state.family, fold.budget, families_for(CLAUDE_CODE), fold.vendor_map
    )


def _in_family(state: HookState, parent: str, sid: str) -> bool:
    return sid == parent or (state.sessions.get(sid) or {}).get("parent_session_id") == parent


def _family_stop(
    state: HookState, fold: Fold, place: tuple[str, str, int], pending: StepRow | None
) -> FamilyStop | None:
    """The family's stop if it is at or before the call at ``place``: one already read, or
    the one taking the ``pending`` call (not in the transcript yet: the latest step) makes."""
    family = _family(state, fold)
    stop = family.stop
    if stop is not None:
        return stop if stop.key <= place else None
    if pending is None:
        return None
    return family.feed([family_row(pending)])  # on a copy: the call is not in the state


def counters(state: State) -> dict[str, Any]:
    return {name: getattr(state, name) for name in COUNTERS}


def deny_reason(reason: StopReason, detail: str | None) -> str:
    """What the model reads: the stop, the counter against its cap, the safe action."""
    safe = DECISIONS[reason].safe_action
    return (
        f"agent-ledger budget stop: {reason.value} ({detail}). Safe action: {safe}. "
        "Every further tool call of this session will be denied; stop and report to the user."
    )


def _deny(
    session: Session, idx: int, action: str | None, reason: StopReason | None, detail: str | None
) -> Verdict:
    assert reason is not None
    return Verdict(
        DENY, session.session_id, deny_reason(reason, detail), reason.value, detail, idx,
        action, counters(session.state),
    )


def _source(state: HookState, fold: Fold, path: str, known: FileState) -> SourceFold:
    cursor = Cursor(**known.cursor) if known.cursor else None
    sessions = {sid: Session.from_resume(data) for sid, data in state.sessions.items()}
    return SourceFold(fold, _source_id(path), path, CLAUDE_CODE, None, cursor, sessions)


def _keep(state: HookState, source: SourceFold, path: str, offset: int) -> None:
    source.take()
    state.files[path] = FileState(offset, source.cursor.to_dict())
    state.sessions = {sid: s.to_resume() for sid, s in source.sessions.items()}


def _note_calls(state: HookState, raw: bytes, rows: list[StepRow]) -> None:
    """Remember the step of each ``tool_use`` block of an assistant line just folded: the
    importer gives a line's calls, in block order, as its last steps."""
    try:
        blocks = json.loads(raw)["message"]["content"]
        ids = [b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return
    if not ids or len(rows) < len(ids):
        return  # a copy of a line folded already: its calls are remembered from the first
    for call, row in zip(ids, rows[-len(ids):], strict=True):
        if isinstance(call, str):
            state.calls[call_key(call)] = [row[_SESSION], row[_IDX], row[_ACTION], row[_TS]]
    bounded(state.calls, CALLS_MAX)


def _pending(state: HookState, fold: Fold, payload: Payload) -> tuple[Session, StepRow]:
    """A call not in the transcript yet: folded, on a copy, as the line the importer would
    read (one more ``tool_use`` block of the session's open response)."""
    path = payload.transcript_path
    probe = copy.deepcopy(state)
    known = probe.files.get(path) or FileState()
    source = _source(probe, fold, path, known)
    reader = source.cursor.reader.get(payload.fold_session) or {}
    line = {
        "type": "assistant",
        "sessionId": payload.session_id,
        "uuid": f"pending-{payload.tool_use_id}",
        "cwd": payload.cwd,
        "message": {
            "id": reader.get("round") or f"pending-{payload.tool_use_id}",
            "role": "assistant",
            "content": [{
                "type": "tool_use", "id": payload.tool_use_id or "pending",
                "name": payload.tool_name, "input": payload.tool_input,
            }],
        },
    }
    if payload.agent_id:
        line.update(isSidechain=True, agentId=payload.agent_id)
    source.feed_line(json.dumps(line).encode(), known.offset)
    session = source.sessions.get(payload.fold_session)
    rows = source.out.steps
    if session is None or not rows or rows[-1][_SESSION] != session.session_id:
        raise HookInputError(
            f"cannot fold the pending call {payload.tool_use_id!r} into session "
            f"{payload.fold_session!r}"
        )
    return session, rows[-1]


def call_key(tool_use_id: str) -> str:
    """A tool call's key in the state: a digest of its id, short enough (16 hex digits) that
    no secret rule looks at it, and no id kept in the clear."""
    return hashlib.sha256(tool_use_id.encode()).hexdigest()[:16]


def _source_id(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:12]
