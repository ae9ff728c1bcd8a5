"""Generated ledgers for the tests that need volume: native and gate files, seeded, with the
odd bad line and blank line mixed in, as real agents write them."""

from __future__ import annotations

import json
import random
from pathlib import Path

TOOLS = ("read_file", "run_tests", "apply_patch", "grep", "list_dir")
OBSERVATIONS = ("ok", "1 failed", "2 failed", "no match", "patched", "timeout")
ACTIONS = ("think", "read", "write", "retry")


def native_lines(rng: random.Random, prefix: str, events: int, live: int = 8) -> list[str]:
    """About ``events`` native events for interleaved sessions named ``prefix-N``."""
    lines: list[str] = []
    open_sessions: list[str] = []
    started = 0
    clock = 1_800_000_000.0
    while len(lines) < events:
        if len(open_sessions) < live:
            started += 1
            session = f"{prefix}-{started:05d}"
            open_sessions.append(session)
            event: dict = {"session": session, "type": "start", "task_class": prefix}
        else:
            session = rng.choice(open_sessions)
            roll = rng.random()
            if roll < 0.02:
                open_sessions.remove(session)
                event = {"session": session, "type": "end",
                         "outcome": rng.choice(["task_complete", "user_cancel"])}
            elif roll < 0.55:
                tool = rng.choice(TOOLS)
                event = {
                    "session": session, "type": "round",
                    "tool_calls": [{"name": tool}] * rng.randint(0, 3),
                    "output_tokens": rng.randint(0, 900), "tool": tool,
                    "observation": rng.choice(OBSERVATIONS),
                    "tool_error": rng.random() < 0.2,
                }
                if rng.random() < 0.01:
                    event["vendor_stop"] = rng.choice(["end_turn", "mystery_stop"])
            else:
                action = rng.choice(ACTIONS)
                event = {"session": session, "type": "action", "action": action,
                         "tool": rng.choice(TOOLS), "detail": f"tool:{rng.choice(TOOLS)}"}
        clock += rng.random() * 3
        event["ts"] = f"2027-01-15T{int(clock) % 86400 // 3600:02d}:00:00Z"
        event["elapsed_s"] = round(rng.random() * 60, 3)
        lines.append(json.dumps(event))
        if rng.random() < 0.003:
            lines.append('{"session": "' + session + '", "type": "round", "output_tok')
        if rng.random() < 0.002:
            lines.append("")
    return lines


def gate_lines(rng: random.Random, events: int) -> list[str]:
    """About ``events`` gate checkpoints: runs of 1..12 steps, each run restarting at step 1."""
    lines: list[str] = []
    while len(lines) < events:
        writes, elapsed = 0, 0.0
        for step in range(1, rng.randint(2, 12)):
            action = rng.choice(ACTIONS)
            writes += action == "write"
            elapsed += round(rng.random() * 6, 3)
            lines.append(json.dumps({
                "step": step, "action": action, "detail": f"tool:{rng.choice(TOOLS)}",
                "writes": writes, "elapsed_s": round(elapsed, 3),
            }))
            if rng.random() < 0.003:
                lines.append('{"step": "three", "action": "read"}')
    return lines


def write_ledgers(root: Path, events: int, files: int = 4, seed: int = 0) -> list[Path]:
    """``files`` ledgers under ``root`` (alternately native and gate) holding ``events`` in all.

    Every file starts with a distinct line, so each has its own fingerprint.
    """
    rng = random.Random(seed)
    paths = []
    for n in range(files):
        per_file = events // files
        if n % 2 == 0:
            folder, lines = "native", native_lines(rng, f"s{n}", per_file)
        else:
            folder = "gate"
            lines = [json.dumps({"step": 1, "action": "think", "detail": f"file {n}"})]
            lines += gate_lines(rng, per_file - 1)
        path = root / folder / f"ledger-{n}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
