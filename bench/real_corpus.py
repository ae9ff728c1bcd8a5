"""Claude Code projects and Codex sessions shaped like real use, of any size, for a seed.

Writes ``claude/projects/<project>/<sessionId>.jsonl`` (with sub-agent files under
``<sessionId>/subagents/agent-<id>.jsonl``) and ``codex/sessions/YYYY/MM/DD/rollout-...jsonl``,
the layouts Claude Code and Codex keep, so that ``ccusage`` (``CLAUDE_CONFIG_DIR``,
``CODEX_HOME``) reads the same files as ``agent-ledger ingest``. The mix of record kinds and the
size of each kind's lines follow what :mod:`real_shape` measured on the real public samples
(the tables below; ``bench/README.md`` has the measured figures): one line per content block,
usage repeated on every block of a response, hook and bash progress lines, tool results of 1
to 150 KB, Codex token counts, turn contexts and function call outputs. Every text is drawn
afresh from a large vocabulary with Zipf-like frequencies, so no two tool inputs, outputs or
messages are the same (real logs repeat some; a memo of redaction results or a compressor
would be served by repeats, and this corpus gives them none).

    .venv/bin/python bench/real_corpus.py bench/data/real --claude-mb 100 --codex-mb 30
    .venv/bin/python bench/real_corpus.py bench/data/real --grow 5   # a turn more in 5 files
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import os
import random
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

#: Quantiles of :data:`CLAUDE_SIZES` and :data:`CODEX_SIZES` (the same as real_shape's).
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)

#: Line bytes (newline included) of all lines at :data:`QUANTILES`, measured as below: what
#: the generated corpus is held to (tests/test_bench_corpus.py).
LINE_BYTES = {
    "claude-code": (110, 572, 753, 977, 1621, 3784, 7786, 26507, 148595),
    "codex": (99, 221, 302, 710, 1404, 11052, 13337, 16404, 6832830),
}
#: Line bytes of each Claude Code record kind at :data:`QUANTILES`, measured by
#: ``bench/real_shape.py`` on the 28 real Claude Code files (2026-12-01); the top is kept.
CLAUDE_SIZES = {
    "user/tool_result": (483, 614, 768, 1714, 4013, 11445, 18583, 43536, 148595),
    "assistant/tool_use": (770, 865, 920, 1013, 1375, 1829, 2653, 6405, 31523),
    "assistant/text": (696, 787, 840, 903, 989, 1649, 2493, 13433, 18326),
    "progress/hook_progress": (549, 603, 607, 637, 654, 658, 680, 691, 691),
    "assistant/thinking": (1005, 1235, 1297, 1517, 2206, 3485, 5046, 13455, 24639),
    "progress/bash_progress": (541, 567, 567, 571, 582, 761, 7138, 7139, 7139),
    "user/text": (344, 418, 496, 553, 773, 1076, 1503, 4876, 6136),
    "file-history-snapshot": (236, 236, 236, 339, 547, 1011, 3124, 3784, 3784),
    "progress/agent_progress": (1483, 1737, 1908, 1943, 3514, 19351, 26507, 52772, 52772),
    "summary": (110, 118, 124, 128, 134, 136, 140, 153, 153),
    "system/stop_hook_summary": (606, 655, 664, 788, 808, 808, 808, 6271, 6271),
    "system/turn_duration": (414, 414, 430, 446, 451, 457, 460, 460, 460),
    "queue-operation": (138, 139, 139, 139, 189, 193, 282, 282, 282),
}
#: The same for the 9 real Codex rollouts, sizes as before their publisher's redaction; the
#: three lines over 1 MB (pasted images, a compaction) are left out, the top is the next one.
CODEX_SIZES = {
    "event_msg/token_count": (185, 707, 712, 716, 719, 721, 722, 724, 724),
    "response_item/function_call": (186, 254, 284, 306, 369, 532, 605, 1030, 10801),
    "response_item/function_call_output": (172, 266, 331, 890, 3447, 8289, 12293, 32314, 83716),
    "response_item/message": (154, 264, 321, 371, 601, 3835, 6840, 16000, 60000),
    "turn_context": (347, 11052, 11052, 13337, 13337, 13337, 13337, 13337, 13337),
    "response_item/reasoning": (1014, 1095, 1203, 1528, 2342, 4560, 7184, 14071, 17888),
    "event_msg/agent_message": (170, 234, 264, 297, 355, 891, 2185, 5863, 16035),
    "event_msg/agent_reasoning": (126, 138, 140, 144, 148, 154, 158, 167, 565),
    "response_item/custom_tool_call": (357, 480, 771, 1178, 2638, 5066, 6482, 27848, 27848),
    "response_item/custom_tool_call_output": (313, 332, 342, 375, 394, 397, 467, 1104, 1104),
    "event_msg/user_message": (159, 168, 215, 274, 2554, 8000, 12000, 20000, 40000),
    "event_msg/task_started": (209, 209, 209, 209, 209, 209, 209, 233, 233),
    "event_msg/task_complete": (442, 812, 1043, 1928, 3640, 5357, 6103, 16095, 16095),
    "session_meta": (3359, 3359, 13586, 13586, 13586, 26766, 26766, 26766, 26766),
}

#: Per tool call (Claude Code: per tool_use block), how often each other kind comes with it,
#: from the measured line counts (e.g. 445 text blocks, 117 turns, 922 tool uses).
CLAUDE_PER_CALL = {"assistant/thinking": 0.23, "assistant/text": 0.35,
                   "progress/hook_progress": 0.26, "progress/bash_progress": 0.13,
                   "progress/agent_progress": 0.04}
CLAUDE_PER_TURN = {"file-history-snapshot": 0.69, "summary": 0.2, "queue-operation": 0.1,
                   "system/stop_hook_summary": 0.2, "system/turn_duration": 0.13}
CODEX_PER_CALL = {"response_item/reasoning": 0.54, "event_msg/agent_reasoning": 0.47,
                  "turn_context": 0.55, "event_msg/agent_message": 0.48,
                  "response_item/message": 0.55, "second token_count": 0.25,
                  "custom": 0.104}
#: Tool calls a turn, uniform (means 10.5 and 12.5): more than the measured 7.9 for Claude
#: Code, since many files end within a turn.
CALLS_PER_TURN = {"claude": (1, 20), "codex": (1, 24)}

#: Tools by the size of their tool_use line, weighted by how often the real samples call them:
#: Bash commands are short (122 characters at the median, 2 KB at most), large inputs are
#: files written and edited.
TOOLS_BY_SIZE = (
    (1150, {"Bash": 356, "Read": 157, "Grep": 44, "Glob": 39}),
    (2000, {"Edit": 50, "TodoWrite": 80, "Task": 18, "Bash": 30}),
    (10**9, {"Write": 62, "Edit": 50, "MultiEdit": 8}),
)
CLAUDE_MODELS = ("claude-opus-4-6", "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001")
CODEX_MODELS = ("gpt-5.3-codex", "gpt-5.2-codex", "gpt-5.1-codex-mini")
SYLLABLES = ("ka", "to", "ri", "en", "al", "mo", "ste", "pra", "lu", "dex", "on", "qui", "va",
             "sel", "zo", "ber", "ni", "cha", "gor", "fi", "tem", "ul", "wes", "yo", "im", "dra")
PUNCT = ("(", ")", ":", "=", "->", "{", "}", ",", ".", "/", "[", "]", "\n", "\n", "\n    ",
         "\"", "'", "+", "-", "#", "→", "✓", "é")
MANIFEST = "real-corpus.manifest"  # not *.json: ingest must not take it for a log
VERSION = 3  # bump when the corpus changes, so that kept corpora are made again


class Words:
    """Diverse text from a vocabulary of 40,000 made-up identifiers, numbers and punctuation,
    drawn with Zipf-like frequencies (as words are), so that texts share words but never
    whole sentences."""

    def __init__(self, rng: random.Random, size: int = 40_000) -> None:
        self.rng = rng
        vocab: dict[str, None] = dict.fromkeys(PUNCT)
        while len(vocab) < size:
            word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))
            shape = rng.random()
            if shape < 0.15:
                word = f"{word}_{rng.choice(SYLLABLES)}{rng.randint(0, 99)}"
            elif shape < 0.25:
                word = word.capitalize() + rng.choice(SYLLABLES).capitalize()
            elif shape < 0.35:
                word = str(rng.randint(0, 10**rng.randint(1, 7)))
            vocab[word] = None
        self.vocab = list(vocab)
        self.cum = list(itertools.accumulate(1 / (rank + 10) for rank in range(len(vocab))))

    def text(self, size: int) -> str:
        """About ``size`` characters of text (at least a few words)."""
        words = self.rng.choices(self.vocab, cum_weights=self.cum, k=max(4, size // 5 + 1))
        return " ".join(words)[:max(size, 12)]

    def command(self, size: int) -> str:
        """A shell command line: text whose quotes pair up, as a shell's do."""
        return self.text(size).replace('"', "").replace("'", "")

    def path(self) -> str:
        parts = self.rng.choices(self.vocab[len(PUNCT):], k=self.rng.randint(2, 5))
        return "/".join(parts) + self.rng.choice((".py", ".ts", ".go", ".rs", ".md", ".json"))


def sample_size(rng: random.Random, quantiles: tuple[int, ...]) -> int:
    """A line size drawn from a kind's quantiles: between two measured quantiles, spread
    evenly on a log scale."""
    u = rng.random()
    i = min(bisect.bisect_right(QUANTILES, u) - 1, len(QUANTILES) - 2)
    lo, hi = quantiles[i], quantiles[i + 1]
    share = (u - QUANTILES[i]) / (QUANTILES[i + 1] - QUANTILES[i])
    return round(lo * (hi / lo) ** share)


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def dumps(record: dict[str, object]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def filled(make: object, target: int) -> str:
    """``make(room)`` as a line, its text sized so that the line is about ``target`` bytes
    (its text at least a few words long, so that no text repeats)."""
    room = target - 1 - len(make("").encode())  # type: ignore[operator]
    return make(max(room, 16))  # type: ignore[operator]


class Session:
    """Lines of one transcript, turn by turn, with a clock and fresh ids."""

    def __init__(self, rng: random.Random, words: Words, at: datetime) -> None:
        self.rng, self.words, self.at = rng, words, at

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tick(self, low: int = 40, high: int = 4000) -> str:
        self.at += timedelta(milliseconds=self.rng.randint(low, high))
        return iso(self.at)

    def text(self, room: int | str) -> str:
        """A text for ``room`` bytes ('' while a line is measured)."""
        return "" if room == "" else self.words.text(int(room))

    def command(self, room: int | str) -> str:
        return "" if room == "" else self.words.command(int(room))

    def size(self, kind: str) -> int:
        raise NotImplementedError


class Claude(Session):
    """A Claude Code transcript (a main session or, with ``agent``, a sub-agent's file)."""

    def __init__(self, rng: random.Random, words: Words, at: datetime, project: str,
                 session: str | None = None, agent: str | None = None) -> None:
        super().__init__(rng, words, at)
        self.session = session or self.uid()
        self.parent: str | None = None
        self.base: dict[str, object] = {
            "parentUuid": None, "isSidechain": agent is not None, "userType": "external",
            "cwd": f"/home/dev/{project}", "sessionId": self.session,
            "version": rng.choice(("2.1.37", "2.1.39", "2.0.76", "2.1.14")),
            "gitBranch": rng.choice(("main", f"dev/{words.text(14).split()[0]}")),
            "slug": "-".join(words.text(40).split()[:3]),
        }
        if agent:
            self.base["agentId"] = agent
        self.model = rng.choice(CLAUDE_MODELS)
        self.tokens = 0

    def size(self, kind: str) -> int:
        return sample_size(self.rng, CLAUDE_SIZES[kind])

    def line(self, kind: str, fields: dict[str, object]) -> str:
        me = self.uid()
        record = {**self.base, "parentUuid": self.parent, "type": kind, **fields,
                  "uuid": me, "timestamp": self.tick()}
        self.parent = me
        return dumps(record)

    def turn(self) -> Iterator[str]:
        rng, per_turn = self.rng, CLAUDE_PER_TURN
        if rng.random() < per_turn["summary"]:
            yield filled(lambda t: dumps({"type": "summary", "summary": self.text(t),
                                          "leafUuid": self.uid()}), self.size("summary"))
        if rng.random() < per_turn["queue-operation"]:
            yield filled(lambda t: dumps({"type": "queue-operation", "operation": "enqueue",
                                          "timestamp": iso(self.at), "content": self.text(t),
                                          "sessionId": self.session}),
                         self.size("queue-operation"))
        if rng.random() < per_turn["file-history-snapshot"]:
            yield self.snapshot()
        yield filled(lambda t: self.line("user", {"message": {
            "role": "user", "content": self.text(t)}}), self.size("user/text"))
        for _ in range(rng.randint(*CALLS_PER_TURN["claude"])):
            yield from self.response(call=True)
        yield from self.response(call=False)
        if rng.random() < per_turn["system/stop_hook_summary"]:
            yield filled(lambda t: self.line("system", {
                "subtype": "stop_hook_summary", "hookCount": 1,
                "hookInfos": [{"command": self.text(t)}], "hookErrors": [],
                "preventedContinuation": False, "stopReason": "", "hasOutput": True,
                "level": "suggestion", "toolUseID": self.uid()}),
                self.size("system/stop_hook_summary"))
        if rng.random() < per_turn["system/turn_duration"]:
            yield self.line("system", {"subtype": "turn_duration",
                                       "durationMs": rng.randint(1000, 900_000), "isMeta": False})

    def snapshot(self) -> str:
        mid = self.uid()
        return filled(lambda t: dumps({"type": "file-history-snapshot", "messageId": mid,
                                       "snapshot": {"messageId": mid, "trackedFileBackups": (
                                           {self.words.path(): self.text(t)} if t else {}),
                                           "timestamp": iso(self.at)},
                                       "isSnapshotUpdate": False}),
                      self.size("file-history-snapshot"))

    def response(self, call: bool) -> Iterator[str]:
        """One model response, a line per content block, the usage repeated on each."""
        rng = self.rng
        msg, req = f"msg_{rng.getrandbits(96):024x}", f"req_{rng.getrandbits(96):024x}"
        self.tokens += rng.randint(200, 9000)
        created = rng.randint(0, 30_000)
        usage = {"input_tokens": rng.randint(1, 12), "cache_creation_input_tokens": created,
                 "cache_read_input_tokens": self.tokens,
                 "cache_creation": {"ephemeral_5m_input_tokens": 0,
                                    "ephemeral_1h_input_tokens": created},
                 "output_tokens": rng.randint(1, 2500), "service_tier": "standard",
                 "inference_geo": "not_available"}
        kinds = [k for k in ("assistant/thinking", "assistant/text")
                 if not call or rng.random() < CLAUDE_PER_CALL[k]]
        if not call and "assistant/thinking" in kinds and rng.random() > 0.23:
            kinds.remove("assistant/thinking")
        tool_id = f"toolu_{rng.getrandbits(96):024x}"
        tool_size = self.size("assistant/tool_use")
        tools = next(t for limit, t in TOOLS_BY_SIZE if tool_size <= limit)
        tool = rng.choices(list(tools), weights=list(tools.values()))[0]
        for kind in [*kinds, "assistant/tool_use"] if call else kinds:
            block = self.block(kind, tool_id, tool)
            size = tool_size if kind == "assistant/tool_use" else self.size(kind)
            yield filled(lambda t, b=block: self.line("assistant", {"message": {
                "model": self.model, "id": msg, "type": "message", "role": "assistant",
                "content": [b(t)], "stop_reason": None if call else "end_turn",
                "stop_sequence": None, "usage": usage}, "requestId": req}), size)
        if call:
            yield from self.result(tool_id, tool)

    def block(self, kind: str, tool_id: str, tool: str) -> object:
        if kind == "assistant/thinking":
            return lambda t: {"type": "thinking", "thinking": self.text(t),
                              "signature": f"Eq{self.rng.getrandbits(256):064x}"}
        if kind == "assistant/text":
            return lambda t: {"type": "text", "text": self.text(t)}
        path = f"/home/dev/{self.words.path()}"
        inputs = {
            "Bash": lambda t: {"command": self.command(t), "description": self.words.text(30)},
            "Edit": lambda t: {"file_path": path, "old_string": self.text(t and int(t) // 2),
                               "new_string": self.text(t and int(t) // 2)},
            "Write": lambda t: {"file_path": path, "content": self.text(t)},
            "Read": lambda t: {"file_path": path + self.command(t and int(t)).replace(" ", "_")},
        }
        make = inputs.get(tool, lambda t: {"pattern": self.text(t), "path": path})
        return lambda t: {"type": "tool_use", "id": tool_id, "name": tool, "input": make(t)}

    def result(self, tool_id: str, tool: str) -> Iterator[str]:
        rng = self.rng
        for kind, hook in (("progress/hook_progress", "hook_progress"),
                           ("progress/bash_progress", "bash_progress"),
                           ("progress/agent_progress", "agent_progress")):
            if rng.random() < CLAUDE_PER_CALL[kind]:
                yield filled(lambda t, h=hook: self.line("progress", {
                    "data": {"type": h, "hookEvent": "PreToolUse",
                             "hookName": f"PreToolUse:{tool}", "output": self.text(t)},
                    "parentToolUseID": tool_id, "toolUseID": tool_id}), self.size(kind))
        failed = rng.random() < 0.05
        yield filled(lambda t: self.line("user", {"message": {"role": "user", "content": [{
            "tool_use_id": tool_id, "type": "tool_result", "content": self.text(t),
            "is_error": failed}]}}), self.size("user/tool_result"))


class Codex(Session):
    """A Codex rollout (the newer shape: exit codes in the output's header)."""

    def __init__(self, rng: random.Random, words: Words, at: datetime, project: str) -> None:
        super().__init__(rng, words, at)
        self.session, self.project = self.uid(), project
        self.model = rng.choice(CODEX_MODELS)
        self.totals = [0, 0, 0, 0]  # input, cached input, output, reasoning output

    def size(self, kind: str) -> int:
        return sample_size(self.rng, CODEX_SIZES[kind])

    def line(self, kind: str, payload: dict[str, object]) -> str:
        return dumps({"timestamp": self.tick(20, 3000), "type": kind, "payload": payload})

    def item(self, kind: str, make: object) -> str:
        outer = kind.partition("/")[0]
        return filled(lambda t: self.line(outer, make(t)),  # type: ignore[operator]
                      self.size(kind))

    def meta(self) -> str:
        return self.item("session_meta", lambda t: {
            "id": self.session, "timestamp": iso(self.at), "cwd": f"/Users/dev/{self.project}",
            "originator": "codex_cli_rs", "cli_version": "0.104.0", "source": "cli",
            "model_provider": "openai", "base_instructions": {"text": self.text(t)}})

    def turn(self) -> Iterator[str]:
        rng, per = self.rng, CODEX_PER_CALL
        turn = self.uid()
        yield self.item("event_msg/task_started", lambda t: {
            "type": "task_started", "turn_id": turn, "model_context_window": 258400,
            "collaboration_mode_kind": "default"})
        yield self.item("event_msg/user_message", lambda t: {
            "type": "user_message", "message": self.text(t), "images": []})
        yield self.message("user")
        yield self.context(turn)
        for _ in range(rng.randint(*CALLS_PER_TURN["codex"])):
            if rng.random() < per["turn_context"]:
                yield self.context(turn)
            if rng.random() < per["response_item/reasoning"]:
                yield self.item("response_item/reasoning", lambda t: {
                    "type": "reasoning", "summary": [], "content": None,
                    "encrypted_content": self.text(t)})
            if rng.random() < per["event_msg/agent_reasoning"]:
                yield self.item("event_msg/agent_reasoning", lambda t: {
                    "type": "agent_reasoning", "text": self.text(t)})
            if rng.random() < per["event_msg/agent_message"]:
                yield self.item("event_msg/agent_message", lambda t: {
                    "type": "agent_message", "message": self.text(t)})
            if rng.random() < per["response_item/message"]:
                yield self.message("assistant")
            yield from self.call(rng.random() < per["custom"])
            yield self.tokens()
            if rng.random() < per["second token_count"]:
                yield self.tokens()  # re-emitted, as real rollouts do
        yield self.item("event_msg/task_complete", lambda t: {
            "type": "task_complete", "turn_id": turn, "last_agent_message": self.text(t)})

    def message(self, role: str) -> str:
        kind = "input_text" if role == "user" else "output_text"
        return self.item("response_item/message", lambda t: {
            "type": "message", "role": role, "content": [{"type": kind, "text": self.text(t)}]})

    def context(self, turn: str) -> str:
        return self.item("turn_context", lambda t: {
            "turn_id": turn, "cwd": f"/Users/dev/{self.project}", "approval_policy":
            "on-request", "sandbox_policy": {"type": "workspace-write"}, "model": self.model,
            "effort": "high", "user_instructions": self.text(t)})

    def call(self, custom: bool) -> Iterator[str]:
        rng = self.rng
        call = f"call_{rng.getrandbits(120):030x}"
        if custom:
            yield self.item("response_item/custom_tool_call", lambda t: {
                "type": "custom_tool_call", "status": "completed", "call_id": call,
                "name": "apply_patch", "input": self.text(t)})
            yield self.item("response_item/custom_tool_call_output", lambda t: {
                "type": "custom_tool_call_output", "call_id": call, "output": self.text(t)})
            return
        yield self.item("response_item/function_call", lambda t: {
            "type": "function_call", "name": "exec_command", "call_id": call,
            "arguments": json.dumps({"cmd": self.command(t),
                                     "workdir": f"/Users/dev/{self.project}"})})
        code = 1 if rng.random() < 0.05 else 0
        yield self.item("response_item/function_call_output", lambda t: {
            "type": "function_call_output", "call_id": call,
            "output": f"Chunk ID: {rng.getrandbits(24):06x}\nWall time: {rng.random():.4f} "
            f"seconds\nProcess exited with code {code}\nOutput:\n{self.text(t)}"})

    def tokens(self) -> str:
        rng, totals = self.rng, self.totals
        last = [rng.randint(2000, 60_000), 0, rng.randint(10, 3000), 0]
        last[1], last[3] = rng.randint(0, last[0]), rng.randint(0, last[2])
        for i, value in enumerate(last):
            totals[i] += value

        def usage(v: list[int]) -> dict[str, int]:
            return {"input_tokens": v[0], "cached_input_tokens": v[1], "output_tokens": v[2],
                    "reasoning_output_tokens": v[3], "total_tokens": v[0] + v[2]}

        return self.line("event_msg", {"type": "token_count", "info": {
            "total_token_usage": usage(totals), "last_token_usage": usage(last),
            "model_context_window": 258400}, "rate_limits": {
                "limit_id": "codex", "limit_name": None,
                "primary": {"used_percent": round(rng.random() * 100, 1),
                            "window_minutes": 300, "resets_at": rng.randint(10**9, 2 * 10**9)},
                "secondary": {"used_percent": round(rng.random() * 100, 1),
                              "window_minutes": 10080,
                              "resets_at": rng.randint(10**9, 2 * 10**9)},
                "credits": {"has_credits": False, "unlimited": False, "balance": None},
                "plan_type": None}})


@dataclass
class Manifest:
    """What was generated, to reuse a corpus and cut grown files back."""

    claude_mb: float
    codex_mb: float
    claude_files: int
    seed: int
    bytes: int = 0
    lines: int = 0
    sizes: dict[str, int] = field(default_factory=dict)
    version: int = VERSION

    def save(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> Manifest | None:
        try:
            data = json.loads((folder / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        return cls(**data) if data.get("version") == VERSION else None

    def files(self, folder: Path, kind: str = "") -> list[Path]:
        """The generated files (``kind``: 'claude' or 'codex' for one of them)."""
        return [folder / name for name in self.sizes if name.startswith(kind)]


def file_sizes(rng: random.Random, count: int, total: int) -> list[int]:
    """``count`` file sizes summing to about ``total``: log-normal, as transcripts are (the
    real ones run from 2 KB to 1.2 MB, most near 200 KB)."""
    raw = [rng.lognormvariate(0, 1.1) for _ in range(count)]
    scale = total / sum(raw)
    return [max(4000, round(x * scale)) for x in raw]


def write(path: Path, lines: Iterator[str], target: float, mode: str = "wb") -> tuple[int, int]:
    """Write lines while they fit in ``target`` bytes (at least one); returns (bytes, lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = count = 0
    with path.open(mode) as f:
        for line in lines:
            data = (line + "\n").encode()
            if count and size + len(data) > target:
                break
            f.write(data)
            size += len(data)
            count += 1
    return size, count


def forever(session: Claude | Codex) -> Iterator[str]:
    while True:
        yield from session.turn()


PROJECTS = 24


def generate(folder: Path, claude_mb: float = 100, codex_mb: float = 30,
             claude_files: int = 500, seed: int = 1) -> Manifest:
    """Write the corpus into ``folder``: ``claude_files`` Claude Code files (a fifth of them
    sub-agent files) holding ``claude_mb`` MB, and Codex rollouts of ``codex_mb`` MB."""
    rng = random.Random(seed)
    words = Words(rng)
    manifest = Manifest(claude_mb, codex_mb, claude_files, seed)
    projects = [f"-home-dev-{words.path().split('.')[0].replace('/', '-')}"
                for _ in range(PROJECTS)]
    start = datetime(2026, 6, 1, 8, tzinfo=UTC)
    sizes = file_sizes(rng, claude_files, round(claude_mb * 1e6))
    n = 0
    while n < len(sizes):
        project = rng.choice(projects)
        at = start + timedelta(minutes=n * 37)
        main = Claude(rng, words, at, project)
        slug = folder / "claude" / "projects" / project
        record(manifest, folder, slug / f"{main.session}.jsonl", forever(main), sizes[n])
        n += 1
        for _ in range(rng.choice((0, 0, 0, 1, 1, 2)) if n < len(sizes) else 0):
            agent = f"a{rng.getrandbits(28):07x}"
            sub = Claude(rng, words, at, project, session=main.session, agent=agent)
            path = slug / main.session / "subagents" / f"agent-{agent}.jsonl"
            record(manifest, folder, path, forever(sub), sizes[n])
            n += 1
            if n == len(sizes):
                break
    codex_total = round(codex_mb * 1e6)
    count = max(1, round(codex_total / 400_000))
    for k, size in enumerate(file_sizes(rng, count, codex_total)):
        at = start + timedelta(hours=k * 5, seconds=rng.randint(0, 3600))
        codex = Codex(rng, words, at, rng.choice(projects).removeprefix("-home-dev-"))
        day = folder / "codex" / "sessions" / at.strftime("%Y/%m/%d")
        path = day / f"rollout-{at:%Y-%m-%dT%H-%M-%S}-{codex.session}.jsonl"
        record(manifest, folder, path, itertools.chain([codex.meta()], forever(codex)), size)
    manifest.save(folder)
    return manifest


def record(manifest: Manifest, folder: Path, path: Path, lines: Iterator[str],
           target: int) -> None:
    size, count = write(path, lines, target)
    manifest.sizes[str(path.relative_to(folder))] = size
    manifest.bytes += size
    manifest.lines += count


def grow(folder: Path, files: int, seed: int = 2) -> tuple[int, int]:
    """Append one short turn (a user message, a response, a tool call) to the first
    ``files`` Claude Code main-session files, going on from each file's last line; returns
    (bytes, lines) appended."""
    manifest = Manifest.load(folder)
    if manifest is None:
        raise SystemExit(f"{folder}: no {MANIFEST}; generate the corpus first")
    rng = random.Random(seed)
    words = Words(random.Random(seed), size=2000)
    added = lines = 0
    mains = [p for p in manifest.files(folder, "claude") if "subagents" not in p.parts]
    for path in mains[:files]:
        last = json.loads(path.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1])
        at = datetime.fromisoformat(last.get("timestamp", "2026-06-01T08:00:00.000Z"))
        session = Claude(rng, words, at, "grown", session=last.get("sessionId"))
        session.parent = last.get("uuid")
        turn = [*itertools.islice(session.response(call=True), 4)]
        size, count = write(path, iter(turn), math.inf, mode="ab")
        added, lines = added + size, lines + count
    return added, lines


def restore(folder: Path, manifest: Manifest) -> None:
    """Cut every file back to its generated size (undoing :func:`grow`)."""
    for name, size in manifest.sizes.items():
        path = folder / name
        if path.stat().st_size > size:
            os.truncate(path, size)


def corpus_parser(doc: str) -> argparse.ArgumentParser:
    """A command line for a corpus: its folder, sizes and seed."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--claude-mb", type=float, default=100)
    parser.add_argument("--codex-mb", type=float, default=30)
    parser.add_argument("--claude-files", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    return parser


def main() -> None:
    parser = corpus_parser(__doc__)
    parser.add_argument("--grow", type=int, metavar="FILES",
                        help="append a short turn to FILES Claude Code files of a corpus")
    args = parser.parse_args()
    if args.grow is not None:
        size, lines = grow(args.folder, args.grow, args.seed + 1)
        print(f"appended {size} bytes in {lines} lines")
        return
    if any(args.folder.iterdir() if args.folder.exists() else ()):
        raise SystemExit(f"{args.folder} is not empty")
    manifest = generate(args.folder, args.claude_mb, args.codex_mb, args.claude_files,
                        args.seed)
    print(f"{len(manifest.sizes)} files, {manifest.lines:,} lines, {manifest.bytes / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
