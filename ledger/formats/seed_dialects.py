"""Ledger dialects: recognise a file's format and turn its records into :class:`Event` objects.

* ``trace``: seed 000's trace, one JSON document with ``task`` and ``rounds[]``.
* ``gate``: seed 002's ledger, JSONL ``{"step","action","detail","writes","elapsed_s"}``; a step
  counter that goes back (normally to 1) starts a new session.
* ``native``: agent-ledger's own JSONL events (see ``ledger/schema/native-event.schema.json``).

Everything here is pure: bytes and parsed objects in, events or a :class:`RecordError` out.
One module of about 500 lines: the three dialects share the JSON parser, the counter and
timestamp checks and :class:`Record`, and each is a few functions (split them when a fourth
seed format comes).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import msgspec

from ledger.core.events import ACTIONS, ROUND, Event
from ledger.core.reasons import StopReason

TRACE = "trace"
GATE = "gate"
NATIVE = "native"
DIALECTS = (NATIVE, GATE, TRACE)

NATIVE_TYPES = ("start", "round", "action", "end")
MAX_COUNTER = 2**53  # beyond this a counter is not a real measurement (and overflows SQLite)

_LONE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")
_DIGITS = re.compile(r"[+-]?[0-9]{1,30}")  # what int() takes, ASCII only, in counter range


class RecordError(ValueError):
    """A record that cannot be used; the message is the reason stored in ``ingest_errors``."""


class Record(msgspec.Struct, gc=False):
    """One parsed record: which session it belongs to, and the event it carries (a
    ``Struct``, like :class:`Event`, for its speed)."""

    event: Event
    session: str | None = None
    task_class: str | None = None
    step: int | None = None
    parent: str | None = None  # the parent session of a sub-agent's session
    #: The working folder the importer chose ``task_class`` from (matched against the budget
    #: file's ``[task_classes]`` globs; never stored).
    folder: str | None = None


def _reject_constant(name: str) -> Any:
    raise RecordError(f"{name} is not valid JSON")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_fast_decode = msgspec.json.Decoder().decode


def parse_json(raw: bytes) -> Any:
    """Strict JSON: UTF-8 only, no NaN/Infinity, no lone surrogates, bounded nesting.

    msgspec parses first (about 2.5 times faster than the standard library on ledger lines);
    it refuses everything the standard library path refuses (invalid UTF-8, NaN, lone
    surrogates, control characters, numbers out of a float's range), and then that path
    parses the line again, to accept what it accepts (``1e400``) or to give the precise reason.
    (That msgspec refuses every lone surrogate escape is held by a test over all of them: the
    standard library accepts them, so only its path looks for them.)
    """
    try:
        return _fast_decode(raw)
    except (msgspec.MsgspecError, RecursionError):
        return _parse_json_stdlib(raw)


def _parse_json_stdlib(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        value = _decoder.decode(text)
        if _LONE_SURROGATE.search(raw):
            _check_surrogates(value)
    except RecordError:
        raise
    except json.JSONDecodeError as exc:
        where = f"column {exc.colno}"
        if exc.lineno > 1:
            where = f"line {exc.lineno} {where}"
        message = exc.msg.removesuffix(" at").split(" (decode using")[0]
        raise RecordError(f"invalid JSON: {message} ({where})") from None
    except RecursionError:
        raise RecordError("JSON nested too deeply") from None
    except ValueError:
        # Python refuses integers of more than 4300 digits (int_max_str_digits).
        raise RecordError("invalid JSON: a number has too many digits") from None
    return value


def _check_surrogates(value: Any) -> None:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RecordError("lone surrogate in a string (not valid Unicode)") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_surrogates(key)
            _check_surrogates(item)
    elif isinstance(value, list):
        for item in value:
            _check_surrogates(item)


_Line = TypeVar("_Line")


def _typed_line(
    raw: bytes,
    decode: Callable[[bytes], _Line],
    typed: Callable[[_Line], Record | None],
    general: Callable[[Any], Record],
) -> Record:
    """``general(parse_json(raw))``, faster where the line decodes as a ``_Line``.

    msgspec decodes the line straight into a struct, checking the JSON and every field's type
    and range in C (that struct is stricter than ``general``: it refuses unknown fields, for
    one); ``typed`` checks the rest, or returns None. Whatever this path does not take (a
    refusal, such as a lone surrogate, or an unknown field) goes the general way, so the
    outcome, and the reason for a refusal, is always the general one.
    """
    try:
        line = decode(raw)
    except (msgspec.MsgspecError, RecursionError):
        return general(parse_json(raw))
    return typed(line) or general(parse_json(raw))


_Count = Annotated[int, msgspec.Meta(ge=0, lt=MAX_COUNTER)]
_Seconds = Annotated[float, msgspec.Meta(ge=0, le=sys.float_info.max)]


def detect(first: Any) -> str | None:
    """The dialect of a file whose first record parsed as ``first`` (``None`` if unknown)."""
    if not isinstance(first, dict):
        return None
    if isinstance(first.get("rounds"), list):
        return TRACE
    if "session" in first and first.get("type") in NATIVE_TYPES:
        return NATIVE
    if "step" in first and "action" in first:
        return GATE
    return None


# --- field readers -------------------------------------------------------------------------


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(f"expected a JSON object, got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _count(obj: dict[str, Any], key: str, default: int = 0) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"field {key!r} must be a whole number, got {_json_type(value)}")
    if value < 0:
        raise RecordError(f"field {key!r} must not be negative, got {value}")
    if value >= MAX_COUNTER:
        raise RecordError(f"field {key!r} is too large ({value})")
    return value


def _seconds(obj: dict[str, Any], key: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(f"field {key!r} must be a number of seconds, got {_json_type(value)}")
    try:
        seconds = float(value)  # an int beyond the float range overflows
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise RecordError(f"field {key!r} is out of range (not a finite number)")
    if seconds < 0:
        raise RecordError(f"field {key!r} must not be negative, got {value}")
    return seconds


def _text(obj: dict[str, Any], key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError(f"field {key!r} must be a string, got {_json_type(value)}")
    return value


def parse_ts(text: str) -> float:
    """An ISO-8601 timestamp as POSIX seconds; a naive time is taken as UTC.

    Python 3.11 reads a ``Z`` suffix itself, except after some basic-format dates
    (``20240530Z``), which are read as ``+00:00`` as before.
    """
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            if text[-1:] != "Z":
                raise
            moment = datetime.fromisoformat(text[:-1] + "+00:00")
        except ValueError:
            raise RecordError(f"field 'ts' is not an ISO-8601 timestamp: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _flag(obj: dict[str, Any], key: str) -> bool | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise RecordError(f"field {key!r} must be true or false, got {_json_type(value)}")
    return value


def _action(obj: dict[str, Any]) -> str:
    action = obj.get("action")
    if action is None:
        raise RecordError("missing field 'action'")
    if action not in ACTIONS:
        raise RecordError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
    return action


#: A round's money fields (see ledger.core.pricing): the model and the tokens that price it.
MONEY_COUNTS = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "reasoning_tokens")


def _money(obj: dict[str, Any]) -> dict[str, Any]:
    """The model, token counts and cost of a native or trace round (absent: None)."""
    cost = obj.get("cost")
    if cost is not None:
        if isinstance(cost, bool) or not isinstance(cost, (int, float)):
            kind = _json_type(cost)
            raise RecordError(f"field 'cost' must be a number of US dollars, got {kind}")
        if not -1 < cost < MAX_COUNTER or not math.isfinite(cost) or cost < 0:
            raise RecordError(f"field 'cost' must be 0 or more US dollars, in range ({cost})")
        cost = float(cost)
    found: dict[str, Any] = {"model": _text(obj, "model") or None, "cost": cost}
    for key in MONEY_COUNTS:
        found[key] = _count(obj, key) if obj.get(key) is not None else None
    return found


def _tool_calls(value: Any) -> int | None:
    """A list of tool calls (counted) or a count; None when the log does not say."""
    if isinstance(value, list):
        return len(value)
    if value is None:
        return None
    return _count({"tool_calls": value}, "tool_calls")


# --- gate (seed 002) -----------------------------------------------------------------------


def gate_record(value: Any) -> Record:
    obj = _object(value)
    if "step" not in obj:
        raise RecordError("missing field 'step'")
    step = _count(obj, "step")
    if step < 1:
        raise RecordError("field 'step' must be 1 or more")
    action = _action(obj)
    _count(obj, "writes")  # validated; the machine counts writes itself
    return Record(
        Event(
            action=action,
            detail=_text(obj, "detail"),
            elapsed_s=_seconds(obj, "elapsed_s"),
        ),
        step=step,
    )


def gate_line(raw: bytes) -> Record:
    """``gate_record(parse_json(raw))``, in about 60% of its time."""
    return _typed_line(raw, _gate_decode, _gate_typed, gate_record)


class _GateLine(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The gate fields as msgspec checks them (see :func:`_typed_line`)."""

    step: Annotated[int, msgspec.Meta(ge=1, lt=MAX_COUNTER)]
    action: str
    detail: str | None = None
    writes: _Count | None = None
    elapsed_s: _Seconds | None = None


_gate_decode = msgspec.json.Decoder(_GateLine).decode


def _gate_typed(line: _GateLine) -> Record | None:
    if line.action not in ACTIONS:
        return None
    return Record(Event(line.action, detail=line.detail, elapsed_s=line.elapsed_s), step=line.step)


# --- native ---------------------------------------------------------------------------------


def native_record(value: Any) -> Record:
    obj = _object(value)
    session = obj.get("session")
    if not isinstance(session, str) or not session.strip():
        raise RecordError("field 'session' must be a non-empty string")
    kind = obj.get("type")
    if kind not in NATIVE_TYPES:
        raise RecordError(f"unknown type {kind!r} (expected one of {', '.join(NATIVE_TYPES)})")
    ts = _text(obj, "ts")
    common = {
        "detail": _text(obj, "detail"),
        "tool": _text(obj, "tool"),
        "ts": ts,
        "at": parse_ts(ts) if ts is not None else None,
        "elapsed_s": _seconds(obj, "elapsed_s"),
        "observation": _text(obj, "observation"),
        "tool_error": _flag(obj, "tool_error"),
        "vendor_stop": _text(obj, "vendor_stop") or None,
    }
    if kind == "round":
        event = Event(
            ROUND,
            tool_calls=_tool_calls(obj.get("tool_calls")),
            output_tokens=_count(obj, "output_tokens") if "output_tokens" in obj else None,
            **common,
            **_money(obj),
        )
    elif kind == "action":
        event = Event(_action(obj), **common)
    else:
        outcome = _text(obj, "outcome") if kind == "end" else None
        if outcome is not None and outcome not in StopReason._value2member_map_:
            raise RecordError(f"unknown outcome {outcome!r} (expected a stop reason)")
        event = Event(kind, outcome=outcome, **common)
    return Record(event, session=session, task_class=_text(obj, "task_class"))


def native_line(raw: bytes) -> Record:
    """``native_record(parse_json(raw))``, in about 60% of its time."""
    return _typed_line(raw, _native_decode, _native_typed, native_record)


class _NativeLine(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The native fields as msgspec checks them (see :func:`_typed_line`)."""

    session: str
    type: str
    v: Any = None
    ts: str | None = None
    elapsed_s: _Seconds | None = None
    task_class: str | None = None
    detail: str | None = None
    tool: str | None = None
    observation: str | None = None
    tool_error: bool | None = None
    vendor_stop: str | None = None
    tool_calls: list[Any] | _Count | None = None
    output_tokens: _Count | msgspec.UnsetType = msgspec.UNSET
    model: str | None = None
    input_tokens: _Count | None = None
    cache_creation_tokens: _Count | None = None
    cache_read_tokens: _Count | None = None
    reasoning_tokens: _Count | None = None
    cost: Annotated[float, msgspec.Meta(ge=0, lt=MAX_COUNTER)] | None = None
    action: str | None = None
    outcome: str | None = None


_native_decode = msgspec.json.Decoder(_NativeLine).decode
_OUTCOMES = frozenset((None, *StopReason._value2member_map_))


def _native_typed(line: _NativeLine) -> Record | None:
    """The record of a typed line, or None where :func:`native_record` must decide."""
    kind = line.type
    if kind == ROUND:
        action = kind
    elif kind == "action":
        action = line.action
        if action not in ACTIONS:
            return None
    elif kind == "start" or (kind == "end" and line.outcome in _OUTCOMES):
        action = kind
    else:
        return None
    if not line.session.strip():
        return None
    ts = line.ts
    try:
        at = parse_ts(ts) if ts is not None else None
    except RecordError:
        return None
    calls, tokens = (line.tool_calls, line.output_tokens) if kind == ROUND else (None, None)
    event = Event(  # positional: a third of the cost of keywords, on the hottest path
        action,
        len(calls) if isinstance(calls, list) else calls,  # tool_calls
        None if tokens is msgspec.UNSET else tokens,  # output_tokens
        line.observation,
        line.tool_error,
        line.vendor_stop or None,
        line.outcome if kind == "end" else None,
        line.tool,
        line.detail,
        line.elapsed_s,
        ts,
        at,
    )
    if kind == ROUND:
        event.model = line.model or None
        event.input_tokens = line.input_tokens
        event.cache_creation_tokens = line.cache_creation_tokens
        event.cache_read_tokens = line.cache_read_tokens
        event.reasoning_tokens = line.reasoning_tokens
        event.cost = None if line.cost is None else float(line.cost)
    return Record(event, line.session, line.task_class)


# --- trace (seed 000) ------------------------------------------------------------------------


def trace_rounds(doc: Any) -> tuple[dict[str, Any], Iterator[tuple[int, Record | RecordError]]]:
    """Seed 000's trace document: its header, and each round as a record or an error.

    Field handling mirrors seed 000's ``replay_trace`` wherever that code accepts the value
    (``int(output_tokens or 0)``, ``bool(tool_error)``, ``observation or ""``); values it would
    crash on, and negative counters, become errors for that round.
    """
    obj = _object(doc)
    rounds = obj.get("rounds")
    if not isinstance(rounds, list):
        raise RecordError("a trace needs a 'rounds' array")
    header = {k: v for k, v in obj.items() if k != "rounds"}
    return header, ((i, _trace_round(r)) for i, r in enumerate(rounds, 1))


def _trace_round(value: Any) -> Record | RecordError:
    try:
        obj = _object(value)
        calls = obj.get("tool_calls", [])
        if not isinstance(calls, list):
            raise RecordError(f"field 'tool_calls' must be an array, got {_json_type(calls)}")
        measured = obj.get("output_tokens") is not None
        tokens = obj.get("output_tokens") or 0
        if isinstance(tokens, (int, float)) and not isinstance(tokens, bool):
            if isinstance(tokens, float) and not math.isfinite(tokens):
                raise RecordError("field 'output_tokens' must be finite")
            tokens = int(tokens)
        elif isinstance(tokens, str) and _DIGITS.fullmatch(tokens.strip()):
            tokens = int(tokens)
        else:
            raise RecordError(f"field 'output_tokens' must be a number, got {_json_type(tokens)}")
        if tokens < 0 or tokens >= MAX_COUNTER:
            raise RecordError(f"field 'output_tokens' out of range ({tokens})")
        observation = obj.get("observation") or ""
        if not isinstance(observation, str):
            kind = _json_type(observation)
            raise RecordError(f"field 'observation' must be a string, got {kind}")
        vendor = obj.get("vendor_stop")
        if vendor and not isinstance(vendor, str):
            vendor = json.dumps(vendor)
        return Record(
            Event(
                ROUND,
                tool_calls=len(calls) if "tool_calls" in obj else None,
                output_tokens=tokens if measured else None,
                observation=observation,
                tool_error=bool(obj.get("tool_error")),
                vendor_stop=vendor or None,
                tool=_first_tool_name(calls),
                **_money(obj),
                unmetered=_TRACE_DEFAULTED.difference(
                    meter for key, meter in _TRACE_METER_KEYS if obj.get(key) is not None
                ),
            )
        )
    except RecordError as exc:
        return exc


_TRACE_METER_KEYS = (("observation", "observations"), ("tool_error", "tool_errors"))
_TRACE_DEFAULTED = frozenset(meter for _, meter in _TRACE_METER_KEYS)


def _first_tool_name(calls: list[Any]) -> str | None:
    names = [c.get("name") for c in calls if isinstance(c, dict) and isinstance(c.get("name"), str)]
    return ",".join(names) or None
