"""Benchmark: one call of the live brake, as Claude Code makes it.

A transcript of ``--lines`` lines is built from the public Claude Code sample (its lines
repeated with fresh ids), then grown by more tool calls, one hook call after each, as in a
live session: each call reads only the lines written since the last one. Each kind of call
is timed in turn, after the same appends:

``plain``       a fresh ``agent-ledger-hook claude-code`` process (what ``hook install``
                writes; ``python -c 'from ledger.live.hook_main import main; main()'`` when the
                script is not installed): interpreter, imports, state, fold, database row;
``cli``         a fresh ``agent-ledger hook claude-code`` process (the whole command line;
                ``python -m ledger``), fewer calls: it is the slow one;
``resident``    the client of ``hook serve`` (``python -S hook_client.py``);
``in_process``  ``hook_run.run`` inside this process.

The first call on the transcript, with no saved state, is timed apart (it reads everything).
Processes are started with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed), as an
installed package runs; a first untimed call of each kind writes the caches.

    .venv/bin/python bench/hook.py                       # 5,000 and 100 lines, 40 calls each
    .venv/bin/python bench/hook.py --lines 5000 --calls 100
    taskset -c 1 .venv/bin/python bench/hook.py          # pinned to one core
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def commands(db: Path) -> dict[str, list[str]]:
    caps = ["--db", str(db)] + [f"--budget={key}=off" for key in Budget.keys()]
    script = shutil.which("agent-ledger-hook")
    plain = [script] if script else [sys.executable, "-c", LIGHT]
    return {
        "plain": [*plain, "claude-code", *caps],
        "cli": [sys.executable, "-m", "ledger", "hook", "claude-code", *caps],
        "resident": [sys.executable, "-S", hook_client.__file__, str(socket_path(db)), *caps],
    }


LIGHT = "from ledger.live.hook_main import main; main()"
#: Of every ``CLI_EVERY`` calls, one is timed as ``cli`` (it takes ten times as long).
CLI_EVERY = 4


def bench(count: int, calls: int, work: Path) -> dict[str, Any]:
    transcript, db = work / "t.jsonl", work / "ledger.db"
    body = lines(count + calls * 120)
    head, tail = body[:count], body[count:]
    transcript.write_bytes(b"".join(head))
    options = Options(budget=NO_CAPS)
    first = next(c for c in map(lambda r: call_of(r, transcript), reversed(head)) if c)
    started = time.perf_counter()
    run(json.dumps(first).encode(), db, lambda _f: options)
    cold = (time.perf_counter() - started) * 1000
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "plugins")])
    argv = commands(db)
    server = subprocess.Popen(
        [sys.executable, "-m", "ledger", "hook", "serve", *argv["cli"][5:]], env=env,
        stderr=subprocess.DEVNULL,
    )
    while not socket_path(db).exists():
        time.sleep(0.05)
    for command in argv.values():  # untimed: bytecode caches written, the server warm
        subprocess.run(command, input=json.dumps(first).encode(), env=env, capture_output=True)
    kinds: dict[str, list[float]] = {"plain": [], "cli": [], "resident": [], "in_process": []}
    wanted = {"plain": calls, "cli": max(1, calls // CLI_EVERY), "resident": calls,
              "in_process": calls}
    turn = 0
    try:
        with transcript.open("ab") as f:
            for raw in tail:
                f.write(raw)
                f.flush()
                call = call_of(raw, transcript)
                if call is None:
                    continue
                stdin = json.dumps(call).encode()
                kind = _next_kind(kinds, wanted, turn)
                turn += 1
                if kind is None:
                    break
                started = time.perf_counter()
                if kind == "in_process":
                    run(stdin, db, lambda _f: options)
                else:
                    subprocess.run(argv[kind], input=stdin, check=True, env=env,
                                   capture_output=True)
                kinds[kind].append((time.perf_counter() - started) * 1000)
    finally:
        server.terminate()
        server.wait()
    return {"lines": count, "cold_first_call_ms": round(cold, 1),
            **{kind: summary(times) for kind, times in kinds.items()}}


def _next_kind(kinds: dict[str, list[float]], wanted: dict[str, int], turn: int) -> str | None:
    """The kinds in turn (``cli`` one turn in ``CLI_EVERY``), each until it has its calls."""
    order = ["plain", "resident", "in_process"] + (["cli"] if turn % CLI_EVERY == 0 else [])
    missing = [k for k in order if len(kinds[k]) < wanted[k]] or [
        k for k in kinds if len(kinds[k]) < wanted[k]
    ]
    return min(missing, key=lambda k: len(kinds[k]) / wanted[k]) if missing else None


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
    for name, flags in (("bare_interpreter_start", ["-S"]), ("interpreter_with_site", [])):
        bare = []
        for _ in range(10):
            started = time.perf_counter()
            subprocess.run([sys.executable, *flags, "-c", "pass"], check=True)
            bare.append((time.perf_counter() - started) * 1000)
        print(json.dumps({name: summary(bare)}))
    for count in args.lines or [5000, 100]:
        with tempfile.TemporaryDirectory() as work:
            print(json.dumps(bench(count, args.calls, Path(work))))


if __name__ == "__main__":
    main()
