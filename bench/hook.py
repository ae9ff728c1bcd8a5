"""Benchmark: one call of ``agent-ledger hook claude-code``, as Claude Code makes it.

A transcript of ``--lines`` lines is built from the public Claude Code sample (its lines
repeated with fresh ids), then grown by ``--calls`` more tool calls, one hook call after each,
as in a live session: each call reads only the lines written since the last one. Timed two
ways, in turn: the whole process Claude Code starts (``python -m ledger hook claude-code``:
interpreter, imports, the secret scanner's rules, state, fold, database row), the resident
client (``python -S hook_client.py``, answered by ``hook serve``), and the call inside one
process (``hook_run.run``). The first call on the long transcript, with no saved state, is
timed apart (it reads everything).

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
from ledger.live import hook_client
from ledger.live.hook_run import run
from ledger.live.hook_server import socket_path

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
    body = lines(count + calls * 60)
    head, tail = body[:count], body[count:]
    transcript.write_bytes(b"".join(head))
    options = Options(budget=NO_CAPS)
    first = next(c for c in map(lambda r: call_of(r, transcript), reversed(head)) if c)
    started = time.perf_counter()
    run(json.dumps(first).encode(), db, lambda _f: options)
    cold = (time.perf_counter() - started) * 1000
    caps = ["--db", str(db), "--budget", "max_steps=off", "--budget", "max_seconds=off",
               "--budget", "max_writes=off", "--budget", "max_rounds=off",
               "--budget", "max_tool_calls=off", "--budget", "max_output_tokens=off",
               "--budget", "max_consecutive_tool_errors=off",
            "--budget", "no_progress_rounds=off"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
    full = [sys.executable, "-m", "ledger", "hook", "claude-code", *caps]
    client = [sys.executable, "-S", hook_client.__file__, str(socket_path(db)), *caps]
    server = subprocess.Popen([sys.executable, "-m", "ledger", "hook", "serve", *caps], env=env,
                              stderr=subprocess.DEVNULL)
    while not socket_path(db).exists():
        time.sleep(0.05)
    kinds: dict[str, list[float]] = {"process": [], "resident": [], "in_process": []}
    try:
        with transcript.open("ab") as f:
            for raw in tail:
                f.write(raw)
                f.flush()
                call = call_of(raw, transcript)
                if call is None:
                    continue
                stdin = json.dumps(call).encode()
                kind = min(kinds, key=lambda k: len(kinds[k]))
                started = time.perf_counter()
                if kind == "in_process":
                    run(stdin, db, lambda _f: options)
                else:
                    command = full if kind == "process" else client
                    subprocess.run(command, input=stdin, check=True, env=env,
                                   capture_output=True)
                kinds[kind].append((time.perf_counter() - started) * 1000)
                if min(len(v) for v in kinds.values()) >= calls:
                    break
    finally:
        server.terminate()
        server.wait()
    return {"lines": count, "cold_first_call_ms": round(cold, 1),
            **{kind: summary(times) for kind, times in kinds.items()}}


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
    bare = []
    for _ in range(10):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-S", "-c", "pass"], check=True)
        bare.append((time.perf_counter() - started) * 1000)
    print(json.dumps({"bare_interpreter_start": summary(bare)}))
    for count in args.lines or [5000, 100]:
        with tempfile.TemporaryDirectory() as work:
            print(json.dumps(bench(count, args.calls, Path(work))))


if __name__ == "__main__":
    main()
