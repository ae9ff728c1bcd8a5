# ruff: noqa
# Seed 000's loop_budget.py, verbatim (a test oracle).
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional
import hashlib
import json


class StopReason(str, Enum):
    TASK_COMPLETE = "task_complete"
    MAX_ROUNDS = "max_rounds"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_OUTPUT_TOKENS = "max_output_tokens"
    USER_CANCEL = "user_cancel"
    TOOL_ERROR_BUDGET = "tool_error_budget"
    NO_PROGRESS = "no_progress"
    UNKNOWN_VENDOR = "unknown_vendor"


@dataclass(frozen=True)
class LoopBudget:
    max_rounds: int = 12
    max_tool_calls: int = 24
    max_output_tokens: int = 32_000
    max_consecutive_tool_errors: int = 3
    no_progress_rounds: int = 2


@dataclass
class LoopState:
    rounds: int = 0
    tool_calls: int = 0
    output_tokens: int = 0
    consecutive_tool_errors: int = 0
    observation_hashes: list[str] = field(default_factory=list)
    last_stop: Optional[StopReason] = None
    vendor_stop: Optional[str] = None


def observation_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def should_stop(budget: LoopBudget, state: LoopState) -> Optional[StopReason]:
    if state.vendor_stop and state.vendor_stop not in {
        "completed",
        "max_iterations",
        "tool_limit",
        "length",
        "cancelled",
        "empty_assistant",
    }:
        return StopReason.UNKNOWN_VENDOR
    if state.rounds >= budget.max_rounds:
        return StopReason.MAX_ROUNDS
    if state.tool_calls >= budget.max_tool_calls:
        return StopReason.MAX_TOOL_CALLS
    if state.output_tokens >= budget.max_output_tokens:
        return StopReason.MAX_OUTPUT_TOKENS
    if state.consecutive_tool_errors >= budget.max_consecutive_tool_errors:
        return StopReason.TOOL_ERROR_BUDGET
    if len(state.observation_hashes) >= budget.no_progress_rounds:
        tail = state.observation_hashes[-budget.no_progress_rounds :]
        if len(set(tail)) == 1:
            return StopReason.NO_PROGRESS
    return None


def apply_round(state: LoopState, *, tools: int, tokens: int, observation: str, tool_error: bool) -> LoopState:
    state.rounds += 1
    state.tool_calls += tools
    state.output_tokens += tokens
    state.observation_hashes.append(observation_hash(observation))
    if tool_error:
        state.consecutive_tool_errors += 1
    else:
        state.consecutive_tool_errors = 0
    return state


def replay_trace(path: str, budget: LoopBudget) -> StopReason:
    with open(path, encoding="utf-8") as handle:
        events = json.load(handle)
    state = LoopState()
    last_reason: Optional[StopReason] = None
    for event in events["rounds"]:
        apply_round(
            state,
            tools=len(event.get("tool_calls", [])),
            tokens=int(event.get("output_tokens") or 0),
            observation=event.get("observation") or "",
            tool_error=bool(event.get("tool_error")),
        )
        state.vendor_stop = event.get("vendor_stop")
        last_reason = should_stop(budget, state)
        if last_reason:
            state.last_stop = last_reason
            return last_reason
    return StopReason.TASK_COMPLETE
