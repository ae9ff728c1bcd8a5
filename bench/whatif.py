"""Benchmark: what-if budgets over a large ledger database.

Generates native ledgers (sessions interleaved, so the steps' row order is not session order),
ingests them once (the database is kept in the work folder and reused), then times
``agent-ledger what-if``'s library path under several budgets in a row, including one with every
cap off (the worst case: no session stops early, every stored step is replayed). CPU time is
printed beside wall-clock time, since a busy machine inflates the latter.

    .venv/bin/python bench/whatif.py                  # 1,000,000 steps
    .venv/bin/python bench/whatif.py --steps 100000 --dir /tmp/whatif-bench
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import time
from pathlib import Path

from ledger.analysis.whatif import Replayer, what_if
from ledger.core.budget import Budget
from ledger.core.vendors import DEFAULT_VENDOR_MAP
from ledger.db.stored import stored_sessions
from ledger.ingest.ingester import ingest

BUDGETS = (
    (),
    ("max_rounds=20",),
    ("max_rounds=off", "max_tool_calls=off", "max_output_tokens=off", "max_steps=off",
     "max_writes=off", "max_seconds=off", "max_consecutive_tool_errors=off",
     "no_progress_rounds=off"),
    ("max_output_tokens=8000", "no_progress_rounds=3"),
)
ALL_OFF = BUDGETS[2]
STEPS_PER_SESSION = 100
INTERLEAVE = 20


def session_events(rng: random.Random, sid: str, n: int, t0: float) -> list[dict[str, object]]:
    events: list[dict[str, object]] = [
        {"session": sid, "type": "start", "task_class": rng.choice(["bugfix", "docs", "refactor"]),
         "elapsed_s": 0.0}
    ]
    observation = "start"
    for i in range(1, n - 1):
        elapsed = round(i * rng.uniform(0.2, 0.8), 3)
        if rng.random() < 0.6:
            if rng.random() > 0.3:
                observation = f"obs {rng.randrange(1000)}"
            events.append({
                "session": sid, "type": "round", "tool_calls": rng.randrange(4),
                "output_tokens": rng.randrange(50, 900), "observation": observation,
                "tool_error": rng.random() < 0.2, "elapsed_s": elapsed,
            })
        else:
            action = rng.choice(["think", "read", "write", "retry"])
            events.append({"session": sid, "type": "action", "action": action,
                           "tool": "run_tests", "elapsed_s": elapsed})
    events.append({"session": sid, "type": "end", "outcome": "task_complete",
                   "vendor_stop": "end_turn", "elapsed_s": float(n)})
    return events


def generate(folder: Path, steps: int, seed: int = 4) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    sessions = steps // STEPS_PER_SESSION
    for group in range(0, sessions, INTERLEAVE):
        batch = [
            session_events(rng, f"s{n:07d}", STEPS_PER_SESSION, 0.0)
            for n in range(group, min(group + INTERLEAVE, sessions))
        ]
        with (folder / f"run-{group:07d}.jsonl").open("w", encoding="utf-8") as f:
            for i in range(STEPS_PER_SESSION):
                for events in batch:
                    f.write(json.dumps(events[i]) + "\n")


def build(work: Path, steps: int) -> Path:
    db = work / f"whatif-{steps}.db"
    if db.exists():
        return db
    ledgers = work / f"ledgers-{steps}"
    generate(ledgers, steps)
    started = time.perf_counter()
    ingest(db, [ledgers])
    print(f"ingested {steps:,} steps in {time.perf_counter() - started:.1f} s")
    return db


def time_budget(db: Path, pairs: tuple[str, ...]) -> tuple[float, float, int, int]:
    """Wall-clock and CPU seconds of one what-if, its sessions and changed sessions."""
    conn = sqlite3.connect(db)
    try:
        replayer = Replayer(
            lambda base: Budget.from_assignments(pairs, base), DEFAULT_VENDOR_MAP
        )
        started, cpu = time.perf_counter(), time.process_time()
        report = what_if(stored_sessions(conn), replayer)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        return wall, cpu, report.sessions, len(report.changes)
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/agent-ledger-bench"))
    args = parser.parse_args()
    db = build(args.dir, args.steps)
    (stored,) = sqlite3.connect(db).execute("select count(*) from steps").fetchone()
    print(f"{db}: {stored:,} stored steps")
    for pairs in BUDGETS:
        wall, cpu, sessions, changed = time_budget(db, pairs)
        label = "every cap off" if pairs == ALL_OFF else (" ".join(pairs) or "(stored budget)")
        print(f"what-if {label}: {sessions:,} sessions, {changed:,} changed, "
              f"{wall:.2f} s ({cpu:.2f} s CPU)")


if __name__ == "__main__":
    main()
