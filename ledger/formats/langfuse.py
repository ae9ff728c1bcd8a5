"""Langfuse trace exports: ``{"trace": {...}, "observations": [...]}`` (one JSON document).

This is how Langfuse exports a trace, whatever sent it: its SDKs, or any OpenTelemetry GenAI
instrumentation (the OTel attributes sit in ``metadata.attributes``). What becomes what (the
README's mapping table says the same for users):

* The trace is one session, its id the trace id; its name is the task class, its Langfuse
  ``sessionId`` (the conversation the trace belongs to) the parent session.
* Observations are read in start-time order. A ``GENERATION`` is a model round: its tool calls
  are ``toolCallNames`` (or ``toolCalls``), its output tokens ``usageDetails.output`` (or
  ``outputUsage``, or the OTel attribute ``gen_ai.usage.output_tokens``), its vendor stop the
  first of ``gen_ai.response.finish_reasons``; its input, cache-read, cache-write and
  reasoning tokens ``usageDetails`` (``input``, ``input_cache_read``, ...) or the OTel
  ``gen_ai.usage.*`` attributes, its model ``model``. A generation at level ``ERROR`` is a failed
  model call: a ``retry`` of the tool ``api``.
* A ``TOOL`` observation is a tool call: a step of its action class (from the action map, by
  its name and input; a call repeating one that failed is a ``retry``, a tool the map does not
  name a write, marked unclassified), then continues the round before it: an observation (a
  digest of its name, input and output) and a tool error when its level is ``ERROR``. Its name
  is the OTel ``gen_ai.tool.name`` (pydantic-ai names the span "running tool: ..."), or the
  Vercel AI SDK's ``ai.toolCall.name``, else the observation's. It counts as one tool call
  unless a generation before it already named it (``toolCallNames``) or counted it
  (``toolCalls``): most exporters (openai-agents, pydantic-ai, Vercel AI SDK, OTel GenAI) fill
  neither, so their calls are counted from the TOOL observations alone.
* Spans, events, agents, chains and the other grouping types add nothing; a type Langfuse
  may add later is counted as unknown.
* The trace's own verdict ends the session: ``is_error`` false (an attribute such as
  ``langsmith.metadata.is_error``) is ``task_complete``; true is its ``terminal_reason`` or
  ``subtype`` as a vendor stop (unmapped ones fail closed). A trace without it records no
  stop. Elapsed time comes from the observations' start and end times.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from msgspec import Struct, field

from ledger.core.actions import ActionMap
from ledger.core.events import ROUND, Event
from ledger.formats.agent_records import (
    as_object,
    digest,
    excerpt,
    keyed,
    moment,
    remember_outcome,
    tool_call,
    tool_result,
    whole,
)
from ledger.formats.seed_dialects import Record, RecordError

GROUPING = frozenset({
    "SPAN", "EVENT", "AGENT", "CHAIN", "RETRIEVER", "EVALUATOR", "EMBEDDING", "GUARDRAIL",
})
OUTPUT_KEYS = ("output", "output_tokens", "completion_tokens", "completion")
#: Event fields and the ``usageDetails`` keys that hold them (Langfuse's own names, then those
#: its SDKs and OTel mappings pass on), then the OTel ``gen_ai.usage`` attributes.
USAGE_KEYS = (
    ("input_tokens", ("input", "input_tokens", "prompt_tokens"),
     ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),
    ("cache_creation_tokens",
     ("input_cache_creation", "cache_creation_input_tokens", "input_cache_write"),
     ("gen_ai.usage.cache_creation_input_tokens",)),
    ("cache_read_tokens",
     ("input_cache_read", "cache_read_input_tokens", "prompt_details.cache_read",
      "input_cached_tokens"),
     ("gen_ai.usage.cache_read_input_tokens",)),
    ("reasoning_tokens",
     ("output_reasoning", "completion_details.reasoning", "reasoning_tokens"),
     ("gen_ai.usage.reasoning_tokens",)),
)


class Document(Struct):
    """A trace export, read: its session, and each observation as a record or an error."""

    session: str
    task_class: str | None
    parent: str | None
    items: list[Record | RecordError] = field(default_factory=list)
    unknown: Counter[str] = field(default_factory=Counter)


def looks_like(obj: dict[str, Any]) -> bool:
    trace = obj.get("trace")
    if isinstance(trace, dict):
        return isinstance(obj.get("observations", trace.get("observations")), list)
    return isinstance(obj.get("observations"), list) and isinstance(obj.get("id"), str)


def document(value: Any, actions: ActionMap) -> Document:
    obj = as_object(value, "document")
    trace = obj["trace"] if isinstance(obj.get("trace"), dict) else obj
    observations = obj.get("observations", trace.get("observations"))
    if not isinstance(observations, list):
        raise RecordError("a Langfuse export needs an 'observations' array")
    trace_id = trace.get("id")
    if not isinstance(trace_id, str) or not trace_id:
        raise RecordError("the trace needs an 'id' string")
    name, parent = trace.get("name"), trace.get("sessionId")
    doc = Document(
        trace_id,
        name if isinstance(name, str) and name else None,
        parent if isinstance(parent, str) and parent else None,
    )
    usable = []
    for index, item in enumerate(observations):
        if isinstance(item, dict) and isinstance(item.get("type"), str):
            usable.append(item)
        else:
            doc.items.append(RecordError(f"observations[{index}]: not an observation object"))
    usable.sort(key=lambda o: (moment(o, "startTime")[1] or 0.0, str(o.get("id"))))
    failures: dict[str, int] = {}
    declared: Counter[str] = Counter()
    for item in usable:
        events = _observation(item, doc.unknown, failures, declared, actions)
        keyed(events, item.get("id"))  # a TOOL observation is a step and its result
        when = moment(item, "startTime")
        for event in events:
            event.ts, event.at = when
            doc.items.append(_record(doc, event))
    end = _verdict(attributes(trace.get("metadata")))
    if end is not None:
        ends = [moment(o, "endTime") for o in usable]
        end.ts, end.at = max((m for m in ends if m[1] is not None), key=lambda m: m[1],
                             default=moment(trace))
        doc.items.append(_record(doc, end))
    return doc


def _record(doc: Document, event: Event) -> Record:
    return Record(event, session=doc.session, task_class=doc.task_class, parent=doc.parent)


def _observation(
    obs: dict[str, Any], unknown: Counter[str], failures: dict[str, int],
    declared: Counter[str], actions: ActionMap,
) -> list[Event]:
    """An observation's events. ``declared`` holds the tool calls generations counted that no
    TOOL observation has matched yet, by name ("" for a call counted without one)."""
    kind = obs["type"]
    failed = obs.get("level") == "ERROR"
    status = obs.get("statusMessage") if isinstance(obs.get("statusMessage"), str) else ""
    if kind == "GENERATION":
        if failed:
            return [Event("retry", tool="api", detail=excerpt(status) or "generation failed")]
        attrs = attributes(obs.get("metadata"))
        names = [n for n in obs.get("toolCallNames") or [] if isinstance(n, str)]
        calls = obs.get("toolCalls")
        count = len(names) or (len(calls) if isinstance(calls, list) else None)
        if count is None and isinstance(obs.get("toolCallNames"), list):
            count = 0
        declared.update(names or [""] * (count or 0))
        model = obs.get("model") if isinstance(obs.get("model"), str) else None
        return [Event(
            ROUND,
            tool_calls=count,
            output_tokens=_output_tokens(obs, attrs),
            vendor_stop=_finish_reason(attrs),
            tool=",".join(names) or None,
            detail=model,
            model=model,
            **_usage(obs, attrs),
        )]
    if kind == "TOOL":
        name = _tool_name(obs)
        detail = excerpt(status) or "tool failed"
        call = digest(name, obs.get("input"))
        step = tool_call(name, obs.get("input"), call, failures, actions)
        remember_outcome(failures, call, failed)
        result = tool_result(name, call, obs.get("output"), failed, detail)
        result.tool_calls = None if _matched(declared, name) else 1
        return [step, result]
    if kind not in GROUPING:
        unknown[f"observation/{kind}"] += 1
    return []


def _tool_name(obs: dict[str, Any]) -> str | None:
    attrs = attributes(obs.get("metadata"))
    for name in (attrs.get("gen_ai.tool.name"), attrs.get("ai.toolCall.name"), obs.get("name")):
        if isinstance(name, str) and name:
            return name
    return None


def _matched(declared: Counter[str], name: str | None) -> bool:
    """Whether a generation already counted this call (by its name, else one without a name)."""
    for key in (name or "", ""):
        if declared[key] > 0:
            declared[key] -= 1
            return True
    return False


def attributes(metadata: Any) -> dict[str, Any]:
    """Trace or observation metadata (a dict, or JSON text), with its OTel attributes merged in."""
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except ValueError:
            return {}
    if not isinstance(metadata, dict):
        return {}
    found = {k: v for k, v in metadata.items() if k != "attributes"}
    if isinstance(metadata.get("attributes"), dict):
        found.update(metadata["attributes"])
    return found


def _attribute(attrs: dict[str, Any], name: str) -> Any:
    """``name`` itself, or the first attribute whose dotted name ends with it."""
    if name in attrs:
        return attrs[name]
    suffix = "." + name
    return next((v for k, v in attrs.items() if k.endswith(suffix)), None)


def _output_tokens(obs: dict[str, Any], attrs: dict[str, Any]) -> int | None:
    """Langfuse's usage, else the OTel attribute; an empty usage with ``outputUsage`` 0 is none."""
    usage = obs.get("usageDetails")
    if isinstance(usage, dict) and usage:
        return next((whole(usage[k]) for k in OUTPUT_KEYS if whole(usage.get(k)) is not None), None)
    for key in ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"):
        if whole(attrs.get(key)) is not None:
            return whole(attrs[key])
    return whole(obs.get("outputUsage")) or None


def _usage(obs: dict[str, Any], attrs: dict[str, Any]) -> dict[str, int | None]:
    """The input, cache and reasoning counts of a generation: ``usageDetails`` when it has
    any, else the OTel attributes (a count neither gives is None)."""
    usage = obs.get("usageDetails") if isinstance(obs.get("usageDetails"), dict) else {}
    found: dict[str, int | None] = {}
    for name, keys, otel in USAGE_KEYS:
        source, names = (usage, keys) if usage else (attrs, otel)
        found[name] = next((whole(source[k]) for k in names if whole(source.get(k)) is not None),
                           None)
    return found


def _finish_reason(attrs: dict[str, Any]) -> str | None:
    reasons = attrs.get("gen_ai.response.finish_reasons")
    if isinstance(reasons, str):
        try:
            reasons = json.loads(reasons)
        except ValueError:
            reasons = [reasons]
    if isinstance(reasons, str):
        reasons = [reasons]
    if isinstance(reasons, list) and reasons and isinstance(reasons[0], str) and reasons[0]:
        return reasons[0]
    return None


def _verdict(attrs: dict[str, Any]) -> Event | None:
    """The trace's own terminal signal: its ``is_error`` flag, read fail-closed."""
    flag = _attribute(attrs, "is_error")
    if isinstance(flag, str):
        flag = {"true": True, "false": False}.get(flag.strip().lower())
    if not isinstance(flag, bool):
        return None
    if not flag:
        return Event("end", outcome="task_complete", detail="trace is_error=false")
    reason = _attribute(attrs, "terminal_reason") or _attribute(attrs, "subtype")
    reason = reason if isinstance(reason, str) and reason else "is_error"
    return Event("end", vendor_stop=reason, detail="trace is_error=true")
