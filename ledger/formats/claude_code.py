"""Claude Code session transcripts (``~/.claude/projects/<project>/<sessionId>.jsonl``).

What a record becomes (the README's mapping table says the same for users):

* ``assistant`` lines are model rounds. Claude Code writes one line per content block (text,
  thinking, each ``tool_use``) and repeats the message's ``usage`` on each, sometimes growing,
  so the round is the API response, keyed by ``message.id`` (``requestId`` if it has none;
  ccusage keys it by both, which go together in real transcripts). The first line of a response
  is a round; later lines continue it (``same_round``), adding their ``tool_use`` blocks and the
  growth of each usage count (``input_tokens``, ``cache_creation_input_tokens``,
  ``cache_read_input_tokens``, ``output_tokens``) over what was counted: usage is taken once per
  response, the fullest seen, never summed per line. The input and cache counts are fixed when
  the response starts, so they equal ccusage's; ccusage keeps the *first* line's
  ``output_tokens``, a partial count while the response streams (its issue 901), where the
  ledger keeps the final one. The model is the round's ``model`` (and its ``detail``). A
  response id seen before in the session (one of its last 256; a replayed transcript) is skipped
  and counted in the reader state.
* ``message.stop_reason`` is null on every line Claude Code writes: null is "not a stop". A
  non-null value is passed on as the vendor stop string.
* Synthetic API-error lines (``isApiErrorMessage``, model ``<synthetic>``) and the
  ``system/api_error`` lines of each retry are ``retry`` actions of the tool ``api``: API
  failures, never completions, and the raw material of retry storms.
* Each ``tool_use`` block is also a step of its action class (think, read or write, from the
  action map; Bash by its command), taken as it is called; a call repeating one that failed
  (the same tool and input) is a ``retry``. A tool the map does not name is a write, marked
  unclassified.
* ``user`` lines with ``tool_result`` blocks continue the round that called the tool: each
  result is an observation (a digest of the call and its result) and a tool error when
  ``is_error`` is true. A result the user rejected is a ``user_cancel`` end, not a tool error;
  a rejection with feedback ("... the user said: ...") is neither: the model reads the
  feedback and goes on, so it is the call's result (not an error) and the turn stays open.
* A user prompt starts a turn (``start``); ``system/turn_duration`` and
  ``system/stop_hook_summary`` end it (``end``, ``task_complete``, or the unmapped vendor
  stop ``stop_hook_prevented`` when a hook stopped the agent); "[Request interrupted by
  user...]" ends it as ``user_cancel``.
* Sub-agent (sidechain) lines belong to their own session, ``<sessionId>:agent-<agentId>``,
  linked to the parent session ``<sessionId>``; the parent never counts their usage. Old-format
  (1.0.x) transcripts write each sub-agent inline, with no ``agentId``: a sidechain line with
  no ``parentUuid`` starts a sub-agent, ``<sessionId>:sidechain-<its uuid>``, and each later
  line joins the sub-agent of the line it follows (``parentUuid``), so sub-agents running side
  by side stay apart. A sidechain line whose parent was not read (a transcript cut in the
  middle of a sub-agent) goes to ``<sessionId>:sidechain``.
* The task class is the repository ``cwd`` names (:func:`ledger.core.task_classes.repo_name`:
  worktrees resolved to their repository, temporary folders ``tmp``).
* Each line's ``uuid`` is its record key: a copy of the line (a snapshot of the transcript,
  the history a resumed or forked session copies with its original ``sessionId``, any piece
  of it) is folded once per session, in the transcript's order (see ledger/ingest/source.py
  and ledger/ingest/copies.py).

Reader state, per session: the current response id and the usage counted for it, the
ids of the last 256 responses, the open tool calls (name and input digest, bounded) and the
calls that failed (their digests, bounded); in the parent's, the sub-agent of each of the last
512 inline sidechain lines (its first line's uuid).
"""

from __future__ import annotations

from typing import Any

from ledger.core.actions import ActionMap
from ledger.core.events import ROUND, Event
from ledger.formats.agent_records import (
    UnknownRecord,
    as_object,
    bounded,
    digest,
    excerpt,
    keyed,
    moment,
    remember_outcome,
    stamped,
    task_class_of,
    text_of,
    tool_call,
    tool_result,
    whole,
)
from ledger.formats.seed_dialects import Record, RecordError

#: Line types with nothing for the budget: hooks, file snapshots, titles, queue operations.
IGNORED = frozenset({
    "progress", "file-history-snapshot", "queue-operation", "summary", "custom-title",
    "ai-title", "last-prompt", "attachment", "tag", "agent-name", "pr-link",
})
#: ``system`` subtypes with nothing for the budget (local slash commands, compaction, notes).
IGNORED_SYSTEM = frozenset({
    "init", "local_command", "compact_boundary", "microcompact_boundary", "informational",
    "away_summary", "agents_killed", "model_refusal_fallback",
})
#: User text that is not a prompt to the model: local slash commands and their output.
NOT_PROMPTS = ("<command-name>", "<command-message>", "<local-command-stdout>",
               "<local-command-caveat>", "<local-command-stderr>")
INTERRUPTED = "[Request interrupted by user"
REJECTED = "The user doesn't want to proceed with this tool use"
#: What Claude Code adds to a rejection when the user typed an instruction with it.
FEEDBACK = "the user said:"
SEEN_MAX = 256
#: Event fields and the ``message.usage`` counts they take (Claude Code writes no reasoning
#: count: thinking is inside ``output_tokens``).
USAGE_FIELDS = (
    ("output_tokens", "output_tokens"),
    ("input_tokens", "input_tokens"),
    ("cache_creation_tokens", "cache_creation_input_tokens"),
    ("cache_read_tokens", "cache_read_input_tokens"),
)
_COUNTS = tuple(name for name, _ in USAGE_FIELDS)
TOOLS_MAX = 512
CHAINS_MAX = 512


def looks_like(obj: dict[str, Any]) -> bool:
    kind = obj.get("type")
    if kind in ("user", "assistant", "system", "progress", "queue-operation"):
        return isinstance(obj.get("sessionId"), str)
    return (kind == "file-history-snapshot" and "snapshot" in obj) or (
        kind == "summary" and "leafUuid" in obj
    )


def read(value: Any, state: dict[str, Any], fallback: str, actions: ActionMap) -> list[Record]:
    obj = as_object(value)
    kind = obj.get("type")
    if kind in IGNORED:
        return []
    if kind not in ("assistant", "user", "system"):
        raise UnknownRecord(str(kind))
    if kind == "system" and obj.get("subtype") in IGNORED_SYSTEM:
        return []
    session, parent = _session(obj, state)
    mine = _reader(state, session)
    if kind == "assistant":
        events = _assistant(obj, mine, actions)
    elif kind == "user":
        events = _user(obj, mine)
    else:
        events = _system(obj)
    keyed(events, obj.get("uuid"))
    cwd = obj.get("cwd") if isinstance(obj.get("cwd"), str) else None
    return stamped(events, moment(obj), session, task_class_of(cwd), parent, cwd)


def _reader(state: dict[str, Any], session: str) -> dict[str, Any]:
    """A session's reader state (not ``setdefault``: its default, four dicts, was made on
    every line)."""
    mine = state.get(session)
    if mine is None:
        mine = state[session] = {"round": None, "counted": {}, "seen": {}, "tools": {}}
    return mine


def _session(obj: dict[str, Any], state: dict[str, Any]) -> tuple[str, str | None]:
    """The session a line belongs to, and its parent when it is a sub-agent's line."""
    session = obj.get("sessionId")
    if not isinstance(session, str) or not session:
        raise RecordError("field 'sessionId' must be a non-empty string")
    if obj.get("isSidechain") is not True:
        return session, None
    agent = obj.get("agentId")
    if isinstance(agent, str) and agent:
        return f"{session}:agent-{agent}", session
    return _inline_agent(obj, _reader(state, session).setdefault("chains", {}), session), session


def _inline_agent(obj: dict[str, Any], chains: dict[str, str], parent: str) -> str:
    """An old-format sub-agent's session: the one its ``parentUuid`` line belongs to, or a new
    one when the line has no parent. ``chains`` maps the last lines' uuids to the first line's
    uuid of their sub-agent ("" when unknown)."""
    up, uuid = obj.get("parentUuid"), obj.get("uuid")
    uuid = uuid if isinstance(uuid, str) else ""
    root = chains.get(up, "") if isinstance(up, str) and up else uuid
    if uuid:
        chains[uuid] = root
        bounded(chains, CHAINS_MAX)
    return f"{parent}:sidechain-{root}" if root else f"{parent}:sidechain"


def _message(obj: dict[str, Any]) -> dict[str, Any]:
    return as_object(obj.get("message"), "field 'message'")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


# --- assistant lines: rounds ----------------------------------------------------------------


def _assistant(obj: dict[str, Any], mine: dict[str, Any], actions: ActionMap) -> list[Event]:
    message = _message(obj)
    if obj.get("isApiErrorMessage") is True or message.get("model") == "<synthetic>":
        _close_round(mine)
        kind = [str(v) for v in (obj.get("error"), obj.get("apiErrorStatus")) if v is not None]
        return [Event("retry", tool="api", detail=" ".join(kind) or "API error")]
    key = _response_id(message, obj)
    tools = [b for b in _blocks(message) if b.get("type") == "tool_use"]
    stop = message.get("stop_reason")
    vendor = stop if isinstance(stop, str) and stop else None
    same = key is not None and key == mine["round"]
    if not same and key is not None:
        if digest(key)[:12] in mine["seen"]:
            mine["replayed"] = mine.get("replayed", 0) + 1
            return []
        _close_round(mine)
        mine["round"] = key
    calls = []  # each call's name and digest, once (the input can be a whole file)
    for block in tools:
        name = block.get("name") if isinstance(block.get("name"), str) else None
        calls.append((name, digest(name, block.get("input"))))
        if isinstance(block.get("id"), str):
            mine["tools"][block["id"]] = list(calls[-1])
    bounded(mine["tools"], TOOLS_MAX)
    if not same:
        mine["counted"] = {}
    added = _usage_growth(message.get("usage"), mine)
    if same and not tools and not any(v for v in added.values()) and vendor is None:
        return []  # another block of the same response, adding nothing
    names = [b["name"] for b in tools if isinstance(b.get("name"), str)]
    model = message.get("model")
    model = None if same or not isinstance(model, str) else model
    return [Event(
        ROUND,
        same_round=same,
        tool_calls=len(tools),
        vendor_stop=vendor,
        tool=",".join(names) or None,
        detail=model,
        model=model,
        **added,
    ), *_tool_calls(tools, calls, mine, actions)]


def _tool_calls(
    tools: list[dict[str, Any]], calls: list[tuple[str | None, str]], mine: dict[str, Any],
    actions: ActionMap,
) -> list[Event]:
    """Each ``tool_use`` block (its name and digest in ``calls``) as a step of its action
    class."""
    failures = mine.setdefault("failed", {})
    return [
        tool_call(name, block.get("input"), call, failures, actions)
        for block, (name, call) in zip(tools, calls, strict=True)
    ]


def _response_id(message: dict[str, Any], obj: dict[str, Any]) -> str | None:
    """The API response a line belongs to: ``message.id``, else ``requestId``, else the line's
    ``uuid``. (ccusage keys a response by ``message.id`` and ``requestId`` together: in every
    real transcript the two go together, and a message id is one response whatever request
    it is logged under.)"""
    for key in (message.get("id"), obj.get("requestId"), obj.get("uuid")):
        if isinstance(key, str) and key:
            return key
    return None


def _usage_growth(usage: Any, mine: dict[str, Any]) -> dict[str, int | None]:
    """What a line's ``usage`` adds to its response's: per count, its growth over the largest
    seen so far in the response (lines repeat the usage, and ``output_tokens`` grows as the
    response streams: counting the fullest once is the response's final figure). A count the
    line lacks is None."""
    counted = mine["counted"]
    added: dict[str, int | None] = {}
    if not isinstance(usage, dict):
        return dict.fromkeys(_COUNTS)
    for name, field in USAGE_FIELDS:
        value = usage.get(field)
        if type(value) is not int or value < 0:  # (a count as it nearly always is: no call)
            value = whole(value)
        if value is None:
            added[name] = None
            continue
        before = counted.get(name)
        added[name] = value if before is None else max(0, value - before)
        counted[name] = value if before is None else max(before, value)
    return added


def _close_round(mine: dict[str, Any]) -> None:
    """The current response is over: remember its id, so a replay of it is not counted again."""
    if mine["round"] is not None:
        mine["seen"][digest(mine["round"])[:12]] = 0
        bounded(mine["seen"], SEEN_MAX)
    mine["round"], mine["counted"] = None, {}


# --- user lines: tool results, prompts, interruptions ---------------------------------------


def _user(obj: dict[str, Any], mine: dict[str, Any]) -> list[Event]:
    blocks = _blocks(_message(obj))
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if results:
        return [_tool_result(block, mine) for block in results]
    if obj.get("isMeta") is True or obj.get("isCompactSummary") is True:
        return []
    text = "\n".join(b["text"] for b in blocks if isinstance(b.get("text"), str)).lstrip()
    if text.startswith(INTERRUPTED):
        return [Event("end", outcome="user_cancel", detail="interrupted by the user")]
    if not text or text.startswith(NOT_PROMPTS):
        return []
    kind = "task notification" if text.startswith("<task-notification>") else "user prompt"
    return [Event("start", detail=kind)]


def _tool_result(block: dict[str, Any], mine: dict[str, Any]) -> Event:
    call = block.get("tool_use_id")
    name, call_digest = mine["tools"].pop(call, [None, ""]) if isinstance(call, str) else [None, ""]
    text = text_of(block.get("content"))
    failed = block.get("is_error") is True
    if failed and text.startswith(REJECTED):
        if FEEDBACK in text:  # the user redirected the model, which goes on: not an error
            return tool_result(name, call_digest, text, False)
        return Event("end", outcome="user_cancel", tool=name, detail="tool use rejected by user")
    remember_outcome(mine.setdefault("failed", {}), call_digest, failed)
    return tool_result(name, call_digest, text, failed)


# --- system lines: turn ends and API retries ------------------------------------------------


def _system(obj: dict[str, Any]) -> list[Event]:
    subtype = obj.get("subtype")
    if subtype == "turn_duration":
        ms = whole(obj.get("durationMs"))
        detail = "turn_duration" + (f" {ms} ms" if ms is not None else "")
        return [Event("end", outcome="task_complete", detail=detail)]
    if subtype == "stop_hook_summary":
        if obj.get("preventedContinuation") is True:
            reason = obj.get("stopReason") if isinstance(obj.get("stopReason"), str) else ""
            detail = "stop hook prevented continuation" + (f": {excerpt(reason)}" if reason else "")
            return [Event("end", vendor_stop="stop_hook_prevented", detail=detail)]
        return [Event("end", outcome="task_complete", detail="stop_hook_summary")]
    if subtype == "api_error":
        return [Event("retry", tool="api", detail=_retry_detail(obj))]
    raise UnknownRecord(f"system/{subtype}")


def _retry_detail(obj: dict[str, Any]) -> str:
    error = obj.get("error")
    status = error.get("status") if isinstance(error, dict) else None
    attempt, most = whole(obj.get("retryAttempt")), whole(obj.get("maxRetries"))
    parts = ["api_error"]
    if status is not None:
        parts.append(str(status))
    if attempt is not None:
        parts.append(f"attempt {attempt}" + (f"/{most}" if most is not None else ""))
    return " ".join(parts)
