"""OpenTelemetry exports in OTLP JSON: spans (GenAI semantic conventions) and log records
(Claude Code's and Codex's own events), as the collector's file exporter writes them.

A line is one ``ExportTraceServiceRequest`` (``resourceSpans``) or ``ExportLogsServiceRequest``
(``resourceLogs``); a file that is one such document on one line reads the same. What becomes
what (docs/otlp.md has the table, with the sources of every name):

* A span whose ``gen_ai.operation.name`` is a model call (``chat``, ``text_completion``,
  ``generate_content``) is a round: tokens from ``gen_ai.usage.*`` (the current names and the
  deprecated ``prompt_tokens`` / ``completion_tokens``), the model from
  ``gen_ai.response.model`` (else ``gen_ai.request.model``), the vendor stop the first of
  ``gen_ai.response.finish_reasons``. Its status ``ERROR`` makes it a failed API call: a
  ``retry`` of the tool ``api``. The conventions count cached input inside
  ``gen_ai.usage.input_tokens``; the ledger's ``input_tokens`` is the uncached part.
* A span ``execute_tool`` is a step of its action class (``gen_ai.tool.name`` and
  ``gen_ai.tool.call.arguments``, classed by the action map; a repeat of a failed call is a
  ``retry``), then its result, continuing the round: one tool call, an observation (a digest
  of the span's name, arguments and status, never its content) and a tool error when its
  status is ``ERROR``. Other spans (agents, workflows, HTTP) add nothing.
* Log records are events named by ``eventName``, the ``event.name`` attribute or the body:
  ``claude_code.api_request`` and Codex's ``codex.sse_event`` of kind ``response.completed``
  are rounds (their token counts and model); ``claude_code.api_error`` and a failed
  ``codex.api_request`` are ``retry`` steps of ``api``; ``claude_code.tool_result`` and
  ``codex.tool_result`` are a tool call and its result (``tool_name``, ``success``);
  ``claude_code.user_prompt`` and ``codex.user_prompt`` start a turn. Other events add nothing.
* The session is ``gen_ai.conversation.id``, else ``session.id`` (Claude Code), else
  ``conversation.id`` (Codex), else the trace id, else the file's; record attributes win over
  the resource's. The task class is ``gen_ai.agent.name``, else the resource's ``service.name``.
* A span's record key is its span id; a log record's is its time, event name and a digest of
  its attributes, so a copy of an export (a collector retrying, a file exported twice) is
  folded once.

Items are read in start-time order within a line. Reader state, per session (at most
:data:`SESSIONS_MAX`): the calls that failed, to tell a retry.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ledger.core.actions import ActionMap
from ledger.core.events import ROUND, Event
from ledger.formats.agent_records import (
    as_object,
    bounded,
    digest,
    keyed,
    remember_outcome,
    tool_call,
    tool_result,
    whole,
)
from ledger.formats.seed_dialects import Record

MODEL_CALLS = frozenset({"chat", "text_completion", "generate_content"})
TOOL_CALL = "execute_tool"
SESSIONS_MAX = 256
ERROR_CODES = frozenset({2, "2", "STATUS_CODE_ERROR"})
#: Session attributes, first found wins: the GenAI conventions', Claude Code's, Codex's.
SESSION_KEYS = ("gen_ai.conversation.id", "session.id", "conversation.id")
#: Event fields and the attributes that hold them, first found wins: the GenAI conventions'
#: current names, their deprecated ones, Claude Code's, Codex's (the cache counts before the
#: input, which may include them).
USAGE = (
    ("output_tokens", ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                       "output_tokens", "output_token_count")),
    ("cache_read_tokens", ("gen_ai.usage.cache_read.input_tokens",
                           "gen_ai.usage.cache_read_input_tokens", "cache_read_tokens",
                           "cached_token_count", "cached_content_token_count")),
    ("cache_creation_tokens", ("gen_ai.usage.cache_creation.input_tokens",
                               "gen_ai.usage.cache_creation_input_tokens",
                               "cache_creation_tokens")),
    ("input_tokens", ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens",
                      "input_tokens", "input_token_count")),
    ("reasoning_tokens", ("gen_ai.usage.reasoning.output_tokens",
                          "gen_ai.usage.reasoning_tokens", "reasoning_token_count")),
)
#: Input counts that include the cached input (subtracted to give the uncached part); Claude
#: Code's ``input_tokens`` is Anthropic's, already without it.
INPUT_WITH_CACHE = frozenset({
    "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "input_token_count",
})
MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "model")


def looks_like(obj: dict[str, Any]) -> bool:
    return isinstance(obj.get("resourceSpans"), list) or isinstance(obj.get("resourceLogs"), list)


def read(value: Any, state: dict[str, Any], fallback: str, actions: ActionMap) -> list[Record]:
    """One export request: the records of its spans and log records, in start-time order."""
    obj = as_object(value)
    items = [*_items(obj, "resourceSpans", "scopeSpans", "spans", True),
             *_items(obj, "resourceLogs", "scopeLogs", "logRecords", False)]
    items.sort(key=lambda item: _nanos(item[1]))
    records: list[Record] = []
    for attrs, item, is_span in items:
        session = _session(attrs, item, fallback)
        mine = state.pop(session, None) or {"failed": {}}
        state[session] = mine  # most recent last, so the oldest is the one dropped
        bounded(state, SESSIONS_MAX)
        if is_span:
            events = _span(attrs, item, mine, actions)
            keyed(events, item.get("spanId"))
        else:
            name = _event_name(attrs, item)
            events = _log(attrs, name, mine, actions)
            keyed(events, f"log:{_nanos(item)}:{name}:{digest(sorted(attrs.items()))[:16]}")
        when = _when(item)
        agent = attrs.get("gen_ai.agent.name") or attrs.get("service.name")
        task_class = agent if isinstance(agent, str) and agent else None
        for event in events:
            event.ts, event.at = when
            records.append(Record(event, session=session, task_class=task_class))
    return records


# --- the envelope ---------------------------------------------------------------------------


def _items(
    obj: dict[str, Any], top: str, scoped: str, leaf: str, spans: bool
) -> list[tuple[dict[str, Any], dict[str, Any], bool]]:
    """Each span or log record with its attributes, the resource's under the record's own."""
    found = []
    for resource in _objects(obj.get(top)):
        shared = attributes(as_object(resource.get("resource", {}), "resource").get("attributes"))
        for scope in _objects(resource.get(scoped)):
            for item in _objects(scope.get(leaf)):
                found.append(({**shared, **attributes(item.get("attributes"))}, item, spans))
    return found


def _objects(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def attributes(value: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` pairs as a plain dict of plain values."""
    out: dict[str, Any] = {}
    for pair in _objects(value):
        if isinstance(pair.get("key"), str):
            out[pair["key"]] = any_value(pair.get("value"))
    return out


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue``: its string, number, bool, list or dict (int64s come as strings)."""
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        number = whole(value["intValue"])
        return value["intValue"] if number is None else number
    if "arrayValue" in value:
        return [any_value(v) for v in _objects((value["arrayValue"] or {}).get("values"))]
    if "kvlistValue" in value:
        return attributes((value["kvlistValue"] or {}).get("values"))
    return None


def _nanos(item: dict[str, Any]) -> int:
    for key in ("startTimeUnixNano", "timeUnixNano", "observedTimeUnixNano"):
        value = whole(item.get(key))
        if value:
            return value
    return 0


def _when(item: dict[str, Any]) -> tuple[str | None, float | None]:
    nanos = _nanos(item)
    if not nanos:
        return None, None
    at = nanos / 1e9
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z"), at


def _session(attrs: dict[str, Any], item: dict[str, Any], fallback: str) -> str:
    for key in SESSION_KEYS:
        value = attrs.get(key)
        if isinstance(value, str) and value:
            return value
    trace = item.get("traceId")
    return trace if isinstance(trace, str) and trace.strip("0=A") else fallback


def _failed(item: dict[str, Any]) -> bool:
    status = item.get("status")
    return isinstance(status, dict) and status.get("code") in ERROR_CODES


# --- rounds and tool calls -------------------------------------------------------------------


def _round(attrs: dict[str, Any], vendor: str | None) -> Event:
    counts: dict[str, int | None] = {}
    for field, keys in USAGE:
        name = next((k for k in keys if whole(attrs.get(k)) is not None), None)
        counts[field] = None if name is None else whole(attrs[name])
        if field == "input_tokens" and name in INPUT_WITH_CACHE and counts[field] is not None:
            cached = (counts.get("cache_read_tokens") or 0) + (counts.get(
                "cache_creation_tokens") or 0)
            counts[field] = max(0, counts[field] - cached)
    model = next((attrs[k] for k in MODEL_KEYS if isinstance(attrs.get(k), str) and attrs[k]),
                 None)
    cost = attrs.get("cost_usd")
    cost = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
    return Event(ROUND, tool_calls=0, vendor_stop=vendor, detail=model, model=model, cost=cost,
                 **counts)


def _tool(
    name: Any, arguments: Any, failed: bool | None, mine: dict[str, Any], actions: ActionMap
) -> list[Event]:
    """A tool call (a step of its class) and its result (continuing the round)."""
    tool = name if isinstance(name, str) and name else None
    tool_input = _arguments(arguments)
    call = digest(tool, tool_input)
    step = tool_call(tool, tool_input, call, mine["failed"], actions)
    remember_outcome(mine["failed"], call, failed)
    result = tool_result(tool, call, "failed" if failed else "ok", failed,
                         "tool failed" if failed else None)
    result.tool_calls = 1
    return [step, result]


def _arguments(value: Any) -> Any:
    """A tool's input: arguments are JSON text in every exporter seen; Claude Code's
    ``tool_parameters`` name a shell command ``bash_command`` / ``full_command``."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        command = value.get("full_command") or value.get("bash_command")
        if isinstance(command, str) and "command" not in value:
            return {**value, "command": command}
    return value


def _span(
    attrs: dict[str, Any], span: dict[str, Any], mine: dict[str, Any], actions: ActionMap
) -> list[Event]:
    operation = attrs.get("gen_ai.operation.name")
    if operation in MODEL_CALLS:
        if _failed(span):
            return [Event("retry", tool="api", detail=f"{operation} failed")]
        reasons = attrs.get("gen_ai.response.finish_reasons")
        first = reasons[0] if isinstance(reasons, list) and reasons else reasons
        return [_round(attrs, first if isinstance(first, str) and first else None)]
    if operation == TOOL_CALL:
        name = attrs.get("gen_ai.tool.name") or span.get("name")
        return _tool(name, attrs.get("gen_ai.tool.call.arguments"), _failed(span), mine, actions)
    return []


# --- log records: Claude Code's and Codex's events -------------------------------------------


def _event_name(attrs: dict[str, Any], record: dict[str, Any]) -> str:
    """The event's name without its product prefix (``api_request``, ``tool_result``, ...)."""
    body = any_value(record.get("body"))
    for name in (record.get("eventName"), attrs.get("event.name"), body):
        if isinstance(name, str) and name:
            return name.removeprefix("claude_code.").removeprefix("codex.")
    return ""


def _log(
    attrs: dict[str, Any], name: str, mine: dict[str, Any], actions: ActionMap
) -> list[Event]:
    if name == "api_request":
        if any(whole(attrs.get(k)) is not None for _, keys in USAGE for k in keys):
            return [_round(attrs, None)]
        status = whole(attrs.get("http.response.status_code"))
        if attrs.get("error.message") or (status is not None and status >= 400):
            return [Event("retry", tool="api", detail=f"api_request {status or 'error'}")]
        return []
    if name == "sse_event":
        return [_round(attrs, None)] if attrs.get("event.kind") == "response.completed" else []
    if name == "api_error":
        status = attrs.get("status_code")
        return [Event("retry", tool="api", detail=f"api_error {status}" if status else
                      "api_error")]
    if name == "tool_result":
        success = attrs.get("success")
        failed = None if success is None else str(success).lower() not in ("true", "1")
        arguments = attrs.get("tool_parameters", attrs.get("arguments"))
        return _tool(attrs.get("tool_name"), arguments, failed, mine, actions)
    if name == "user_prompt":
        return [Event("start", detail="user prompt")]
    return []
