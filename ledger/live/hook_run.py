"""One call of the live brake, as Claude Code makes it: hook input in, hook output out.

Everything is caught here: Claude Code reads only the JSON this returns (exit code 0 always),
never a traceback. A call that cannot be answered (unreadable input, transcript, state or
budget) is denied, saying why, unless the user chose ``--fail-open``; the traceback goes to
``ledger.db.hook/hook.log``. Output formats are Claude Code's (docs/hooks.md): a denied
``PreToolUse`` is ``hookSpecificOutput.permissionDecision = "deny"`` with the reason the
model reads; an allowed call prints nothing.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from ledger.ingest.options import Options
from ledger.live import hook_store
from ledger.live.hook import (
    ALLOW,
    DENY,
    PRE_TOOL_USE,
    HookInputError,
    HookState,
    Payload,
    Verdict,
    advance,
    count_family,
    decide,
)

BUDGET_FILE = ".agent-ledger.toml"
#: Given the budget file found for the session (or None), the options to fold under.
OptionsFor = Callable[[str | None], Options]


def find_budget_file(cwd: str | None) -> Path | None:
    """``.agent-ledger.toml`` in the session's folder or the nearest folder above it."""
    if not cwd:
        return None
    here = Path(cwd)
    for folder in (here, *here.parents):
        candidate = folder / BUDGET_FILE
        if candidate.is_file():
            return candidate
    return None


def run(
    stdin: bytes, db: Path, options_for: OptionsFor, budget_file: str | None = None,
    fail_open: bool = False,
) -> str:
    """The text to print for one hook call (empty: allowed without a word)."""
    started = time.perf_counter()
    payload: Payload | None = None
    try:
        payload = Payload.parse(stdin)
        found = budget_file or find_budget_file(payload.cwd)
        options = options_for(str(found) if found else None)
        verdict = _answer(payload, db, options)
        if verdict is None:
            return ""
        digest = options.budget.digest
    except Exception as exc:  # noqa: BLE001 - the top of the hook: nothing may escape
        hook_store.log_error(db, traceback.format_exc())
        verdict = verdict_of_failure(payload, exc, fail_open)
        digest = ""
    took = (time.perf_counter() - started) * 1000
    try:
        hook_store.record(db, payload, verdict, digest, took)
    except Exception:  # noqa: BLE001 - a decision stands even if it cannot be recorded
        hook_store.log_error(db, traceback.format_exc())
    return output(verdict, payload)


def _answer(payload: Payload, db: Path, options: Options) -> Verdict | None:
    """Fold the transcript's new lines; for a ``PreToolUse``, the verdict on its call."""
    fold = options.make_fold()
    path = hook_store.state_file(db, payload.session_id)
    family = options.subagents_count_in_parent
    with hook_store.locked(path):
        # (a state kept without the family's fold is read again from the start)
        state = _load(path, options.fold_digest + ("+family" if family else ""))
        clean_already = hook_store.strings(state.to_dict())
        read = [
            row for transcript in payload.transcripts(family)
            for row in advance(state, fold, transcript, options.max_line)
        ]
        if family:
            count_family(state, fold, payload.session_id, read)
        hook_store.save(path, state, clean_already)
    if payload.event != PRE_TOOL_USE:
        return None
    if not payload.tool_use_id:
        raise HookInputError("PreToolUse input has no 'tool_use_id'")
    verdict = decide(state, fold, payload, family)
    return verdict


def _load(path: Path, digest: str) -> HookState:
    try:
        return hook_store.load(path, digest)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HookInputError(f"cannot read the hook state {path}: {exc}") from None


def verdict_of_failure(payload: Payload | None, exc: Exception, fail_open: bool) -> Verdict:
    what = f"{type(exc).__name__}: {exc}" if not isinstance(exc, HookInputError) else str(exc)
    session = payload.fold_session if payload else ""
    if fail_open:
        return Verdict(ALLOW, session, reason=f"agent-ledger hook failed open: {what}")
    return Verdict(
        DENY, session,
        reason=f"agent-ledger hook could not check the budget, so the call is denied "
        f"(fail closed): {what}. Tell the user; they can run `agent-ledger hook status` "
        "or install the hook with --fail-open.",
    )


def output(verdict: Verdict, payload: Payload | None) -> str:
    """Claude Code's ``PreToolUse`` output for a denied call; nothing for an allowed one, nor
    for the other events (they are only read, never blocked)."""
    if verdict.decision != DENY or (payload is not None and payload.event != PRE_TOOL_USE):
        return ""
    return json.dumps({
        "hookSpecificOutput": {
            "hookEventName": PRE_TOOL_USE,
            "permissionDecision": "deny",
            "permissionDecisionReason": verdict.reason,
        }
    })
