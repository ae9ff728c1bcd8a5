"""Dialects: what each input format is read as, and what is refused, with which reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.formats.seed_dialects import (
    GATE,
    NATIVE,
    TRACE,
    RecordError,
    _gate_decode,
    _gate_typed,
    _native_decode,
    _native_typed,
    _parse_json_stdlib,
    detect,
    gate_line,
    gate_record,
    native_line,
    native_record,
    parse_json,
    parse_ts,
    trace_rounds,
)
from tests.helpers import FIXTURES


@pytest.mark.parametrize(
    ("first", "dialect"),
    [
        ({"task": "x", "rounds": []}, TRACE),
        ({"rounds": [{"tool_calls": []}]}, TRACE),
        ({"step": 1, "action": "think", "detail": "", "writes": 0, "elapsed_s": 0.0}, GATE),
        ({"session": "s1", "type": "round"}, NATIVE),
        ({"session": "s1", "type": "action", "action": "read"}, NATIVE),
        ({"session": "s1", "type": "bogus"}, None),
        ({"hello": "world"}, None),
        ([1, 2], None),
        ("text", None),
    ],
)
def test_detect(first, dialect) -> None:
    assert detect(first) == dialect


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\xff\xfe{}", "invalid UTF-8 at byte 0"),
        (b'{"a": NaN}', "NaN is not valid JSON"),
        (b'{"a": Infinity}', "Infinity is not valid JSON"),
        (b'{"a": -Infinity}', "-Infinity is not valid JSON"),
        (b'{"a": "\\ud800"}', "lone surrogate"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"a": 1', "invalid JSON: Expecting ',' delimiter (column 8)"),
        (b"{\n\n 1}", "invalid JSON: Expecting property name enclosed in double quotes (line 3"),
        (b'{"a":"x\x00"}', "invalid JSON: Invalid control character"),
    ],
)
def test_parse_json_refuses_with_a_reason(raw, reason) -> None:
    with pytest.raises(RecordError) as caught:
        parse_json(raw)
    assert reason in str(caught.value)


def _lone_surrogate_strings() -> list[str]:
    """Every surrogate escape, in both cases, where it cannot be half of a pair: alone, before
    or after a character, before another escape that does not complete it, doubled."""
    strings = []
    for point in range(0xD800, 0xE000):
        for escape in (f"\\u{point:04x}", f"\\u{point:04X}"):
            strings += [escape, f"{escape}a", f"a{escape}", f"{escape}\\u0041", escape * 2]
            if point >= 0xDC00:  # a low surrogate before a high one is not a pair either
                strings.append(f"{escape}\\ud800")
    return strings


@pytest.mark.parametrize(
    ("decode", "template"),
    [
        (msgspec.json.decode, '{{"a": "{0}"}}'),
        (msgspec.json.decode, '{{"{0}": 1}}'),
        (_native_decode, '{{"session": "{0}", "type": "round"}}'),
        (_native_decode, '{{"session": "s", "type": "round", "observation": "{0}"}}'),
        (_gate_decode, '{{"step": 1, "action": "read", "detail": "{0}"}}'),
    ],
)
def test_msgspec_refuses_every_lone_surrogate_escape(decode, template) -> None:
    """parse_json and the typed decoding rely on this: they take what msgspec accepts without
    looking for lone surrogates, which the standard library's path must look for."""
    accepted = []
    for text in _lone_surrogate_strings():
        try:
            decode(template.format(text).encode())
        except msgspec.DecodeError:
            continue
        accepted.append(text)
    assert accepted == []


def test_msgspec_accepts_the_surrogate_pairs_it_must() -> None:
    assert _native_decode(b'{"session": "\\ud83d\\ude00", "type": "round"}').session == "\U0001f600"
    assert msgspec.json.decode(b'"\\udbff\\udfff"') == "\U0010ffff"


def test_parse_json_accepts_surrogate_pairs_and_duplicate_keys_last_wins() -> None:
    assert parse_json(b'{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    assert parse_json(b'{"a": 1, "a": 2}') == {"a": 2}


# parse_json takes msgspec's fast path and falls back to the standard library's; the two must
# agree on every input: the same value, or the same reason.

JSON_SUITE = FIXTURES / "jsontestsuite"


def _outcome(parse: Callable[[bytes], Any], raw: bytes) -> tuple[str, str]:
    try:
        return "value", repr(parse(raw))
    except RecordError as exc:
        return "refused", str(exc)


def _suite_files() -> list[Path]:
    return sorted(p for p in JSON_SUITE.rglob("*.json"))


def test_parse_json_agrees_with_the_standard_library_on_json_test_suite() -> None:
    files = _suite_files()
    assert len(files) > 300
    for path in files:
        raw = path.read_bytes()
        assert _outcome(parse_json, raw) == _outcome(_parse_json_stdlib, raw), path.name


@pytest.mark.parametrize(
    "raw",
    [b"1e400", b"-1e400", b"[1e999]", b"1.5e-400", b"-0", b"-0.0",
     b"123456789012345678901234567890", b"18446744073709551616",
     b'"\\udc00"', b'{"\\ud800": 1}', b'"\\ud800\\u0041"',
     b"\xef\xbb\xbf{}", b" \x0c{}", b'"\x7f"', b'"\\u0000"', b"", b"{}x", b"[1,]",
     b'"\xed\xa0\x80"', b'"\xc0\x80"', b'{"a": 1, "b": 2, "a": 3}'],
)
def test_parse_json_fast_path_edge_cases(raw: bytes) -> None:
    assert _outcome(parse_json, raw) == _outcome(_parse_json_stdlib, raw)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    value=_json_values,
    ascii_only=st.booleans(),
    cuts=st.lists(st.tuples(st.integers(0, 10_000), st.binary(max_size=3)), max_size=3),
)
def test_parse_json_fast_path_agrees_on_mangled_json(value, ascii_only, cuts) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=False)
    raw = text.encode("utf-8", "surrogatepass")
    for at, junk in cuts:  # splice random bytes in: broken UTF-8, broken escapes, stray tokens
        at %= len(raw) + 1
        raw = raw[:at] + junk + raw[at + len(junk) // 2:]
    assert _outcome(parse_json, raw) == _outcome(_parse_json_stdlib, raw)


# --- gate (seed 002) ------------------------------------------------------------------------


def test_gate_record_reads_the_seed_line() -> None:
    record = gate_record(
        {"step": 3, "action": "retry", "detail": "tool:read", "writes": 0, "elapsed_s": 4.812}
    )
    assert record.step == 3
    assert (record.event.action, record.event.detail, record.event.elapsed_s) == (
        "retry", "tool:read", 4.812)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({"step": "three", "action": "read"}, "field 'step' must be a whole number, got string"),
        ({"step": 0, "action": "read"}, "field 'step' must be 1 or more"),
        ({"step": -2, "action": "read"}, "field 'step' must not be negative"),
        ({"action": "read"}, "missing field 'step'"),
        ({"step": 1}, "missing field 'action'"),
        ({"step": 1, "action": "deploy"}, "unknown action 'deploy'"),
        ({"step": 1, "action": "read", "elapsed_s": "soon"}, "field 'elapsed_s' must be a number"),
        ({"step": 1, "action": "read", "elapsed_s": -1}, "field 'elapsed_s' must not be negative"),
        ({"step": 1, "action": "read", "writes": 2**63}, "field 'writes' is too large"),
        ({"step": 1, "action": "read", "detail": 5}, "field 'detail' must be a string"),
        ([1], "expected a JSON object, got array"),
        ("x", "expected a JSON object, got string"),
    ],
)
def test_gate_record_refuses(line, reason) -> None:
    with pytest.raises(RecordError, match=reason):
        gate_record(line)


# --- native -----------------------------------------------------------------------------------


def test_native_round() -> None:
    record = native_record(
        {"session": "s1", "type": "round", "ts": "2026-11-29T22:00:00Z", "task_class": "bugfix",
         "tool_calls": [{"name": "a"}, {"name": "b"}], "output_tokens": 12,
         "observation": "ok", "tool_error": False, "vendor_stop": "end_turn"}
    )
    event = record.event
    assert (record.session, record.task_class) == ("s1", "bugfix")
    assert (event.action, event.tool_calls, event.output_tokens) == ("round", 2, 12)
    assert (event.observation, event.tool_error, event.vendor_stop) == ("ok", False, "end_turn")
    assert event.at == parse_ts("2026-11-29T22:00:00+00:00")


def test_native_and_trace_rounds_carry_money() -> None:
    money = {"model": "gpt-5", "input_tokens": 10, "cache_creation_tokens": 0,
             "cache_read_tokens": 90, "reasoning_tokens": 4, "output_tokens": 8, "cost": 0.5}
    native = native_record({"session": "s", "type": "round", **money}).event
    (_, trace), = trace_rounds({"rounds": [money]})[1]
    for event in (native, trace.event):
        assert (event.model, event.input_tokens, event.cache_creation_tokens,
                event.cache_read_tokens, event.reasoning_tokens, event.cost) == (
            "gpt-5", 10, 0, 90, 4, 0.5)
    action = native_record({"session": "s", "type": "action", "action": "read", **money})
    assert (action.event.model, action.event.cost) == (None, None)  # rounds only


def test_native_tool_calls_may_be_a_count() -> None:
    assert native_record({"session": "s", "type": "round", "tool_calls": 4}).event.tool_calls == 4


def test_native_end_outcome_must_be_a_stop_reason() -> None:
    record = native_record({"session": "s", "type": "end", "outcome": "user_cancel"})
    assert (record.event.action, record.event.outcome) == ("end", "user_cancel")
    with pytest.raises(RecordError, match="unknown outcome 'done'"):
        native_record({"session": "s", "type": "end", "outcome": "done"})


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ({"type": "round"}, "field 'session' must be a non-empty string"),
        ({"session": "  ", "type": "round"}, "field 'session' must be a non-empty string"),
        ({"session": 7, "type": "round"}, "field 'session' must be a non-empty string"),
        ({"session": "s", "type": "turn"}, "unknown type 'turn'"),
        ({"session": "s", "type": "action"}, "missing field 'action'"),
        ({"session": "s", "type": "action", "action": "delete"}, "unknown action 'delete'"),
        ({"session": "s", "type": "round", "output_tokens": -5}, "must not be negative"),
        ({"session": "s", "type": "round", "output_tokens": 1.5}, "must be a whole number"),
        ({"session": "s", "type": "round", "output_tokens": True}, "must be a whole number"),
        ({"session": "s", "type": "round", "tool_error": "yes"}, "must be true or false"),
        ({"session": "s", "type": "round", "ts": "yesterday"}, "not an ISO-8601 timestamp"),
        ({"session": "s", "type": "round", "observation": ["x"]}, "must be a string"),
        ({"session": "s", "type": "round", "cost": "0.5"}, "'cost' must be a number of US"),
        ({"session": "s", "type": "round", "cost": -0.5}, "'cost' must be 0 or more"),
        ({"session": "s", "type": "round", "model": 5}, "'model' must be a string"),
        ({"session": "s", "type": "round", "cache_read_tokens": -1}, "must not be negative"),
    ],
)
def test_native_record_refuses(line, reason) -> None:
    with pytest.raises(RecordError, match=reason):
        native_record(line)


def test_native_ignores_unknown_fields() -> None:
    record = native_record({"session": "s", "type": "round", "future_field": {"x": 1}})
    assert record.event.action == "round"


BASE = datetime(2026, 11, 29, 22, 0, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-11-29T22:00:00Z", BASE),
        ("2026-11-29T22:00:00+00:00", BASE),
        ("2026-11-29T23:00:00+01:00", BASE),
        ("2026-11-29T22:00:00", BASE),  # naive is UTC
        ("2026-11-29T22:00:00.250Z", BASE + 0.25),
    ],
)
def test_parse_ts(text, seconds) -> None:
    assert parse_ts(text) == seconds


def _parse_ts_before(text: str) -> float | str:
    """parse_ts as it was before it let Python 3.11 read the Z itself: the reference."""
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return "refused"
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _parse_ts_now(text: str) -> float | str:
    try:
        return parse_ts(text)
    except RecordError as exc:
        assert str(exc) == f"field 'ts' is not an ISO-8601 timestamp: {text!r}"
        return "refused"


_TS_PARTS = st.sampled_from([
    "2026", "-", "11", "29", "W48", "1", "T", " ", ":", "22", "00", "30", ".", "250", "123456",
    "Z", "z", "+", "01:00", "0100", "+00:00", "-00:00", "24", "60", "20260530", "T2200", ",",
    "UTC", "\u0660",
])


@pytest.mark.parametrize("text", [
    "20240530Z", "2026-11-29Z", "2026-11-29T22Z", "2026-11-29T22:00Z", "Z", "", "ZZ",
    "2026-11-29T22:00:00zZ", "2026-11-29T22:00:00+01:00Z", "2026-W48-1T22Z", "20261129T220000Z",
])
def test_parse_ts_reads_a_z_as_it_always_did(text) -> None:
    assert _parse_ts_now(text) == _parse_ts_before(text)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_TS_PARTS, max_size=10).map("".join))
def test_parse_ts_agrees_with_its_reference_on_any_timestamp_like_text(text) -> None:
    assert _parse_ts_now(text) == _parse_ts_before(text)


# --- trace (seed 000) -------------------------------------------------------------------------


def test_trace_rounds_mirror_seed_000_field_handling() -> None:
    header, rounds = trace_rounds(
        {"task": "t", "rounds": [
            {"tool_calls": [{"name": "read_file"}], "output_tokens": 400, "observation": "x"},
            {"output_tokens": None, "tool_error": 1, "vendor_stop": ""},
            {"output_tokens": "12", "observation": None},
            {"output_tokens": 7.9},
        ]}
    )
    events = [record.event for _, record in rounds]
    assert header == {"task": "t"}
    # Absent fields are "not measured" (None), which the machine counts as the seed does: 0.
    assert [e.tool_calls for e in events] == [1, None, None, None]
    assert [e.output_tokens for e in events] == [400, None, 12, 7]
    assert [e.observation for e in events] == ["x", "", "", ""]
    assert [e.tool_error for e in events] == [False, True, False, False]
    assert [e.vendor_stop for e in events] == [None, None, None, None]
    assert events[0].tool == "read_file"


@pytest.mark.parametrize(
    ("round_", "reason"),
    [
        ({"tool_calls": 3}, "field 'tool_calls' must be an array"),
        ({"output_tokens": "many"}, "field 'output_tokens' must be a number"),
        ({"output_tokens": -1}, "out of range"),
        ({"observation": {"a": 1}}, "field 'observation' must be a string"),
        ([], "expected a JSON object"),
    ],
)
def test_a_bad_trace_round_is_an_error_for_that_round_only(round_, reason) -> None:
    _, rounds = trace_rounds({"rounds": [{"observation": "ok"}, round_, {"observation": "ok"}]})
    results = [item for _, item in rounds]
    assert isinstance(results[1], RecordError)
    assert reason in str(results[1])
    assert not isinstance(results[0], RecordError) and not isinstance(results[2], RecordError)


def test_non_string_vendor_stop_fails_closed_like_the_seed() -> None:
    _, rounds = trace_rounds({"rounds": [{"vendor_stop": {"code": 7}}, {"vendor_stop": False}]})
    first, second = (record.event.vendor_stop for _, record in rounds)
    assert first == json.dumps({"code": 7})
    assert second is None


def test_a_trace_needs_rounds() -> None:
    with pytest.raises(RecordError, match="a trace needs a 'rounds' array"):
        trace_rounds({"task": "t", "rounds": {}})


def test_trace_fields_read_with_seed_defaults_are_not_counted_as_meters() -> None:
    from ledger.core.events import meters_of

    _, rounds = trace_rounds({"rounds": [
        {"tool_calls": [], "output_tokens": 5, "observation": "x", "tool_error": False},
        {"output_tokens": 5},
    ]})
    full, bare = (meters_of(record.event) for _, record in rounds)
    assert full == {"round_counter", "tool_calls", "output_tokens", "observations", "tool_errors"}
    assert bare == {"round_counter", "output_tokens"}


# --- typed fast paths: native_line and gate_line ----------------------------------------------
# Each must give exactly what the general path gives (parse_json, then native_record or
# gate_record): the same record, or the same reason. Lines are written as JSON text, so number
# spellings (1.0, 1E+2, -0, 1e400, 2**64), duplicate keys, escapes and broken bytes are covered.


def _line_outcome(read: Callable[[bytes], Any], raw: bytes) -> tuple[str, str]:
    try:
        return "record", repr(read(raw))  # repr tells 5 from 5.0 and 0.0 from -0.0
    except RecordError as exc:
        return "refused", str(exc)


def _general(record: Callable[[Any], Any]) -> Callable[[bytes], Any]:
    return lambda raw: record(parse_json(raw))


_ANY_TEXT = [
    "null", "true", "false", "0", "-0", "1", "-1", "7", "1.0", "0.0", "-0.0", "2.5", "1E+2",
    "1e400", "-1e400", "1e-400", "NaN", "Infinity", str(2**53 - 1), str(2**53), str(2**63),
    str(2**64), "1" + "0" * 40, "9" * 400, '""', '"  "', '"x"', '"\\ud83d\\ude00"', '"\\ud800"',
    '"\\udc00\\ud800"', '"a\\u0000b"', '"\x7f"', '"\u20ac"', '"\udc80"', "[]", "[1, 2]",
    '[{"name": "a"}]', "{}", '{"a": [1, {"b": null}]}', "[" * 40 + "]" * 40,
]


def _texts(valid: list[Any], wrong: list[Any] = ()) -> tuple[list[str], list[str]]:
    """A field's values as JSON text: valid ones, and wrong ones (the field's own, then any)."""
    texts = [json.dumps(v, ensure_ascii=False) for v in valid]
    return texts, [json.dumps(v) for v in wrong] + _ANY_TEXT


_COUNT = _texts([0, 1, 3, 2**53 - 1, 177], [-1, 2**53])
_SECONDS = _texts([0, 0.0, 0.43, 12, 1e300, 123456789012345678901234567], [-0.5])
_NATIVE_FIELDS = {
    "session": _texts(["s1", "h39-00006-a076ded3", " s "], ["", " "]),
    "type": _texts(["start", "round", "action", "end"], ["turn", "Round"]),
    "ts": _texts(["2026-12-02T22:00:04.389Z", "2026-11-29T23:00:00+01:00", "2026-11-29T22:00:00",
                  "2026-11-29"], ["yesterday", "2971W09Z", "2026-11-29T22:00:00ZZ"]),
    "elapsed_s": _SECONDS,
    "task_class": _texts(["bugfix", ""]),
    "detail": _texts(["plan: x", ""]),
    "tool": _texts(["read_file", ""]),
    "observation": _texts(["ok", "", "a\nb", "\U0001f600", "\u00e9t\u00e9"]),
    "tool_error": _texts([True, False]),
    "vendor_stop": _texts(["end_turn", "", None]),
    "tool_calls": _texts([[{"name": "a"}], [], 2, None], [[1] * 3]),
    "output_tokens": _COUNT,
    "action": _texts(["think", "read", "write", "retry"], ["delete"]),
    "outcome": _texts(["task_complete", "user_cancel", None], ["done"]),
    "v": _texts([1, 2]),
    # Money (issue 19): the model and tokens that price a round, or its cost.
    "model": _texts(["claude-opus-4-6", "gpt-5", ""]),
    "input_tokens": _COUNT,
    "cache_creation_tokens": _COUNT,
    "cache_read_tokens": _COUNT,
    "reasoning_tokens": _COUNT,
    "cost": _texts([0, 0.0, 0.25, 3, 1e15], [-0.01, 2**53, 1e300]),
}
_GATE_FIELDS = {
    "step": _texts([1, 2, 17], [0, -2]),
    "action": _NATIVE_FIELDS["action"],
    "detail": _NATIVE_FIELDS["detail"],
    "writes": _COUNT,
    "elapsed_s": _SECONDS,
}
_REQUIRED = ("session", "type", "step", "action")
_EXTRA_KEYS = ["x", "Session", "\\u0073ession", "\\ud800"]


@st.composite
def _jsonl_line(draw: st.DrawFn, fields: dict[str, tuple[list[str], list[str]]]) -> bytes:
    """A valid object of the given fields (each optional one missing one time in three), then
    up to three changes: a field dropped, or given a wrong value (of its own or any type, or
    any number or string), or an unknown or repeated key added; in any order. Sometimes the
    bytes are mangled, or the line is any JSON value at all."""
    pairs = [(key, draw(st.sampled_from(valid))) for key, (valid, _) in fields.items()
             if key in _REQUIRED or draw(st.integers(0, 2))]
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2, 3]))):
        at = draw(st.integers(0, len(pairs)))
        key = pairs[at][0] if at < len(pairs) else draw(st.sampled_from([*fields, *_EXTRA_KEYS]))
        wrong = fields.get(key, ([], _ANY_TEXT))[1]
        change = draw(st.integers(0, 4))
        if change == 0:
            pairs[at:at + 1] = []
        elif change < 4:
            pairs[at:at + 1] = [(key, draw(st.sampled_from(wrong)))]
        else:
            any_value = st.floats(allow_nan=False) | st.integers() | st.text()
            text = json.dumps(draw(any_value), ensure_ascii=draw(st.booleans()))
            pairs[at:at + 1] = [(key, text)]
    pairs = draw(st.permutations(pairs))
    text = "{" + ", ".join(f'"{key}": {value}' for key, value in pairs) + "}"
    if draw(st.integers(0, 19)) == 0:
        text = json.dumps(draw(_json_values))
    raw = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 4)) == 0:
        for at, junk in draw(st.lists(st.tuples(st.integers(0, 10_000), st.binary(max_size=3)),
                                      min_size=1, max_size=2)):
            at %= len(raw) + 1
            raw = raw[:at] + junk + raw[at + len(junk) // 2:]
    return raw


@settings(max_examples=1000, deadline=None)
@given(raw=_jsonl_line(_NATIVE_FIELDS))
def test_native_line_is_native_record_of_parse_json(raw: bytes) -> None:
    assert _line_outcome(native_line, raw) == _line_outcome(_general(native_record), raw)


@settings(max_examples=500, deadline=None)
@given(raw=_jsonl_line(_GATE_FIELDS))
def test_gate_line_is_gate_record_of_parse_json(raw: bytes) -> None:
    assert _line_outcome(gate_line, raw) == _line_outcome(_general(gate_record), raw)


def test_line_fast_paths_agree_on_json_test_suite() -> None:
    for path in _suite_files():
        raw = path.read_bytes()
        for fast, record in ((native_line, native_record), (gate_line, gate_record)):
            assert _line_outcome(fast, raw) == _line_outcome(_general(record), raw), path.name


_ROUND = b'{"session": "s", "type": "round", '


@pytest.mark.parametrize(
    "raw",
    [
        _ROUND + b'"tool_calls": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        _ROUND + b'"v": ' + b"[" * 1_000 + b"]" * 1_000 + b"}",
        _ROUND + b'"output_tokens": "x", "output_tokens": 5}',
        _ROUND + b'"output_tokens": 5, "output_tokens": null}',
        _ROUND + b'"output_tokens": 18446744073709551616}',
        _ROUND + b'"output_tokens": 1.0}',
        _ROUND + b'"elapsed_s": 1e400}',
        _ROUND + b'"elapsed_s": ' + b"9" * 400 + b"}",
        _ROUND + b'"elapsed_s": 123456789012345678901234567890}',
        _ROUND + b'"tool_error": 1}',
        _ROUND + b'"observation": "\\ud800"}',
        _ROUND + b'"\\ud800": 1}',
        _ROUND + b'"observation": "\xed\xa0\x80"}',
        _ROUND + b'"\xff": 1}',
        _ROUND + b'"observation": NaN}',
        _ROUND + b'"x": 1e400}',
        b"\xef\xbb\xbf" + _ROUND + b'"tool": "t"}',
        _ROUND + b'"tool": "t"} x',
        b'{"step": 1, "action": "read", "writes": 2.0}',
        b'{"step": 1, "action": "read", "elapsed_s": -0.0}',
        b'{"step": 1, "action": "read", "step": 0}',
    ],
)
def test_line_fast_paths_agree_on_edge_cases(raw: bytes) -> None:
    for fast, record in ((native_line, native_record), (gate_line, gate_record)):
        assert _line_outcome(fast, raw) == _line_outcome(_general(record), raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"session": "s", "type": "round", "tool_calls": [{"name": "a"}], "output_tokens": 3,'
        b' "observation": "ok", "tool_error": false, "ts": "2026-12-02T22:00:04.389Z"}',
        b'{"session": "s", "type": "round", "tool_calls": 2, "elapsed_s": 1, "v": 1}',
        b'{"session": "s", "type": "action", "action": "write", "tool": "edit", "detail": "d"}',
        b'{"session": "s", "type": "start", "task_class": "bugfix", "outcome": "done"}',
        b'{"session": "s", "type": "end", "outcome": "user_cancel", "vendor_stop": ""}',
        b'{"session": "s", "type": "round", "session": "t", "observation": "\\ud83d\\ude00"}',
        b'{"step": 2, "action": "read", "detail": "x", "writes": 0, "elapsed_s": 1.268}',
    ],
)
def test_ordinary_lines_take_the_typed_path(raw: bytes) -> None:
    """The agreement above would hold trivially if the typed path took nothing."""
    if b'"step"' in raw:
        record = _gate_typed(_gate_decode(raw))
        assert record == gate_record(parse_json(raw))
    else:
        record = _native_typed(_native_decode(raw))
        assert record == native_record(parse_json(raw))
    assert record is not None
