"""Benchmark: one call of ``agent-ledger hook claude-code``, as Claude Code makes it.

A transcript of ``--lines`` lines is built from the public Claude Code sample (its lines
repeated with fresh ids), then grown by ``--calls`` more tool calls, one hook call after each,
as in a live session: each call reads only the lines written since the last one. Timed two
ways: the whole process Claude Code starts (``python -m ledger hook claude-code``: interpreter,
imports, state, fold, database row), and the call inside one process (``hook_run.run``). The
first call on the long transcript, with no saved state, is timed apart (it reads everything).

    .venv/bin/python bench/hook.py                       # 5,000 and 100 lines, 40 calls each
    .venv/bin/python bench/hook.py --lines 5000 --calls 100
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ledger.core.budget import Budget
from ledger.ingest.options import Options
from ledger.live.hook_run import run

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = (ROOT / "tests/fixtures/real-agent-logs"
          / "03_claude_code_main_session_tail_lines1781-1863_v2.1.39.jsonl")
NO_CAPS = Budget(**{key: None for key in Budget.keys()})


def renamed(obj: Any, k: int) -> Any:
    """A line with every id made unique to copy ``k`` (uuids, response and tool call ids)."""
    if isinstance(obj, dict):
        return {
            key: f"{value}-{k}" if key in ("uuid", "parentUuid", "id", "tool_use_id", "requestId")
            and isinstance(value, str) else renamed(value, k)
            for key, value in obj.items()
        }
    if isinstance(obj, list):
        return [renamed(v, k) for v in obj]
    return obj


def lines(count: int) -> list[bytes]:
    sample = [json.loads(x) for x in SAMPLE.read_bytes().splitlines() if x.strip()]
    out: list[bytes] = []
    k = 0
    while len(out) < count:
        out.extend(json.dumps(renamed(x, k)).encode() + b"\n" for x in sample)
        k += 1
    return out[:count]


def call_of(raw: bytes, transcript: Path) -> dict[str, Any] | None:
    obj = json.loads(raw)
    if obj.get("type") != "assistant":
        return None
    for block in obj["message"].get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            return {"hook_event_name": "PreToolUse", "session_id": obj["sessionId"],
                    "transcript_path": str(transcript), "cwd": obj.get("cwd"),
                    "tool_name": block["name"], "tool_input": block["input"],
                    "tool_use_id": block["id"]}
    return None


def bench(count: int, calls: int, work: Path) -> dict[str, Any]:
    transcript, db = work / "t.jsonl", work / "ledger.db"
    body = lines(count + calls * 20)
    head, tail = body[:count], body[count:]
    transcript.write_bytes(b"".join(head))
    options = Options(budget=NO_CAPS)
    first = next(c for c in map(lambda r: call_of(r, transcript), reversed(head)) if c)
    started = time.perf_counter()
    run(json.dumps(first).encode(), db, lambda _f: options)
    cold = (time.perf_counter() - started) * 1000
    command = [sys.executable, "-m", "ledger", "hook", "claude-code", "--db", str(db),
               "--budget", "max_steps=off", "--budget", "max_seconds=off",
               "--budget", "max_writes=off", "--budget", "max_rounds=off",
               "--budget", "max_tool_calls=off", "--budget", "max_output_tokens=off",
               "--budget", "max_consecutive_tool_errors=off",
               "--budget", "no_progress_rounds=off"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
    process, inside = [], []
    with transcript.open("ab") as f:
        for raw in tail:
            f.write(raw)
            f.flush()
            call = call_of(raw, transcript)
            if call is None:
                continue
            stdin = json.dumps(call).encode()
            if len(process) <= len(inside):
                started = time.perf_counter()
                subprocess.run(command, input=stdin, check=True, env=env, capture_output=True)
                process.append((time.perf_counter() - started) * 1000)
            else:
                started = time.perf_counter()
                run(stdin, db, lambda _f: options)
                inside.append((time.perf_counter() - started) * 1000)
            if len(inside) >= calls:
                break
    return {"lines": count, "cold_first_call_ms": round(cold, 1),
            "process": summary(process), "in_process": summary(inside)}


def summary(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {"calls": len(times), "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)], 1),
            "max_ms": round(times[-1], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, action="append",
                        help="Transcript length (repeatable; default 5000 and 100).")
    parser.add_argument("--calls", type=int, default=40, help="Timed calls of each kind.")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}")
    for count in args.lines or [5000, 100]:
        with tempfile.TemporaryDirectory() as work:
            print(json.dumps(bench(count, args.calls, Path(work))))


if __name__ == "__main__":
    main()
