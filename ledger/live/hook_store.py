"""Where the live brake keeps its state between calls, and records its decisions.

Beside the ledger database ``ledger.db``, ``ledger.db.hook/`` holds one JSON file per Claude
Code session (:class:`~ledger.live.hook.HookState`), taken under an exclusive ``flock`` for the
whole call, since Claude Code may run the hooks of parallel tool calls at once. Every decision
is a row of ``hook_decisions`` (migration 013), written through the one redacting writer, so
``serve`` shows it; the session's rows appear when ``ingest`` reads the transcript.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator, Set
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ledger.core.budget import State
from ledger.core.redact import redact, redact_json
from ledger.live.hook import HookState, Payload, Verdict

DEFAULT_DB = Path("~/.agent-ledger/ledger.db")
DB_ENV = "AGENT_LEDGER_DB"
LOG_NAME = "hook.log"
BUSY_TIMEOUT_S = 5.0  # under the hook's timeout in settings.json
STATUS_COUNTERS = ("steps", "writes", "tool_calls", "output_tokens", "consecutive_tool_errors",
                   "cost")


def default_db() -> Path:
    return Path(os.environ.get(DB_ENV) or DEFAULT_DB).expanduser()


def state_dir(db: Path) -> Path:
    return db.with_name(db.name + ".hook")


def state_file(db: Path, session_id: str) -> Path:
    name = hashlib.sha256(session_id.encode()).hexdigest()[:24]
    return state_dir(db) / f"{name}.json"


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """The session's state, for this process alone until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def load(path: Path, fold_digest: str) -> HookState:
    """The saved state, or a fresh one if there is none or it was folded under other
    settings (another budget: the transcript is read again from its start). A state file that
    cannot be read raises (the hook fails closed)."""
    if not path.exists():
        return HookState(fold_digest)
    state = HookState.from_dict(json.loads(path.read_bytes()))
    return state if state.fold_digest == fold_digest else HookState(fold_digest)


def strings(data: Any) -> set[str]:
    """Every string of a JSON value, keys too: those of a state just loaded are clean."""
    if isinstance(data, str):
        return {data}
    if isinstance(data, dict):
        return set(data).union(*map(strings, data.values())) if data else set()
    if isinstance(data, list):
        return set().union(*map(strings, data)) if data else set()
    return set()


def save(path: Path, state: HookState, clean_already: Set[str] = frozenset()) -> None:
    """Written whole to a new file, then renamed over the old: a killed hook leaves the old.

    The state is reader state, as ``sources.cursor`` and ``fold_state`` are (the tool names of
    calls still open, the session's resumable fold), so every string in it, keys too, is
    redacted (:func:`~ledger.core.redact.redact_json`). String by string, not as one text:
    its keys are the fold's own names (``output_tokens``, ``session_id``) and ids, never a
    secret's context, and the whole text, which holds such names next to ids, would load the
    secret scanner's rules in every call (:mod:`ledger.core.secret_needs`). The strings of
    ``clean_already`` (those of the state as it was loaded, redacted when it was saved) are
    not looked at again (redaction is idempotent): only the call's new strings are, and only
    if one of them holds a secret is the state redacted, every string of it."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    data = state.to_dict()
    if any(redact(text)[1] for text in strings(data) - clean_already):
        data, _ = redact_json(data)
    tmp.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    os.replace(tmp, path)


def record(
    db_path: Path, payload: Payload | None, verdict: Verdict, budget_digest: str, took_ms: float
) -> None:
    """One ``hook_decisions`` row, through the redacting writer. Plain ``sqlite3`` once the
    table exists (sqlite-utils and the migrations cost a hook call 0.4 s to import); a new
    database is made and migrated by :func:`ledger.db.connection.connect` first."""
    from ledger.db.writes import clean, now

    row: dict[str, Any] = {
        "at": now(),
        "session_id": verdict.session_id,
        "hook_event": payload.event if payload else None,
        "tool_use_id": payload.tool_use_id if payload else None,
        "tool_name": payload.tool_name if payload else None,
        "action": verdict.action,
        "decision": verdict.decision,
        "stop_reason": verdict.stop_reason,
        "stop_detail": verdict.stop_detail,
        "reason": verdict.reason,
        "event_idx": verdict.event_idx,
        "counters": json.dumps(verdict.counters, sort_keys=True),
        "budget_digest": budget_digest,
        "transcript_path": payload.transcript_path if payload else None,
        "took_ms": round(took_ms, 2),
    }
    # The counters are the fold's numbers under its own names: nothing to redact, and as one
    # JSON text (names next to numbers) they would load the secret scanner's rules.
    values = [v if k == "counters" else clean(v) for k, v in row.items()]
    db_path.parent.mkdir(parents=True, exist_ok=True)
    conn = _open(db_path)
    try:
        conn.execute(
            f"INSERT INTO hook_decisions ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
            values,
        )
        conn.commit()
    finally:
        conn.close()


def _open(db_path: Path) -> sqlite3.Connection:
    conn = _connect(db_path)
    found = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'hook_decisions'"
    ).fetchone()
    if found is None:
        conn.close()
        from ledger.db.connection import connect

        connect(db_path).conn.close()
        conn = _connect(db_path)
    return conn


def _connect(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(db_path), timeout=BUSY_TIMEOUT_S)
    # As ledger.db.connection sets it: in WAL, a commit does not wait for the disk.
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def session_status(
    db: Path, session_id: str | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The counters of a Claude Code session (and its sub-agents) as the hook last saved
    them: the session given, else the one the hook saw last; and its family's, counted
    together (with ``subagents_count_in_parent`` on; None otherwise). Empty if it saw none."""
    if session_id is not None:
        path = state_file(db, session_id)
        if not path.exists():
            raise ValueError(f"the hook has seen no session {session_id!r} (state in {path})")
    else:
        saved = sorted(
            (p for p in state_dir(db).glob("*.json") if _is_state_name(p.stem)),
            key=lambda p: p.stat().st_mtime,
        )
        if not saved:
            return [], None
        path = saved[-1]
    state = HookState.from_dict(json.loads(path.read_bytes()))
    rows = [_status_row(sid, State.from_dict(data["state"]))
            for sid, data in state.sessions.items()]
    family = None
    if state.family:
        parent = next(iter(state.sessions), "").split(":agent-")[0]
        family = _status_row(f"{parent} and its sub-agents", State.from_dict(
            state.family["state"]))
        stop = state.family.get("stop")
        if stop:  # the family's first stop, as ingest records it in family_stops
            family.update(stop=stop[3], detail=f"{stop[4]} (at step {stop[1]} of {stop[0]})")
    return rows, family


def _status_row(session: str, s: State) -> dict[str, Any]:
    return {
        "session": session, **{k: getattr(s, k) for k in STATUS_COUNTERS},
        "stop": s.stop_reason.value if s.stop_reason else "-",
        "detail": s.stop_detail or "",
    }


def _is_state_name(stem: str) -> bool:
    """A session's state file (:func:`state_file`), not the prices or action map kept beside."""
    return len(stem) == 24 and all(c in "0123456789abcdef" for c in stem)


def log_error(db_path: Path, text: str) -> None:
    """A failure of the hook, with its traceback, for the user (never for Claude Code)."""
    try:
        folder = state_dir(db_path)
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / LOG_NAME).open("a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")
    except OSError:
        pass  # nowhere to log: the decision itself still says what happened
