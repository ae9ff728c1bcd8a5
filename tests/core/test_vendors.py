"""Tests for ledger.core.vendors: the default vendor stop map, classify, TOML maps and lines."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.config.vendor_map import load_vendor_map
from ledger.core import vendors
from ledger.core.budget import Budget
from ledger.core.events import ROUND, Event
from ledger.core.fold import Fold
from ledger.core.reasons import CONTINUE, SEED_VENDOR_MAP, StopReason
from ledger.core.vendors import (
    DEFAULT_VENDOR_MAP,
    FAILS_CLOSED,
    TOOL_ERROR_STOPS,
    VENDOR_SOURCES,
    VendorMapError,
    classify,
    fails_closed_on_purpose,
    vendor_map_entry,
)

TC = StopReason.TASK_COMPLETE
ROUNDS = StopReason.MAX_ROUNDS
TOOLS = StopReason.MAX_TOOL_CALLS
TOKENS = StopReason.MAX_OUTPUT_TOKENS
CANCEL = StopReason.USER_CANCEL
TOOL_ERRORS = StopReason.TOOL_ERROR_BUDGET
NO_PROGRESS = StopReason.NO_PROGRESS
UNKNOWN = StopReason.UNKNOWN_VENDOR
COST = StopReason.MAX_COST

# The whole default map, written out independently of the module, so that adding, removing or
# changing an entry needs a matching change here (and a review of its source).
EXPECTED: dict[str, StopReason | str] = {
    # seed 000
    "completed": TC,
    "max_iterations": ROUNDS,
    "tool_limit": TOOLS,
    "length": TOKENS,
    "cancelled": CANCEL,
    "empty_assistant": NO_PROGRESS,
    # Anthropic Messages stop_reason (and Bedrock Converse stopReason)
    "end_turn": TC,
    "max_tokens": TOKENS,
    "tool_use": CONTINUE,
    "pause_turn": CONTINUE,
    "model_context_window_exceeded": TOKENS,
    "compaction": CONTINUE,  # beta: paused after a compaction block
    # OpenAI Chat Completions finish_reason
    "stop": TC,
    "tool_calls": CONTINUE,
    "function_call": CONTINUE,
    # OpenAI Responses incomplete_details.reason and status
    "max_output_tokens": TOKENS,
    "in_progress": CONTINUE,
    "queued": CONTINUE,
    # Gemini finishReason
    "STOP": TC,
    "MAX_TOKENS": TOKENS,
    "TOO_MANY_TOOL_CALLS": TOOLS,
    # Claude Agent SDK result subtype and terminal_reason
    "success": TC,
    "error_max_turns": ROUNDS,
    "max_turns": ROUNDS,
    "aborted_streaming": CANCEL,
    "aborted_tools": CANCEL,
    "malformed_tool_use_exhausted": TOOL_ERRORS,
    "error_max_budget_usd": COST,
    "budget_exhausted": COST,
    "tool_deferred": CONTINUE,
    # pydantic-ai / OTel GenAI, Vercel AI SDK: a tool call requested
    "tool_call": CONTINUE,
    "tool-calls": CONTINUE,
    # OpenAI Agents SDK
    "MaxTurnsExceeded": ROUNDS,
    # Codex CLI
    "interrupted": CANCEL,
    "replaced": CANCEL,
    "task_complete": TC,
    "budget_limited": COST,
    "sessionBudgetExceeded": COST,
    # LiteLLM max_budget
    "BudgetExceededError": COST,
    # smolagents, LangGraph, AutoGen
    "max_steps_error": ROUNDS,
    "GRAPH_RECURSION_LIMIT": ROUNDS,
    "MaxMessageTermination": ROUNDS,
}

# The real strings the default map lists on purpose as failing closed (unknown_vendor), by the
# group that names them: known, so not "never seen", yet a stop the ledger does not guess.
FAIL_CLOSED_BY_SOURCE: dict[str, list[str]] = {
    "Anthropic Messages API stop_reason": ["stop_sequence", "refusal"],
    "OpenAI Chat Completions finish_reason": ["content_filter"],
    "OpenAI Responses incomplete_details.reason": ["content_filter", "max_messages", "steered"],
    "OpenAI Responses status": ["failed", "incomplete"],
    "Google Gemini finishReason": [
        "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "SAFETY", "RECITATION", "LANGUAGE",
        "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION", "IMAGE_OTHER", "NO_IMAGE", "OTHER", "FINISH_REASON_UNSPECIFIED",
    ],
    "Gemini finishReason, third-party mappers": [
        "MISSING_THOUGHT_SIGNATURE", "MALFORMED_RESPONSE", "MODEL_ARMOR",
    ],
    "AWS Bedrock Converse stopReason": [
        "stop_sequence", "guardrail_intervened", "content_filtered", "malformed_model_output",
        "malformed_tool_use",
    ],
    "Claude Agent SDK result subtype": [
        "error_during_execution", "error_max_structured_output_retries",
    ],
    "Claude Agent SDK terminal_reason": [
        "hook_stopped", "stop_hook_prevented", "background_requested", "blocking_limit",
        "rapid_refill_breaker", "prompt_too_long", "image_error", "model_error", "api_error",
        "structured_output_retry_exhausted", "tool_deferred_unavailable", "turn_setup_failed",
    ],
    "Codex CLI turn_aborted reason": ["review_ended"],
    "Codex app-server CodexErrorInfo": [
        "contextWindowExceeded", "usageLimitExceeded", "serverOverloaded", "cyberPolicy",
        "httpConnectionFailed", "responseStreamConnectionFailed", "responseStreamDisconnected",
        "responseTooManyFailedAttempts", "internalServerError", "unauthorized", "badRequest",
        "threadRollbackFailed", "sandboxError", "activeTurnNotSteerable", "other",
    ],
    "pydantic-ai / OTel GenAI finish_reason": ["content_filter", "error"],
    "Vercel AI SDK finishReason": ["content-filter", "error", "other", "unknown"],
}
FAIL_CLOSED_TABLE = sorted(
    {(raw, label) for label, found in FAIL_CLOSED_BY_SOURCE.items() for raw in found}
)
EXPECTED.update({raw: UNKNOWN for raw, _label in FAIL_CLOSED_TABLE})

# Real vendor strings the brief and the notes say must stay unmapped (fail closed).
MUST_BE_UNKNOWN = [
    "stop_sequence",  # Anthropic / Bedrock: only a declared sentinel is a success
    "refusal",  # Anthropic
    "content_filter",  # OpenAI Chat and Responses
    "failed",  # OpenAI Responses status
    "incomplete",  # OpenAI Responses status (the reason is elsewhere)
    "SAFETY",  # Gemini
    "RECITATION",
    "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL",
    "OTHER",
    "FINISH_REASON_UNSPECIFIED",
    "guardrail_intervened",  # Bedrock
    "content_filtered",
    "malformed_model_output",
    "malformed_tool_use",
    "error_during_execution",  # Claude Agent SDK
    "api_error",
    "review_ended",  # Codex
    "contextWindowExceeded",
    "usageLimitExceeded",  # the account's plan limit, not the session's budget
    "error",  # pydantic-ai / OTel GenAI, Vercel AI SDK
    "content-filter",  # Vercel AI SDK
    "hook_stopped",  # Claude Agent SDK terminal_reason
    "stop_hook_prevented",
    "prompt_too_long",
    "model_error",
    "policy_hidden_v3",  # the seed's own example
]

ALL_VALUES = [reason.value for reason in StopReason] + [CONTINUE]


def write(tmp_path: Path, text: str, name: str = "vendors.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------
# The default map
# ------------------------------------------------------------------------------------------
def test_default_map_is_exactly_the_expected_table():
    assert DEFAULT_VENDOR_MAP == {k: str(v) for k, v in EXPECTED.items()}


def test_default_map_contains_the_seed_map_exactly():
    assert SEED_VENDOR_MAP == {
        "completed": "task_complete",
        "max_iterations": "max_rounds",
        "tool_limit": "max_tool_calls",
        "length": "max_output_tokens",
        "cancelled": "user_cancel",
        "empty_assistant": "no_progress",
    }
    for raw, value in SEED_VENDOR_MAP.items():
        assert DEFAULT_VENDOR_MAP[raw] == value
        assert "seed 000" in VENDOR_SOURCES[raw]


@pytest.mark.parametrize(("raw", "expected"), sorted(EXPECTED.items()))
def test_every_default_entry_classifies(raw, expected):
    result = classify(raw)
    if expected == CONTINUE:
        assert result == CONTINUE
        assert not isinstance(result, StopReason)
    else:
        assert result is expected
    # the default argument is the default map
    assert classify(raw, DEFAULT_VENDOR_MAP) == result


def test_every_default_value_is_a_reason_or_continue():
    assert set(DEFAULT_VENDOR_MAP.values()) <= set(ALL_VALUES)


def test_vendor_sources_cover_exactly_the_default_map():
    assert VENDOR_SOURCES.keys() == DEFAULT_VENDOR_MAP.keys()
    assert all(label.strip() for label in VENDOR_SOURCES.values())


@pytest.mark.parametrize(
    ("raw", "labels"),
    [
        ("completed", ["seed 000", "OpenAI Responses status", "Claude Agent SDK terminal_reason"]),
        ("cancelled", ["seed 000", "OpenAI Responses status"]),
        ("length", ["seed 000", "OpenAI Chat Completions"]),
        ("end_turn", ["Anthropic", "Bedrock"]),
        ("tool_use", ["Anthropic", "Bedrock"]),
        ("max_turns", ["Claude Agent SDK terminal_reason", "OpenAI Agents SDK"]),
        ("STOP", ["Gemini"]),
        ("task_complete", ["Codex"]),
        ("max_steps_error", ["smolagents"]),
        ("GRAPH_RECURSION_LIMIT", ["LangGraph"]),
        ("MaxMessageTermination", ["AutoGen"]),
    ],
)
def test_shared_strings_name_every_source(raw, labels):
    for label in labels:
        assert label in VENDOR_SOURCES[raw]


def test_groups_that_disagree_refuse_to_merge():
    with pytest.raises(RuntimeError, match="'end_turn'.*A maps it to 'task_complete'"):
        vendors._merge((("A", {"end_turn": "task_complete"}), ("B", {"end_turn": "max_rounds"})))


@pytest.mark.parametrize(("raw", "label"), FAIL_CLOSED_TABLE)
def test_a_real_string_that_fails_closed_is_known_with_its_source(raw, label):
    assert DEFAULT_VENDOR_MAP[raw] == UNKNOWN.value
    assert classify(raw) is UNKNOWN
    assert raw in FAILS_CLOSED
    assert label in VENDOR_SOURCES[raw]
    assert label in fails_closed_on_purpose(raw)


def test_fails_closed_is_exactly_the_table():
    assert FAILS_CLOSED == {raw for raw, _label in FAIL_CLOSED_TABLE}


@pytest.mark.parametrize(
    ("raw", "known"),
    [
        ("refusal", True),  # a real string the map fails closed on purpose
        ("usageLimitExceeded", True),
        ("end_turn", False),  # mapped: not failing closed
        ("tool_use", False),  # a continue
        ("policy_hidden_v3", False),  # never seen
        ("Refusal", False),  # exact matching: a variant is never seen either
    ],
)
def test_fails_closed_on_purpose_tells_known_from_never_seen(raw, known):
    assert (fails_closed_on_purpose(raw) is not None) == known


@pytest.mark.parametrize(
    ("raw", "tool_error"),
    [
        ("MALFORMED_FUNCTION_CALL", True),  # Gemini: "the function call ... is invalid"
        ("UNEXPECTED_TOOL_CALL", True),  # Gemini: "the tool call ... is invalid"
        ("malformed_tool_use", True),  # Bedrock
        ("malformed_model_output", False),  # Bedrock: the output, not a tool call
        ("TOO_MANY_TOOL_CALLS", False),  # a vendor-side cap: max_tool_calls
        ("refusal", False),
    ],
)
def test_invalid_tool_call_strings_are_also_tool_errors(raw, tool_error):
    assert (raw in TOOL_ERROR_STOPS) == tool_error
    assert raw in DEFAULT_VENDOR_MAP


def test_module_is_stdlib_only():
    tree = ast.parse(Path(vendors.__file__).read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.add(node.module.split(".")[0])
    assert modules - set(sys.stdlib_module_names) <= {"ledger"}


# ------------------------------------------------------------------------------------------
# classify: fail closed, exact matching, no stop string
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", MUST_BE_UNKNOWN)
def test_deliberately_unmapped_strings_are_unknown_vendor(raw):
    assert DEFAULT_VENDOR_MAP.get(raw, UNKNOWN.value) == UNKNOWN.value
    assert classify(raw) is UNKNOWN


@pytest.mark.parametrize("vendor_map", [DEFAULT_VENDOR_MAP, SEED_VENDOR_MAP, {}])
@pytest.mark.parametrize("raw", [None, ""])
def test_no_stop_string_is_none(raw, vendor_map):
    assert classify(raw, vendor_map) is None


@pytest.mark.parametrize(
    "raw",
    [
        "End_Turn",
        "END_TURN",
        " end_turn",
        "end_turn ",
        "end_turn\n",
        "\tend_turn",
        "STOP ",
        " STOP",
        "Stop",
        "sTOP",
        "Tool_Use",
        "tool_use\r\n",
        "Completed",
        "COMPLETED",
        "completed.",
        "max_Tokens",
        "max-tokens",
        "stop_reason",
        "end_turn\u200b",  # zero-width space
        "end\u00a0turn",  # no-break space
        "\uff53\uff54\uff4f\uff50",  # fullwidth "stop" (NFKC folds it to "stop")
        "graph_recursion_limit",
        "maxturnsexceeded",
        " ",
        "\n",
    ],
)
def test_matching_is_exact(raw):
    assert classify(raw) is UNKNOWN


def _variants(raw: str) -> set[str]:
    return {
        raw.upper(),
        raw.lower(),
        raw.title(),
        raw.swapcase(),
        raw.capitalize(),
        f" {raw}",
        f"{raw} ",
        f"{raw}\n",
        f"\t{raw}",
        f" {raw} ",
    }


CASE_AND_SPACE_VARIANTS = sorted(
    {v for raw in DEFAULT_VENDOR_MAP for v in _variants(raw)} - DEFAULT_VENDOR_MAP.keys()
)


@pytest.mark.parametrize("raw", CASE_AND_SPACE_VARIANTS)
def test_case_and_whitespace_variants_of_every_entry_are_unknown(raw):
    assert classify(raw) is UNKNOWN


def test_some_variants_are_themselves_entries_and_agree():
    # "stop"/"STOP" and "max_tokens"/"MAX_TOKENS" are two vendors' own spellings, not folding.
    assert classify("stop") is classify("STOP") is TC
    assert classify("max_tokens") is classify("MAX_TOKENS") is TOKENS


def test_continue_is_not_a_stop_reason_and_not_none():
    result = classify("tool_use")
    assert result == CONTINUE == "continue"
    assert result is not None
    assert result not in {reason.value for reason in StopReason}


def test_custom_map_is_used_instead_of_the_default():
    custom = {"done": "task_complete", "go_on": CONTINUE}
    assert classify("done", custom) is TC
    assert classify("go_on", custom) == CONTINUE
    assert classify("end_turn", custom) is UNKNOWN


def test_enum_values_in_a_map_are_accepted():
    assert classify("x", {"x": StopReason.MAX_ROUNDS}) is ROUNDS


@pytest.mark.parametrize("bad", ["bogus", "TASK_COMPLETE", "", 3, None.__class__])
def test_a_bad_value_in_a_map_raises_instead_of_guessing(bad):
    with pytest.raises(VendorMapError, match='"x"'):
        classify("x", {"x": bad})


@pytest.mark.parametrize("bad", [0, 1.5, b"end_turn", ["end_turn"], False])
def test_non_string_stop_raises_type_error(bad):
    with pytest.raises(TypeError, match="str or None"):
        classify(bad)


@settings(max_examples=500)
@given(st.text())
def test_random_text_not_in_the_map_is_unknown_vendor(raw):
    result = classify(raw)
    if raw == "":
        assert result is None
    elif raw in DEFAULT_VENDOR_MAP:
        assert result == DEFAULT_VENDOR_MAP[raw]
    else:
        assert result is UNKNOWN
    if result is TC:
        assert DEFAULT_VENDOR_MAP[raw] == "task_complete"


@given(
    st.dictionaries(st.text(min_size=1), st.sampled_from(ALL_VALUES), max_size=20),
    st.text(min_size=1),
)
def test_any_map_never_turns_an_unmapped_string_into_task_complete(vendor_map, raw):
    result = classify(raw, vendor_map)
    if raw not in vendor_map:
        assert result is UNKNOWN
    elif vendor_map[raw] == CONTINUE:
        assert result == CONTINUE
    else:
        assert result is StopReason(vendor_map[raw])


# ------------------------------------------------------------------------------------------
# load_vendor_map
# ------------------------------------------------------------------------------------------
def test_extend_and_override(tmp_path):
    path = write(
        tmp_path,
        """
[stops]
"my_vendor_limit" = "max_rounds"
"stop_sequence" = "task_complete"   # our stop sequences are success sentinels
"STOP" = "unknown_vendor"           # take a default entry back out
"end_turn" = "task_complete"

[continue]
strings = ["tool_use", "pause_turn", "thinking"]
""",
    )
    loaded = load_vendor_map(path)
    assert classify("my_vendor_limit", loaded) is ROUNDS
    assert classify("stop_sequence", loaded) is TC
    assert classify("STOP", loaded) is UNKNOWN
    assert classify("thinking", loaded) == CONTINUE
    assert classify("end_turn", loaded) is TC
    # everything else still comes from the default map
    for raw, value in DEFAULT_VENDOR_MAP.items():
        if raw not in {"STOP", "stop_sequence"}:  # (a known string that failed closed, mapped)
            assert loaded[raw] == value
    assert set(loaded) == set(DEFAULT_VENDOR_MAP) | {"my_vendor_limit", "thinking"}


def test_continue_table_can_turn_a_stop_into_a_continue(tmp_path):
    loaded = load_vendor_map(write(tmp_path, '[continue]\nstrings = ["completed"]\n'))
    assert classify("completed", loaded) == CONTINUE


def test_continue_value_is_also_accepted_in_stops(tmp_path):
    loaded = load_vendor_map(write(tmp_path, '[stops]\n"thinking" = "continue"\n'))
    assert classify("thinking", loaded) == CONTINUE


def test_same_string_in_stops_as_continue_and_in_continue_is_fine(tmp_path):
    text = '[stops]\n"x" = "continue"\n[continue]\nstrings = ["x"]\n'
    assert load_vendor_map(write(tmp_path, text))["x"] == CONTINUE


def test_replace_starts_from_the_seed_map_only(tmp_path):
    path = write(
        tmp_path,
        """
replace = true
[stops]
"end_turn" = "task_complete"
[continue]
strings = ["tool_use"]
""",
    )
    loaded = load_vendor_map(path)
    assert loaded == {**SEED_VENDOR_MAP, "end_turn": "task_complete", "tool_use": CONTINUE}
    assert classify("STOP", loaded) is UNKNOWN
    assert classify("completed", loaded) is TC


def test_replace_ignores_base(tmp_path):
    base = {"mine": "max_rounds"}
    loaded = load_vendor_map(write(tmp_path, "replace = true\n"), base=base)
    assert loaded == SEED_VENDOR_MAP
    assert loaded is not SEED_VENDOR_MAP


def test_replace_false_extends_base(tmp_path):
    loaded = load_vendor_map(write(tmp_path, "replace = false\n"), base={"mine": "max_rounds"})
    assert loaded == {"mine": "max_rounds"}


def test_empty_file_returns_a_copy_of_base(tmp_path):
    loaded = load_vendor_map(write(tmp_path, ""))
    assert loaded == DEFAULT_VENDOR_MAP
    assert loaded is not DEFAULT_VENDOR_MAP


def test_loading_never_mutates_base_or_default(tmp_path):
    before = dict(DEFAULT_VENDOR_MAP)
    base = {"mine": "max_rounds"}
    path = write(tmp_path, '[stops]\n"mine" = "task_complete"\n"end_turn" = "max_rounds"\n')
    load_vendor_map(path)
    load_vendor_map(path, base=base)
    assert DEFAULT_VENDOR_MAP == before
    assert base == {"mine": "max_rounds"}
    assert SEED_VENDOR_MAP["completed"] == "task_complete"


def test_maps_chain(tmp_path):
    first = load_vendor_map(write(tmp_path, '[stops]\n"a" = "max_rounds"\n', "one.toml"))
    second = load_vendor_map(write(tmp_path, '[stops]\n"b" = "user_cancel"\n', "two.toml"), first)
    assert classify("a", second) is ROUNDS
    assert classify("b", second) is CANCEL
    assert classify("end_turn", second) is TC


def test_str_path_is_accepted(tmp_path):
    path = write(tmp_path, '[stops]\n"a" = "max_rounds"\n')
    assert load_vendor_map(str(path))["a"] == "max_rounds"


def test_unicode_and_escaped_keys(tmp_path):
    path = write(tmp_path, '[stops]\n"終了" = "task_complete"\n"a\\"b\\\\c\\n" = "max_rounds"\n')
    loaded = load_vendor_map(path)
    assert classify("終了", loaded) is TC
    assert classify('a"b\\c\n', loaded) is ROUNDS


@pytest.mark.parametrize("value", ALL_VALUES)
def test_every_reason_value_can_be_loaded(tmp_path, value):
    loaded = load_vendor_map(write(tmp_path, f'[stops]\n"x" = "{value}"\n'))
    assert loaded["x"] == value


# --- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (
            '[stops]\n"my_limit" = "max_round"\n',
            ['[stops] "my_limit"', '"max_round"', "not a stop reason", "did you mean 'max_rounds'"],
        ),
        (
            '[stops]\n"x" = "TASK_COMPLETE"\n',
            ['"x"', "did you mean 'task_complete'"],
        ),
        (
            '[stops]\n"x" = "done"\n',
            ['"x" = "done"', "expected one of task_complete", "unknown_vendor", "continue"],
        ),
        ('[stops]\n"x" = 3\n', ['[stops] "x"', "must be a string", "int 3"]),
        ('[stops]\n"x" = true\n', ['[stops] "x"', "must be a string", "bool True"]),
        ('[stops]\n"x" = ["task_complete"]\n', ['[stops] "x"', "must be a string", "list"]),
        ('[stops]\nx = {reason = "task_complete"}\n', ['[stops] "x"', "must be a string"]),
        ('[stops]\n"" = "task_complete"\n', ['[stops] ""', "empty string"]),
        ('[continue]\nstrings = "tool_use"\n', ["[continue] strings", "array of strings"]),
        ('[continue]\nstrings = ["tool_use", 7]\n', ["strings[1]", "must be a string", "int 7"]),
        ('[continue]\nstrings = [""]\n', ["strings[0]", "empty string"]),
        ('[continue]\nstring = ["tool_use"]\n', ['unknown key "string"', "'strings'"]),
        ('[stop]\n"x" = "task_complete"\n', ['unknown top-level key or table "stop"', "[stops]"]),
        ('end_turn = "task_complete"\n', ['unknown top-level key or table "end_turn"']),
        ('replace = "yes"\n', ["'replace' must be true or false", "'yes'"]),
        ('stops = "end_turn"\n', ["'stops' must be a table"]),
        ('continue = ["tool_use"]\n', ["'continue' must be a table"]),
        (
            '[stops]\n"x" = "max_rounds"\n[continue]\nstrings = ["x"]\n',
            ['strings[0] = "x"', 'also mapped to "max_rounds" in [stops]'],
        ),
        ('[stops\n"x" = "task_complete"\n', ["invalid TOML"]),
        ('[stops]\n"x" = task_complete\n', ["invalid TOML"]),
        ('[stops]\n"x" = "max_rounds"\n"x" = "user_cancel"\n', ["invalid TOML"]),
        ('[stops]\n"x\ny" = "max_rounds"\n', ["invalid TOML"]),
    ],
)
def test_errors_name_the_file_and_key(tmp_path, text, fragments):
    path = write(tmp_path, text, "my-map.toml")
    with pytest.raises(VendorMapError) as info:
        load_vendor_map(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_vendor_map_error_is_a_value_error():
    assert issubclass(VendorMapError, ValueError)


def test_bad_toml_keeps_the_parser_position(tmp_path):
    path = write(tmp_path, '[stops]\n"ok" = "max_rounds"\n"x" = \n')
    with pytest.raises(VendorMapError, match=r"line 3") as info:
        load_vendor_map(path)
    assert isinstance(info.value.__cause__, tomllib.TOMLDecodeError)


def test_non_utf8_file_is_a_vendor_map_error(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('[stops]\n"fin\xe9" = "task_complete"\n'.encode("latin-1"))
    with pytest.raises(VendorMapError, match="invalid TOML"):
        load_vendor_map(path)


def test_missing_file_raises_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_vendor_map(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("base", "fragment"),
    [
        ({"x": "bogus"}, "base vendor map"),
        ({"": "task_complete"}, "non-empty string"),
        ({1: "task_complete"}, "key 1 must be a non-empty string"),
        ({"x": 1}, '"x" = 1'),
    ],
)
def test_bad_base_is_rejected(tmp_path, base, fragment):
    with pytest.raises(VendorMapError, match="base vendor map") as info:
        load_vendor_map(write(tmp_path, ""), base=base)
    assert fragment in str(info.value)


# ------------------------------------------------------------------------------------------
# vendor_map_entry
# ------------------------------------------------------------------------------------------
def test_entry_example_from_the_seed():
    assert vendor_map_entry("policy_hidden_v3") == '"policy_hidden_v3" = "task_complete"'


def test_entry_with_reason():
    assert vendor_map_entry("my_limit", "max_rounds") == '"my_limit" = "max_rounds"'
    assert vendor_map_entry("my_limit", StopReason.USER_CANCEL) == '"my_limit" = "user_cancel"'
    assert vendor_map_entry("thinking", CONTINUE) == '"thinking" = "continue"'


AWKWARD = [
    'say "hi"',
    "back\\slash",
    "trailing\\",
    "\\u0041 is not A",
    "new\nline",
    "crlf\r\n",
    "tab\there",
    "\b\f\x00\x01\x1f\x7f",
    "fin\u00e9",
    "終了",
    "emoji \U0001f600",
    "zero\u200bwidth",
    "nbsp\u00a0space",
    "line\u2028sep",
    "rtl\u202eoverride",
    "bom\ufeff",
    "'single' quotes",
    "'''",
    '"""',
    "# not a comment",
    "a = b",
    "[stops]",
    " ",
    "end_turn ",
]


def _roundtrip(raw: str, reason: str) -> dict:
    return tomllib.loads(vendor_map_entry(raw, reason))


@pytest.mark.parametrize("raw", AWKWARD)
def test_entry_round_trips_through_tomllib(raw):
    line = vendor_map_entry(raw, "max_rounds")
    assert "\n" not in line and "\r" not in line
    assert tomllib.loads(line) == {raw: "max_rounds"}


@pytest.mark.parametrize("raw", AWKWARD)
def test_entry_pasted_under_stops_loads_and_classifies(tmp_path, raw):
    path = write(tmp_path, "[stops]\n" + vendor_map_entry(raw, "max_tool_calls") + "\n")
    assert classify(raw, load_vendor_map(path)) is TOOLS


def test_entry_makes_invisible_characters_visible():
    assert vendor_map_entry("end_turn\u200b") == '"end_turn\\u200B" = "task_complete"'
    assert vendor_map_entry("a\u00a0b") == '"a\\u00A0b" = "task_complete"'
    assert vendor_map_entry("x\U000e0001") == '"x\\U000E0001" = "task_complete"'
    assert vendor_map_entry("a\tb\x7f") == '"a\\tb\\u007F" = "task_complete"'


def test_entry_keeps_printable_unicode_readable():
    assert vendor_map_entry("終了") == '"終了" = "task_complete"'


@settings(max_examples=500)
@given(st.text(min_size=1), st.sampled_from(ALL_VALUES))
def test_entry_round_trips_for_any_text(raw, reason):
    line = vendor_map_entry(raw, reason)
    assert "\n" not in line and "\r" not in line
    assert _roundtrip(raw, reason) == {raw: reason}


@pytest.mark.parametrize("reason", ["bogus", "TASK_COMPLETE", "", "unknown"])
def test_entry_rejects_unknown_reasons(reason):
    with pytest.raises(VendorMapError, match="not a stop reason"):
        vendor_map_entry("x", reason)


def test_entry_rejects_empty_raw():
    with pytest.raises(VendorMapError, match="empty string"):
        vendor_map_entry("")


def test_entry_rejects_non_string_raw():
    with pytest.raises(TypeError):
        vendor_map_entry(None)  # type: ignore[arg-type]


def test_entry_rejects_lone_surrogates():
    with pytest.raises(ValueError, match="surrogate"):
        vendor_map_entry("bad\ud800")


# ------------------------------------------------------------------------------------------
# In the fold: an invalid tool call fails closed and counts toward the tool-error budget
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "errors"),
    [
        ("MALFORMED_FUNCTION_CALL", 3),
        ("UNEXPECTED_TOOL_CALL", 3),
        ("malformed_tool_use", 3),
        ("refusal", 0),  # known, fails closed, but no tool error
        ("policy_hidden_v3", 0),  # never seen: fails closed, no tool error
    ],
)
def test_a_vendor_stop_for_an_invalid_tool_call_is_a_tool_error_too(raw, errors):
    fold = Fold(Budget(), DEFAULT_VENDOR_MAP, lambda text: (text, 0))
    session = fold.new_session("s", source_id="src", source_path="p", dialect="native",
                               task_class="tc")
    rows = [fold.step(session, Event(ROUND, vendor_stop=raw), n, n)[0] for n in range(3)]
    assert session.state.stop_reason is UNKNOWN
    assert session.recorded_stop == UNKNOWN.value
    assert session.state.consecutive_tool_errors == session.state.tool_errors == errors
    assert [row[7] for row in rows] == [1 if errors else None] * 3  # steps.tool_error
