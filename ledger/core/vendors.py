"""Vendor stop strings: map a raw vendor stop string onto a StopReason, failing closed.

A *vendor map* is a flat ``{raw vendor string: reason}`` mapping. A reason is a
:class:`~ledger.core.reasons.StopReason` value (``"task_complete"``, ``"max_rounds"``, ...) or the
:data:`~ledger.core.reasons.CONTINUE` marker (``"continue"``) for strings that mean "the loop goes
on" (a tool call was requested, a turn was paused, a response is still queued).

:func:`classify` turns one raw string into a decision:

* ``None`` or ``""`` -> ``None``: there is no stop string at all. Claude Code writes
  ``stop_reason: null`` on every assistant line and ``stopReason: ""`` in stop-hook summaries, so
  an absent string must not fail closed or every such run would read as ``unknown_vendor``.
* a string mapped to ``"continue"`` -> :data:`CONTINUE`: not a stop, and not unknown either.
* a mapped string -> its :class:`StopReason`.
* anything else -> :attr:`StopReason.UNKNOWN_VENDOR`. Seed 000: an unknown string is never
  aliased to ``task_complete``; keep the paid path and do not guess.

Matching is EXACT: no case folding, no whitespace stripping, no Unicode normalisation. So
``"End_Turn"``, ``" end_turn"`` and ``"STOP "`` are ``unknown_vendor``. Vendor enums are exact
strings, and they keep growing (Anthropic added three values in 2025, Gemini about ten in 18
months). Folding could alias a new or a different vendor's value onto a known one, which is the
guess the seed forbids. If a runtime really emits a variant, map that exact string in a TOML file.
Some strings are mapped in two spellings because two vendors use them (OpenAI ``"stop"`` and
Gemini ``"STOP"``, Anthropic ``"max_tokens"`` and Gemini ``"MAX_TOKENS"``); each is listed on its
own, with its own source.

A string means the same thing whichever vendor sent it: the map is not keyed by vendor. Where two
sources use one string (``"completed"``, ``"end_turn"``, ``"max_turns"``, ...) they agree, and
:data:`VENDOR_SOURCES` names all of them. The module refuses to import if two groups disagree.

:func:`classify` is context-free. Some strings need a look at the surrounding record first, and
that is the importer's job, before it calls :func:`classify`:

* Claude Code writes API failures as synthetic assistant lines (``isApiErrorMessage: true``,
  ``model: "<synthetic>"``) with ``stop_reason: "stop_sequence"``. Rule these out first.
* Gemini ``"STOP"`` is also sent when the candidate holds ``functionCall`` parts: that is a
  continue, not a completion.
* Claude Agent SDK ``subtype: "success"`` comes with ``is_error: true`` when the last API call
  failed. Use ``is_error`` first, then ``subtype``, then ``terminal_reason``.
* OpenAI Responses ``status: "completed"`` with ``function_call`` items in ``output`` means the
  model wants tools: a continue.

Real strings that fail closed ON PURPOSE are in the map too, mapped to ``unknown_vendor``
(:data:`FAILS_CLOSED`), each in its vendor's group with that group's source. They classify
exactly as a string never seen does, but the map knows them: the verdicts and the dashboard
say "a known vendor string that fails closed on purpose" (:func:`fails_closed_on_purpose`)
instead of asking for a map entry, and a user's TOML file can still map them. Which and why:

* ``stop_sequence`` (Anthropic, Bedrock): it is a completion only when the sequence is a success
  sentinel the user declared, which this module cannot know, and Claude Code uses it for
  synthetic API-error lines. Map it in a TOML file if your stop sequences are success sentinels.
* ``refusal``, ``content_filter``, ``content_filtered``, ``guardrail_intervened``, Gemini safety
  and policy values, ``malformed_*``: no reason in our list fits, and none of them is a success.
* Failures that end a run without a cap being reached (Claude Agent SDK ``api_error``,
  ``model_error``, ``prompt_too_long``, ...; Codex ``contextWindowExceeded``; the generic
  ``error``) and the account's plan limit (Codex ``usageLimitExceeded``: a rate limit of the
  subscription, not this session's budget).
* Not among them: money caps (Claude Agent SDK ``error_max_budget_usd`` and
  ``budget_exhausted``, Codex ``budget_limited`` and ``sessionBudgetExceeded``, LiteLLM's
  ``BudgetExceededError``) are ``max_cost``: the vendor stopped the loop at its own
  ``max_budget_usd`` / ``max_budget``.

The strings that report an invalid tool call the model made (Gemini ``MALFORMED_FUNCTION_CALL``
and ``UNEXPECTED_TOOL_CALL``, Bedrock ``malformed_tool_use``: :data:`TOOL_ERROR_STOPS`) fail
closed and are also a tool error: the fold counts them toward ``max_consecutive_tool_errors``.

Vendor map files (TOML) extend or override the default map; see
:func:`ledger.config.vendor_map.load_vendor_map`. To take
a default entry back out, map it to ``"unknown_vendor"`` (or start with ``replace = true``).
:func:`vendor_map_entry` renders one ready-to-paste line for such a file.

Pure and stdlib only; reading a vendor map file is :mod:`ledger.config.vendor_map`'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from ledger.core.reasons import CONTINUE, SEED_VENDOR_MAP, StopReason

__all__ = [
    "DEFAULT_VENDOR_MAP",
    "FAILS_CLOSED",
    "TOOL_ERROR_STOPS",
    "VENDOR_SOURCES",
    "VendorMap",
    "VendorMapError",
    "classify",
    "fails_closed_on_purpose",
    "vendor_map_entry",
]

VendorMap = Mapping[str, str]  # raw vendor string -> StopReason value, or CONTINUE ("continue")


class VendorMapError(ValueError):
    """A vendor map (a TOML file, or a mapping passed in) holds something that is not allowed."""


_REASONS: dict[str, StopReason] = {reason.value: reason for reason in StopReason}
#: Every value a vendor map may hold.
MAP_VALUES: tuple[str, ...] = (*_REASONS, CONTINUE)

_SEED_LABEL = "seed 000 VENDOR_STOP_MAP"

# --------------------------------------------------------------------------------------------
# The default map, grouped by vendor. Each group cites its source (the vendor SDK file or
# documentation page) so each entry can be audited.
# Reason values are spelled as StopReason members so a typo fails at import.
# --------------------------------------------------------------------------------------------
_TC = StopReason.TASK_COMPLETE.value
_ROUNDS = StopReason.MAX_ROUNDS.value
_TOOLS = StopReason.MAX_TOOL_CALLS.value
_TOKENS = StopReason.MAX_OUTPUT_TOKENS.value
_CANCEL = StopReason.USER_CANCEL.value
_TOOL_ERRORS = StopReason.TOOL_ERROR_BUDGET.value
_COST = StopReason.MAX_COST.value
_FAIL = StopReason.UNKNOWN_VENDOR.value  # a known string that fails closed on purpose

_GROUPS: tuple[tuple[str, dict[str, str]], ...] = (
    # Seed 000 (the migration-diary article), exactly as ledger.core.reasons has it.
    (_SEED_LABEL, dict(SEED_VENDOR_MAP)),
    # Anthropic Messages API stop_reason: anthropics/anthropic-sdk-python
    # src/anthropic/types/stop_reason.py (end_turn, max_tokens, stop_sequence, tool_use,
    # pause_turn, refusal, model_context_window_exceeded); platform.claude.com
    # handling-stop-reasons.
    (
        "Anthropic Messages API stop_reason",
        {
            "end_turn": _TC,
            "max_tokens": _TOKENS,
            "tool_use": CONTINUE,
            "pause_turn": CONTINUE,  # server-tool loop paused; resend to continue
            "model_context_window_exceeded": _TOKENS,  # truncation class
            # a success only for a sentinel the user declared; Claude Code also writes it on
            # its synthetic API-error lines
            "stop_sequence": _FAIL,
            "refusal": _FAIL,  # the model declined (read stop_details): no reason fits
        },
    ),
    # Anthropic beta stop_reason "compaction": anthropics/anthropic-sdk-typescript
    # src/resources/beta/messages/messages.ts BetaStopReason; platform.claude.com
    # build-with-claude/compaction (pause_after_compaction: the response stops after the
    # compaction block, and the client sends it back to go on).
    ("Anthropic Messages API beta stop_reason", {"compaction": CONTINUE}),
    # OpenAI Chat Completions choices[].finish_reason: openai/openai-python
    # src/openai/types/chat/chat_completion.py, Choice.finish_reason Literal["stop", "length",
    # "tool_calls", "content_filter", "function_call"]. "length" is already in the seed.
    (
        "OpenAI Chat Completions finish_reason",
        {
            "stop": _TC,
            "length": _TOKENS,
            "tool_calls": CONTINUE,
            "function_call": CONTINUE,  # deprecated single-function variant
            "content_filter": _FAIL,  # content omitted by the filter
        },
    ),
    # OpenAI Responses API incomplete_details.reason: openai/openai-python
    # src/openai/types/responses/response.py, IncompleteDetails.reason
    # Literal["max_output_tokens", "content_filter"]; newer generated clients add max_messages
    # and steered (docs.rs openai-client-base 0.16.0), not yet documented: they fail closed.
    (
        "OpenAI Responses incomplete_details.reason",
        {
            "max_output_tokens": _TOKENS,
            "content_filter": _FAIL,
            "max_messages": _FAIL,
            "steered": _FAIL,
        },
    ),
    # OpenAI Responses API status: src/openai/types/responses/response_status.py.
    # "completed" and "cancelled" agree with the seed. "completed" with function_call items in
    # output is a continue: the importer checks that.
    (
        "OpenAI Responses status",
        {
            "completed": _TC,
            "cancelled": _CANCEL,
            "in_progress": CONTINUE,
            "queued": CONTINUE,
            "failed": _FAIL,  # generation failed (error.code: an API error)
            "incomplete": _FAIL,  # the reason is in incomplete_details.reason
        },
    ),
    # Google Gemini candidates[].finishReason: googleapis/python-genai google/genai/types.py,
    # class FinishReason (STOP, MAX_TOKENS, SAFETY, RECITATION, LANGUAGE, OTHER, BLOCKLIST,
    # PROHIBITED_CONTENT, SPII, MALFORMED_FUNCTION_CALL, IMAGE_SAFETY, UNEXPECTED_TOOL_CALL,
    # TOO_MANY_TOOL_CALLS, IMAGE_PROHIBITED_CONTENT, NO_IMAGE, IMAGE_RECITATION, IMAGE_OTHER,
    # FINISH_REASON_UNSPECIFIED). STOP with functionCall parts is a continue: the importer
    # checks that. UNEXPECTED_TOOL_CALL was added 2025-05-30, TOO_MANY_TOOL_CALLS 2026-08-05.
    (
        "Google Gemini finishReason",
        {
            "STOP": _TC,
            "MAX_TOKENS": _TOKENS,
            "TOO_MANY_TOOL_CALLS": _TOOLS,  # vendor-side tool cap
            # "The function call generated by the model is invalid." (+ a tool error)
            "MALFORMED_FUNCTION_CALL": _FAIL,
            # "The tool call generated by the model is invalid." (+ a tool error)
            "UNEXPECTED_TOOL_CALL": _FAIL,
            # content and policy blocks
            "SAFETY": _FAIL,
            "RECITATION": _FAIL,
            "LANGUAGE": _FAIL,
            "BLOCKLIST": _FAIL,
            "PROHIBITED_CONTENT": _FAIL,
            "SPII": _FAIL,
            "IMAGE_SAFETY": _FAIL,
            "IMAGE_PROHIBITED_CONTENT": _FAIL,
            "IMAGE_RECITATION": _FAIL,
            "IMAGE_OTHER": _FAIL,  # image generation stopped, other reason
            "NO_IMAGE": _FAIL,  # no image generated
            "OTHER": _FAIL,
            "FINISH_REASON_UNSPECIFIED": _FAIL,  # unset
        },
    ),
    # Gemini finishReason values seen in third-party mappers (litellm, langchaingo), not in
    # the python-genai enum at the notes' snapshot.
    (
        "Gemini finishReason, third-party mappers",
        {"MISSING_THOUGHT_SIGNATURE": _FAIL, "MALFORMED_RESPONSE": _FAIL, "MODEL_ARMOR": _FAIL},
    ),
    # AWS Bedrock Converse stopReason: docs.aws.amazon.com/bedrock/latest/APIReference/
    # API_runtime_MessageStopEvent.html, "Valid Values: end_turn | tool_use | max_tokens |
    # stop_sequence | guardrail_intervened | content_filtered | malformed_model_output |
    # malformed_tool_use | model_context_window_exceeded" (the ja_jp/de_de pages list all nine).
    (
        "AWS Bedrock Converse stopReason",
        {
            "end_turn": _TC,
            "tool_use": CONTINUE,
            "max_tokens": _TOKENS,
            "model_context_window_exceeded": _TOKENS,
            "stop_sequence": _FAIL,  # a success only for a declared sentinel
            "guardrail_intervened": _FAIL,
            "content_filtered": _FAIL,
            "malformed_model_output": _FAIL,
            "malformed_tool_use": _FAIL,  # (+ a tool error)
        },
    ),
    # Claude Agent SDK result subtype: anthropics/claude-agent-sdk-python
    # src/claude_agent_sdk/types.py L1319-1356 (success, error_during_execution,
    # error_max_turns, error_max_budget_usd, error_max_structured_output_retries); code.claude.com
    # docs/en/agent-sdk/typescript SDKResultMessage. "success" counts only when is_error is false:
    # the importer checks that; error_max_budget_usd is its max_budget_usd option's stop.
    (
        "Claude Agent SDK result subtype",
        {
            "success": _TC,
            "error_max_turns": _ROUNDS,
            "error_max_budget_usd": _COST,
            "error_during_execution": _FAIL,  # a runtime error
            "error_max_structured_output_retries": _FAIL,  # retries exhausted
        },
    ),
    # Claude Agent SDK terminal_reason: code.claude.com docs/en/agent-sdk/typescript,
    # SDKResultMessage.terminal_reason, "One of completed, max_turns, tool_deferred,
    # aborted_streaming, aborted_tools, hook_stopped, stop_hook_prevented, background_requested,
    # blocking_limit, rapid_refill_breaker, prompt_too_long, image_error, model_error,
    # api_error, malformed_tool_use_exhausted, budget_exhausted,
    # structured_output_retry_exhausted, tool_deferred_unavailable, turn_setup_failed" (TS
    # sdk.d.ts TerminalReason). The hook stops and the failures fail closed: no cap was
    # reached and none of them is a success.
    (
        "Claude Agent SDK terminal_reason",
        {
            "completed": _TC,
            "max_turns": _ROUNDS,
            "aborted_streaming": _CANCEL,
            "aborted_tools": _CANCEL,
            "malformed_tool_use_exhausted": _TOOL_ERRORS,
            "budget_exhausted": _COST,
            # a PreToolUse hook deferred a call; the app resumes the session to go on
            "tool_deferred": CONTINUE,
            "hook_stopped": _FAIL,
            # also Claude Code's stop_hook_summary with preventedContinuation
            "stop_hook_prevented": _FAIL,
            "background_requested": _FAIL,  # sent to the background
            "blocking_limit": _FAIL,  # the context's blocking limit
            "rapid_refill_breaker": _FAIL,  # the runaway-loop breaker
            "prompt_too_long": _FAIL,
            "image_error": _FAIL,
            "model_error": _FAIL,
            "api_error": _FAIL,
            "structured_output_retry_exhausted": _FAIL,
            "tool_deferred_unavailable": _FAIL,  # the deferred tool is gone
            "turn_setup_failed": _FAIL,  # the turn could not start
        },
    ),
    # OpenAI Agents SDK: openai-agents-python src/agents/exceptions.py (MaxTurnsExceeded),
    # src/agents/run_error_handlers.py (handler key "max_turns").
    (
        "OpenAI Agents SDK max turns",
        {
            "max_turns": _ROUNDS,
            "MaxTurnsExceeded": _ROUNDS,
        },
    ),
    # Codex CLI: openai/codex codex-rs/protocol/src/protocol.rs (TurnAbortReason; event_msg
    # task_complete). budget_limited: the session's budget ran out.
    (
        "Codex CLI turn_aborted reason",
        {
            "interrupted": _CANCEL,
            "replaced": _CANCEL,
            "budget_limited": _COST,
            "review_ended": _FAIL,  # a review turn ended
        },
    ),
    # Codex app-server error kinds: openai/codex codex-rs/app-server-protocol/src/protocol/v2.rs
    # CodexErrorInfo (serde camelCase); sessionBudgetExceeded in newer builds (named in issue
    # 19). Over its budget is max_cost; the rest are failures, no cap of this session reached
    # (usageLimitExceeded is the plan's rate limit, not this session's budget).
    (
        "Codex app-server CodexErrorInfo",
        {
            "sessionBudgetExceeded": _COST,
            "contextWindowExceeded": _FAIL,  # the input is over the context window
            "usageLimitExceeded": _FAIL,
            "serverOverloaded": _FAIL,
            "cyberPolicy": _FAIL,
            "httpConnectionFailed": _FAIL,
            "responseStreamConnectionFailed": _FAIL,
            "responseStreamDisconnected": _FAIL,
            "responseTooManyFailedAttempts": _FAIL,
            "internalServerError": _FAIL,
            "unauthorized": _FAIL,
            "badRequest": _FAIL,
            "threadRollbackFailed": _FAIL,
            "sandboxError": _FAIL,
            "activeTurnNotSteerable": _FAIL,
            "other": _FAIL,
        },
    ),
    # pydantic-ai FinishReason: pydantic/pydantic-ai pydantic_ai_slim/pydantic_ai/messages.py,
    # Literal["stop", "length", "content_filter", "tool_call", "error"], the OpenTelemetry
    # GenAI gen_ai.response.finish_reasons vocabulary its spans carry (real: the Langfuse
    # export pydantic-ai-tools-2025-12-04). "stop" and "length" are mapped above.
    (
        "pydantic-ai / OTel GenAI finish_reason",
        {"tool_call": CONTINUE, "content_filter": _FAIL, "error": _FAIL},
    ),
    # Vercel AI SDK finishReason: vercel/ai packages/provider LanguageModelV2FinishReason,
    # "stop" | "length" | "content-filter" | "tool-calls" | "error" | "other" | "unknown" (real:
    # the Langfuse export vercel-aisdk-2025-11-17, ai.response.finishReason).
    (
        "Vercel AI SDK finishReason",
        {"tool-calls": CONTINUE, "content-filter": _FAIL, "error": _FAIL, "other": _FAIL,
         "unknown": _FAIL},  # "unknown": the provider did not say
    ),
    # LiteLLM: litellm.max_budget (USD) raises BudgetExceededError (docs/my-website/docs/
    # budget_manager.md); its proxy's max_budget answers with the same error type.
    ("LiteLLM max_budget", {"BudgetExceededError": _COST}),
    ("Codex CLI event_msg type", {"task_complete": _TC}),
    # smolagents: src/smolagents/agents.py L606-638, RunResult.state.
    ("smolagents RunResult.state", {"max_steps_error": _ROUNDS}),
    # LangGraph: libs/langgraph/langgraph/errors.py L67, GraphRecursionError error code.
    ("LangGraph error code", {"GRAPH_RECURSION_LIMIT": _ROUNDS}),
    # AutoGen AgentChat: python/packages/autogen-agentchat/src/autogen_agentchat/conditions/
    # _terminations.py L62-105, StopMessage.source.
    ("AutoGen StopMessage.source", {"MaxMessageTermination": _ROUNDS}),
)


def _merge(groups: tuple[tuple[str, dict[str, str]], ...]) -> tuple[dict[str, str], dict[str, str]]:
    """Flatten the groups; a string that two groups map differently is an error."""
    merged: dict[str, str] = {}
    sources: dict[str, str] = {}
    for label, entries in groups:
        for raw, value in entries.items():
            if raw in merged and merged[raw] != value:
                raise RuntimeError(
                    f"vendor string {raw!r}: {sources[raw]} maps it to {merged[raw]!r} but "
                    f"{label} maps it to {value!r}"
                )
            merged[raw] = value
            sources[raw] = f"{sources[raw]}; {label}" if raw in sources else label
    return merged, sources


#: Seed map + real vendor strings. Do not mutate: load_vendor_map returns a new dict.
DEFAULT_VENDOR_MAP: dict[str, str]
#: Each DEFAULT_VENDOR_MAP entry -> the vendor/source label(s) it comes from.
VENDOR_SOURCES: dict[str, str]
DEFAULT_VENDOR_MAP, VENDOR_SOURCES = _merge(_GROUPS)

#: The real vendor strings the default map lists on purpose as failing closed.
FAILS_CLOSED: frozenset[str] = frozenset(
    raw for raw, value in DEFAULT_VENDOR_MAP.items() if value == _FAIL
)
#: Strings that say the model made an invalid tool call: they fail closed and are also a tool
#: error (the notes' "unknown (+ tool error)"), so they count toward the consecutive
#: tool-error budget.
TOOL_ERROR_STOPS: frozenset[str] = frozenset(
    {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "malformed_tool_use"}
)


def fails_closed_on_purpose(raw: str) -> str | None:
    """Where the built-in map has ``raw`` as a real string that fails closed on purpose (its
    source), or None: a string it maps, or one it has never seen."""
    return VENDOR_SOURCES[raw] if raw in FAILS_CLOSED else None


# --------------------------------------------------------------------------------------------
# classify
# --------------------------------------------------------------------------------------------
def classify(
    vendor_stop: str | None, vendor_map: VendorMap = DEFAULT_VENDOR_MAP
) -> StopReason | None | Literal["continue"]:
    """Classify one raw vendor stop string, failing closed.

    None/"" -> None (no stop string at all); CONTINUE for continue signals; the mapped StopReason;
    StopReason.UNKNOWN_VENDOR for anything unmapped (fail closed, never task_complete).
    Matching is exact (no case folding, no strip). Raises TypeError for a non-string
    ``vendor_stop`` and VendorMapError when the map holds a value that is not a reason.
    """
    if vendor_stop is None:
        return None
    if not isinstance(vendor_stop, str):
        raise TypeError(f"vendor stop must be a str or None, not {type(vendor_stop).__name__}")
    if vendor_stop == "":
        return None
    value = vendor_map.get(vendor_stop)
    if value is None:
        return StopReason.UNKNOWN_VENDOR
    if value == CONTINUE:
        return CONTINUE
    reason = _REASONS.get(value) if isinstance(value, str) else None
    if reason is None:
        raise VendorMapError(
            f"vendor map entry {quote(vendor_stop)} = {value!r}: {bad_value_hint(value)}"
        )
    return reason


def bad_value_hint(value: object) -> str:
    message = "not a stop reason; expected one of " + ", ".join(MAP_VALUES)
    if isinstance(value, str):
        import difflib  # only for a bad value: no call of the hook pays for it

        close = difflib.get_close_matches(value.lower(), MAP_VALUES, n=1)
        if close:
            message += f" (did you mean {close[0]!r}?)"
    return message


# --------------------------------------------------------------------------------------------
# vendor_map_entry
# --------------------------------------------------------------------------------------------
_TOML_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _toml_string(text: str) -> str:
    """``text`` as a one-line TOML basic string.

    Quotes, backslashes and control characters are escaped as TOML requires. Other characters
    that do not print (format characters such as zero-width spaces, non-ASCII spaces, line and
    paragraph separators) are escaped as ``\\uXXXX`` so a pasted line shows what the vendor sent.
    Lone surrogates cannot be written in TOML and raise ValueError.
    """
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(
                f"{text!r} holds a lone surrogate (U+{code:04X}), which TOML cannot represent"
            )
        elif char.isprintable():
            out.append(char)
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(f"\\U{code:08X}")
    out.append('"')
    return "".join(out)


def quote(text: object) -> str:
    """A key or value for an error message: TOML-quoted when possible, else repr."""
    if isinstance(text, str):
        try:
            return _toml_string(text)
        except ValueError:
            pass
    return repr(text)


def vendor_map_entry(raw: str, reason: str = "task_complete") -> str:
    """A ready-to-paste TOML line for the map, e.g. '"policy_hidden_v3" = "task_complete"'.

    Goes under ``[stops]`` in a vendor map file. ``raw`` is escaped as a TOML basic string, so
    the line round-trips through tomllib for any string (quotes, backslashes, newlines, unicode);
    invisible characters come out as ``\\uXXXX``. ``reason`` is a StopReason (or its value) or
    "continue". Raises VendorMapError (a ValueError) for an empty ``raw`` or an unknown reason,
    and ValueError for a ``raw`` holding lone surrogates (TOML cannot represent them).
    """
    if not isinstance(raw, str):
        raise TypeError(f"raw must be a str, not {type(raw).__name__}")
    if raw == "":
        raise VendorMapError("the empty string cannot be mapped (it means no stop)")
    if isinstance(reason, StopReason):
        reason = reason.value
    if not isinstance(reason, str) or reason not in MAP_VALUES:
        raise VendorMapError(f"reason {reason!r}: {bad_value_hint(reason)}")
    return f"{_toml_string(raw)} = {_toml_string(reason)}"
