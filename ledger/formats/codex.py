"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``).

Every line is ``{"timestamp", "type", "payload"}``. What a record becomes (the README's
mapping table says the same for users):

* A model response is a round. Its first output item (``reasoning``, an assistant
  ``message``, a ``function_call`` or other tool call) opens the round; later items of the same
  response continue it (``same_round``) and add their tool calls. The ``token_count`` event
  written after the response closes it and adds its output tokens.
* A rollout with no ``token_count`` (filtered, or a build that does not write it) still counts
  its rounds: a tool's output or a user message ends the open response, so the next output
  item opens a round. Once a ``token_count`` is read, it alone closes rounds.
* ``token_count`` totals are cumulative and re-emitted unchanged: each count of a round is the
  growth of its ``total_token_usage`` total (output, uncached input = ``input_tokens`` less
  ``cached_input_tokens``, cache reads = ``cached_input_tokens``, reasoning =
  ``reasoning_output_tokens``, which is inside the output and never added to it), so a
  session's sums are its last totals; a zero growth and ``info: null`` are skipped. Codex
  reports no cache writes.
* A rollout's lines carry no id: a line's record key is the digest of the whole line (its
  timestamp, to the millisecond, included), so a copy of the line, wherever it is (another file,
  a piece cut from the middle of the rollout, the same line twice in one file), counts once.
  No real rollout holds two identical lines (the 9 of the conformance table: none).
* Each tool call is also a step of its action class (think, read or write, from the action
  map; ``shell``, ``exec_command`` and ``local_shell_call`` by their command), taken as it is
  called; a call repeating one that failed (the same tool and arguments) is a ``retry``. A tool
  the map does not name is a write, marked unclassified.
* A tool's result continues the round that called it: ``function_call_output`` (or
  ``custom_tool_call_output``) is the observation, a digest of the call and its output. The
  exit code is a tool error: older builds put it in the output's JSON (``metadata.exit_code``),
  newer ones in ``exec_command_end`` (``exit_code``, ``status``), ``patch_apply_end`` and
  ``mcp_tool_call_end``; builds that write neither give it in the output's plain-text header
  (``Process exited with code N``, before ``Output:``). Each call's status is counted once.
  A ``declined`` command is a ``user_cancel`` end.
* ``task_started`` (or the first ``user_message`` of a turn in builds that do not write it)
  starts a turn; ``task_complete`` ends it (vendor stop ``task_complete``); ``turn_aborted``
  ends it with its reason as the vendor stop (``interrupted``/``replaced``: ``user_cancel``;
  ``budget_limited``: ``max_cost``). A rollout without them records no stop.
* An ``error`` event is a failed model call: a ``retry`` of the tool ``api``.
* The session id is ``session_meta.id``; a sub-agent's rollout links to its parent thread. The
  task class is the repository its ``git.repository_url`` names, else its ``cwd`` does
  (:func:`ledger.core.task_classes.repo_name`).

Reader state: the session, its task class, working folder and parent, the model of the turn,
whether a round is open, the token totals counted so far (and whether any was read), whether
a turn is open, the open tool calls, the calls whose status was already counted and the calls
that failed (all bounded).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import msgspec

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
from ledger.formats.seed_dialects import Record

TYPES = ("session_meta", "response_item", "event_msg", "turn_context", "compacted")
MODEL_OUTPUT = frozenset({"reasoning", "message"})
TOOL_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "web_search_call",
                        "tool_search_call", "image_generation_call"})
TOOL_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
IGNORED_ITEMS = frozenset({"ghost_snapshot", "compaction", "other"})
#: Events with nothing for the budget (they mirror response items, or are UI notes).
IGNORED_EVENTS = frozenset({
    "agent_message", "agent_reasoning", "agent_reasoning_raw_content", "context_compacted",
    "entered_review_mode", "exited_review_mode", "undo_completed", "thread_name_updated",
    "thread_rolled_back", "item_completed", "image_generation_end", "web_search_end",
    "view_image_tool_call", "warning", "guardian_assessment", "dynamic_tool_call_request",
    "dynamic_tool_call_response", "plan_update", "turn_diff", "process_rolled_back",
})
CALLS_MAX = 512
#: Event fields and the cumulative ``total_token_usage`` counts they are the growth of; the
#: uncached input is ``input_tokens`` less ``cached_input_tokens`` (see :func:`_totals`).
TOKEN_TOTALS = (
    ("output_tokens", "output_tokens"),
    ("input_tokens", "uncached_input_tokens"),
    ("cache_read_tokens", "cached_input_tokens"),
    ("reasoning_tokens", "reasoning_output_tokens"),
)
_encode = msgspec.json.Encoder().encode
#: The exit code in the header of a plain-text command output (Codex 0.12x ``exec_command``:
#: "Chunk ID: ...\nWall time: ...\nProcess exited with code 1\n...\nOutput:\n...").
EXIT_LINE = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
HEADER_END = "\nOutput:"
NO_CALL = (None, "")


def looks_like(obj: dict[str, Any]) -> bool:
    return obj.get("type") in TYPES and isinstance(obj.get("payload"), dict) and "timestamp" in obj


def read(value: Any, state: dict[str, Any], fallback: str, actions: ActionMap) -> list[Record]:
    obj = as_object(value)
    kind = obj.get("type")
    if kind not in TYPES:
        raise UnknownRecord(str(kind))
    payload = as_object(obj.get("payload"), "field 'payload'")
    if not state:
        state.update(session=None, task_class=None, folder=None, parent=None, model=None,
                     open=False,
                     totals={}, turn=False, calls={}, settled={})
    if kind == "session_meta":
        _meta(payload, state)
        return []
    if kind == "turn_context":
        state["model"] = payload.get("model") if isinstance(payload.get("model"), str) else None
        if state["task_class"] is None:
            _folder(payload, state)
        return []
    if kind == "compacted":
        return []
    events = (
        _item(payload, state, actions) if kind == "response_item" else _event(payload, state)
    )
    if events:  # a rollout's lines have no id: a line is known by its digest
        keyed(events, hashlib.sha256(_encode(obj)).hexdigest()[:16])
    session = state["session"] or fallback
    return stamped(
        events, moment(obj), session, state["task_class"], state["parent"], state.get("folder")
    )


def _folder(payload: dict[str, Any], state: dict[str, Any]) -> None:
    """The session's working folder and task class: the repository its ``git`` names, else its
    ``cwd`` (see :func:`ledger.core.task_classes.repo_name`)."""
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    git = payload.get("git") if isinstance(payload.get("git"), dict) else {}
    state["folder"] = cwd
    state["task_class"] = task_class_of(cwd, git.get("repository_url"))


def _meta(payload: dict[str, Any], state: dict[str, Any]) -> None:
    """The first ``session_meta`` names the session; a fork also carries its parent's."""
    found = payload.get("id") if isinstance(payload.get("id"), str) else None
    if state["session"] is None:
        state["session"] = found
        _folder(payload, state)
        state["parent"] = _parent(payload)
    elif found and found != state["session"] and state["parent"] is None:
        state["parent"] = found


def _parent(payload: dict[str, Any]) -> str | None:
    source = payload.get("source")
    spawn = source.get("subagent", {}) if isinstance(source, dict) else {}
    spawn = spawn.get("thread_spawn", {}) if isinstance(spawn, dict) else {}
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    parent = parent or payload.get("forked_from_id")
    return parent if isinstance(parent, str) else None


# --- response items: model output and tool results ------------------------------------------


def _item(item: dict[str, Any], state: dict[str, Any], actions: ActionMap) -> list[Event]:
    kind = item.get("type")
    if kind == "message" and item.get("role") != "assistant":
        _answered(state)
        return []  # the prompt, instructions and context sent to the model
    if kind in MODEL_OUTPUT:
        return _output(state, [])
    if kind in TOOL_CALLS:
        name = item.get("name") if isinstance(item.get("name"), str) else str(kind)
        call = item.get("call_id") or item.get("id")
        args = item.get("arguments", item.get("input", item.get("action")))
        call_digest = digest(name, args)
        if isinstance(call, str):
            state["calls"][call] = [name, call_digest]
            bounded(state["calls"], CALLS_MAX)
        failures = state.setdefault("failed", {})
        return [*_output(state, [name]), tool_call(name, args, call_digest, failures, actions)]
    if kind in TOOL_OUTPUTS:
        return [_tool_output(item, state)]
    if kind in IGNORED_ITEMS:
        return []
    raise UnknownRecord(f"response_item/{kind}")


def _output(state: dict[str, Any], tools: list[str]) -> list[Event]:
    """An output item: it opens a round, or continues the open one."""
    same = state["open"]
    state["open"] = True
    if same and not tools:
        return []
    return [Event(ROUND, same_round=same, tool_calls=len(tools), tool=",".join(tools) or None,
                  detail=None if same else state["model"],
                  model=None if same else state["model"])]


def _answered(state: dict[str, Any]) -> None:
    """Input for the model's next response: without token counts, the open round is over."""
    if not state.get("metered"):
        state["open"] = False


def _tool_output(item: dict[str, Any], state: dict[str, Any]) -> Event:
    _answered(state)
    call = item.get("call_id")
    name, call_digest = state["calls"].pop(call, [None, ""]) if isinstance(call, str) else NO_CALL
    text, failed = _exit_status(item.get("output"))
    if failed is not None and isinstance(call, str):
        if call in state["settled"]:
            failed = None  # its end event counted it already
        else:
            _settle(state, call)
    remember_outcome(state.setdefault("failed", {}), call_digest, failed)
    return tool_result(name, call_digest, text, failed)


def _exit_status(output: Any) -> tuple[str, bool | None]:
    """A tool output's text, and whether it failed (None: the output does not say).

    Older builds wrap the output in JSON with ``metadata.exit_code``; newer ones write plain
    text and report the exit code in ``exec_command_end``, or only in the text's header (read
    before ``Output:``, so a command that prints the phrase is not mistaken for its status).
    """
    if isinstance(output, dict):
        success = output.get("success")
        return text_of(output.get("content", output.get("output"))), (
            None if not isinstance(success, bool) else not success
        )
    if not isinstance(output, str):
        return text_of(output), None
    header = EXIT_LINE.search(output, 0, max(0, output.find(HEADER_END)))
    if header:
        return output, int(header.group(1)) != 0
    if output.startswith("{") and '"metadata"' in output:
        try:
            wrapped = json.loads(output)
        except ValueError:
            return output, None
        metadata = wrapped.get("metadata") if isinstance(wrapped, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("exit_code"), int):
            return text_of(wrapped.get("output")), metadata["exit_code"] != 0
    return output, None


def _settle(state: dict[str, Any], call: str) -> None:
    state["settled"][call] = 0
    bounded(state["settled"], CALLS_MAX)


# --- events: turns, token counts, tool status, errors ---------------------------------------


def _event(payload: dict[str, Any], state: dict[str, Any]) -> list[Event]:
    kind = payload.get("type")
    if kind in ("task_started", "turn_started"):
        state["turn"] = True
        return [Event("start", detail="turn started")]
    if kind == "user_message":
        _answered(state)
        if state["turn"]:
            return []
        state["turn"] = True
        return [Event("start", detail="user prompt")]
    if kind in ("task_complete", "turn_complete"):
        state["turn"] = state["open"] = False
        ms = whole(payload.get("duration_ms"))
        detail = kind + (f" {ms} ms" if ms is not None else "")
        return [Event("end", vendor_stop="task_complete", detail=detail)]
    if kind == "turn_aborted":
        state["turn"] = state["open"] = False
        reason = payload.get("reason")
        reason = reason if isinstance(reason, str) and reason else "turn_aborted"
        return [Event("end", vendor_stop=reason, detail="turn aborted")]
    if kind == "token_count":
        return _tokens(payload, state)
    if kind in ("exec_command_end", "patch_apply_end", "mcp_tool_call_end"):
        return _tool_status(payload, state)
    if kind == "error":
        message = payload.get("message") if isinstance(payload.get("message"), str) else ""
        return [Event("retry", tool="api", detail=excerpt(message) or "error")]
    if kind in IGNORED_EVENTS or (isinstance(kind, str) and kind.startswith("collab_")):
        return []
    raise UnknownRecord(f"event_msg/{kind}")


def _tokens(payload: dict[str, Any], state: dict[str, Any]) -> list[Event]:
    """The growth of the cumulative token totals; re-emitted totals add nothing. The output's
    growth closes the round; input read without output growing continues it."""
    info = payload.get("info")
    totals = _totals(info.get("total_token_usage") if isinstance(info, dict) else None)
    if totals is None:
        return []
    state["metered"] = True
    counted = state["totals"]
    grown: dict[str, int | None] = {}
    for name, total in totals.items():
        before = counted.get(name) or 0
        counted[name] = total  # (a counter that restarted starts again from its new total)
        grown[name] = None if total is None else max(0, total - before)
    if not grown["output_tokens"]:
        if not any(grown.values()):
            return []
        return [Event(ROUND, same_round=True, **{**grown, "output_tokens": None})]
    same = state["open"]
    state["open"] = False
    return [Event(ROUND, same_round=same, tool_calls=None if same else 0,
                  detail=None if same else state["model"],
                  model=None if same else state["model"], **grown)]


def _totals(usage: Any) -> dict[str, int | None] | None:
    """A ``total_token_usage`` as the event fields' totals (None without an output count)."""
    if not isinstance(usage, dict) or whole(usage.get("output_tokens")) is None:
        return None
    counts = {key: whole(usage.get(key)) for key in
              ("output_tokens", "cached_input_tokens", "reasoning_output_tokens")}
    given, cached = whole(usage.get("input_tokens")), counts["cached_input_tokens"]
    counts["uncached_input_tokens"] = (
        None if given is None else max(0, given - (cached or 0))
    )
    return {name: counts[key] for name, key in TOKEN_TOTALS}


def _tool_status(payload: dict[str, Any], state: dict[str, Any]) -> list[Event]:
    """The end of a command, patch or MCP call: a tool error unless its output said so already."""
    call = payload.get("call_id")
    if not isinstance(call, str) or call in state["settled"]:
        return []
    _settle(state, call)
    status = payload.get("status")
    name = {"exec_command_end": "exec_command", "patch_apply_end": "apply_patch"}.get(
        str(payload.get("type")), "mcp_tool_call"
    )
    if status == "declined":
        return [Event("end", outcome="user_cancel", tool=name, detail=f"{name} declined by user")]
    exit_code = payload.get("exit_code")
    result = payload.get("result")  # an MCP call: {"Ok": CallToolResult} or {"Err": message}
    ok = result.get("Ok") if isinstance(result, dict) else None
    failed = (
        status == "failed"
        or (isinstance(exit_code, int) and exit_code != 0)
        or payload.get("success") is False
        or (isinstance(result, dict) and "Err" in result)
        or (isinstance(ok, dict) and ok.get("isError") is True)
    )
    _, call_digest = state["calls"].get(call, NO_CALL)  # gone if its output came first
    remember_outcome(state.setdefault("failed", {}), call_digest, failed)
    detail = None
    if failed:
        text = payload.get("stderr") or payload.get("aggregated_output") or ""
        detail = excerpt(text if isinstance(text, str) else "") or f"exit code {exit_code}"
    return [Event(ROUND, same_round=True, tool_error=failed, tool=name, detail=detail)]
