"""Count the real agent logs by hand: figures to check the importers against.

    python scripts/hand_count.py > tests/fixtures/expected_sessions.json

Reads the raw JSON of every real log (``tests/fixtures/real-agent-logs/`` and, when it is
beside the repository, ``../shared/fixtures/real-agent-logs/more/``) with the standard library
only: nothing of ``ledger`` is imported, so a bug in an importer cannot hide in its own check.
The rules are the documented meaning of each format (docs/real-agent-logs.md), written again
from the files, not from the importers' code:

* Claude Code: a round is one API response (``message.id``, else ``requestId``) of a main or
  sidechain ``assistant`` line; a tool call is each distinct ``tool_use`` id; the file-edit
  writes are the calls of ``Edit``, ``MultiEdit``, ``Write`` and ``NotebookEdit``; the stop is
  the main conversation's last turn end (a response with ``stop_reason`` ``end_turn``, or a
  ``system`` ``turn_duration`` or ``stop_hook_summary``: ``task_complete``; a tool result or
  prompt that says the user interrupted or rejected, unless the rejection goes on with what
  "the user said:": ``user_cancel``), cleared by a later prompt (a new turn); a file with no
  turn end has none.
* Codex: a round is a model response: a run of model output items (``reasoning``, an
  assistant ``message``, a tool call) up to the next input (a tool output, or a user
  message: a ``user``/``developer`` ``message`` item or a ``user_message`` event). Builds that
  persist the prompt only as the ``user_message`` event (the Codex Desktop rollout
  ``cx_codemie__…019e1695``: 3 prompts, no user ``message`` item) would otherwise run the
  answer to one prompt and the response to the next into one round: there the model is
  called again for each prompt (the next output follows a new prompt, 50 minutes later), so
  that rollout has 20 responses, not 18;
  a tool call is each ``function_call``, ``custom_tool_call``, ``local_shell_call`` and
  ``web_search_call``; the file-edit writes are the ``apply_patch`` calls; the stop is the last
  ``task_complete`` (``task_complete``) or ``turn_aborted`` (``interrupted``/``replaced``:
  ``user_cancel``), cleared by a later ``task_started``.

A retried edit (the same call again after it failed) is still a file-edit call here; the
ledger classes it ``retry``, so the check is against its write and retry steps together.
Token figures are in tests/fixtures/expected_tokens.json (counted the same way, and by ccusage).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "tests" / "fixtures" / "real-agent-logs"
MORE = ROOT.parent / "shared" / "fixtures" / "real-agent-logs" / "more"
CLAUDE_EDITS = {"Edit", "MultiEdit", "Write", "NotebookEdit"}
CODEX_CALLS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
CANCEL_TEXTS = ("[Request interrupted by user", "The user doesn't want to proceed")
FEEDBACK = "the user said:"  # a rejection that tells the model how to go on: not a cancel


def lines(path: Path) -> list[dict[str, Any]]:
    found = []
    for raw in path.read_bytes().splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                out.append(block["text"])
            out.extend(_texts(block.get("content")))
    return out


def claude_code(path: Path) -> dict[str, Any]:
    responses: set[str] = set()
    calls: dict[str, str] = {}
    stop = None
    for obj in lines(path):
        kind, message = obj.get("type"), obj.get("message")
        main = not obj.get("isSidechain")
        if kind == "assistant" and isinstance(message, dict):
            key = message.get("id") or obj.get("requestId")
            if key and message.get("model") != "<synthetic>":
                responses.add(key)
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    calls.setdefault(block.get("id"), block.get("name"))
            if main and message.get("stop_reason") == "end_turn":
                stop = "task_complete"
        elif kind == "system" and main and obj.get("subtype") in (
            "turn_duration", "stop_hook_summary"
        ):
            stop = "task_complete"
        elif kind == "user" and main and isinstance(message, dict):
            content = message.get("content")
            results = isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            )
            if any(t.startswith(CANCEL_TEXTS) and FEEDBACK not in t for t in _texts(content)):
                stop = "user_cancel"
            elif not results and not obj.get("isMeta"):
                stop = None  # a prompt: a new turn
    return {
        "rounds": len(responses),
        "tool_calls": len(calls),
        "edit_writes": sum(1 for name in calls.values() if name in CLAUDE_EDITS),
        "stop": stop,
    }


def codex(path: Path) -> dict[str, Any]:
    rounds = calls = patches = 0
    in_response = False
    stop = None
    for obj in lines(path):
        payload = obj.get("payload") if isinstance(obj.get("payload"), dict) else {}
        kind, item = obj.get("type"), payload.get("type")
        if kind == "response_item":
            output = item in CODEX_CALLS or item == "reasoning" or (
                item == "message" and payload.get("role") == "assistant"
            )
            if output and not in_response:
                rounds += 1
            in_response = output or (in_response and item == "message"
                                     and payload.get("role") not in ("user", "developer"))
            if item in CODEX_CALLS:
                calls += 1
                patches += payload.get("name") == "apply_patch"
        elif kind == "event_msg":
            if item == "user_message":
                in_response = False  # a prompt: input for the next response
            elif item == "task_started":
                stop = None
            elif item == "task_complete":
                stop = "task_complete"
            elif item == "turn_aborted":
                stop = "user_cancel" if payload.get("reason") in (
                    "interrupted", "replaced") else payload.get("reason")
    return {"rounds": rounds, "tool_calls": calls, "edit_writes": patches, "stop": stop}


def files() -> list[tuple[str, Path]]:
    found = [(p.name, p) for p in sorted(SAMPLES.glob("0[1-5]_*.jsonl"))]
    for kind in ("claude-code", "codex"):
        found += [(f"more/{kind}/{p.name}", p) for p in sorted((MORE / kind).glob("*.jsonl"))]
    return found


def main() -> None:
    table: dict[str, Any] = {
        "_about": "Counted by scripts/hand_count.py from the raw JSON, apart from the ledger "
        "(its module doc gives the rules); figures only, the files are in "
        "tests/fixtures/real-agent-logs/ and ../shared/fixtures/real-agent-logs/more/.",
    }
    for name, path in files():
        counted = claude_code(path) if "claude_code" in name or "cc_" in name else codex(path)
        table[name] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()[:16], **counted}
    json.dump(table, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
