"""Hypothesis strategies for random native ledgers and budgets, shared by the replay tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from ledger.core.budget import Budget

OBSERVATIONS = st.sampled_from(["same", "other", "third"])
VENDOR_STOPS = st.sampled_from([None, None, None, "end_turn", "tool_use", "max_tokens",
                                "policy_hidden_v3"])


@st.composite
def native_event(draw: st.DrawFn, session: str) -> dict[str, Any]:
    kind = draw(st.sampled_from(["round", "round", "action"]))
    event: dict[str, Any] = {"session": session, "type": kind}
    if kind == "round":
        if draw(st.booleans()):
            event["tool_calls"] = draw(st.integers(0, 4))
        if draw(st.booleans()):
            event["output_tokens"] = draw(st.integers(0, 3000))
        vendor = draw(VENDOR_STOPS)
        if vendor:
            event["vendor_stop"] = vendor
    else:
        event["action"] = draw(st.sampled_from(["think", "read", "write", "retry"]))
    if draw(st.booleans()):
        event["observation"] = draw(OBSERVATIONS)
    if draw(st.booleans()):
        event["tool_error"] = draw(st.booleans())
    return event


@st.composite
def native_session(
    draw: st.DrawFn, session: str, task_class: str = "work", outcome: str | None = None
) -> list[dict[str, Any]]:
    """One session: a start, random rounds and actions with rising elapsed time, maybe an end."""
    events = [{"session": session, "type": "start", "task_class": task_class}]
    events += draw(st.lists(native_event(session), min_size=1, max_size=16))
    elapsed = 0.0
    for event in events:
        elapsed += draw(st.sampled_from([0.0, 0.5, 1.25, 7.0]))
        event["elapsed_s"] = elapsed
    end = outcome or draw(st.sampled_from([None, "task_complete", "user_cancel"]))
    if end:
        events.append({"session": session, "type": "end", "outcome": end, "elapsed_s": elapsed})
    return events


@st.composite
def ledger(draw: st.DrawFn, sessions: int = 4, outcome: str | None = None) -> list[list[dict]]:
    return [
        draw(native_session(f"s{n}", draw(st.sampled_from(["bugfix", "docs"])), outcome))
        for n in range(draw(st.integers(1, sessions)))
    ]


def cap(low: int, high: int) -> st.SearchStrategy[int | None]:
    return st.one_of(st.none(), st.integers(low, high))


budgets = st.builds(
    Budget,
    max_rounds=cap(0, 12),
    max_tool_calls=cap(0, 20),
    max_output_tokens=cap(0, 20_000),
    max_consecutive_tool_errors=cap(0, 4),
    no_progress_rounds=cap(1, 4),
    max_steps=cap(0, 12),
    max_writes=cap(0, 3),
    max_seconds=st.one_of(st.none(), st.sampled_from([0.0, 3.0, 10.0, 30.0])),
)


def write_ledger(folder: Path, sessions: list[list[dict[str, Any]]]) -> Path:
    """Interleave the sessions' events round-robin into one JSONL file."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ledger.jsonl"
    lines = []
    for i in range(max(len(s) for s in sessions)):
        lines += [json.dumps(s[i]) for s in sessions if i < len(s)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
