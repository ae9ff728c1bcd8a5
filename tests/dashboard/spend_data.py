"""A ledger database with money in it, for the dashboard's spend views.

Three sessions under ``max_cost = 1``: ``paid-1`` (refactor) spends $0.50 a round, sees one
observation three times (a no-progress run: $1.00 after its first sight) and retries three
times (a storm: retries carry no cost); the budget stops it at its second round ($1.00), and
its third ($0.50) is spent after the stop. ``paid-2`` (docs) spends $0.25 twice, a day later.
``free-1`` (docs) has rounds and no cost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ledger.core.budget import Budget
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options

BUDGET = Budget(max_cost=1.0)
STOPPED = "paid-1"


def events() -> list[dict[str, Any]]:
    one = {"session": STOPPED}
    found: list[dict[str, Any]] = [
        {**one, "type": "start", "task_class": "refactor", "ts": "2026-11-27T09:00:00Z"},
    ]
    for n in range(3):
        found.append({**one, "type": "round", "cost": 0.5, "observation": "same",
                      "ts": f"2026-11-27T09:00:0{n + 1}Z"})
    for n in range(3):
        found.append({**one, "type": "action", "action": "retry", "tool": "pytest",
                      "ts": f"2026-11-27T09:01:0{n}Z"})
    two = {"session": "paid-2"}
    found.append({**two, "type": "start", "task_class": "docs", "ts": "2026-11-28T09:00:00Z"})
    found += [{**two, "type": "round", "cost": 0.25, "ts": f"2026-11-28T09:00:0{n + 1}Z"}
              for n in range(2)]
    free = {"session": "free-1"}
    found.append({**free, "type": "start", "task_class": "docs", "ts": "2026-11-28T10:00:00Z"})
    found.append({**free, "type": "round", "output_tokens": 10, "ts": "2026-11-28T10:00:01Z"})
    return found


def build(folder: Path) -> Path:
    """The ledger written and ingested into ``folder``/ledger.db; the database's path."""
    ledger = folder / "spend" / "run.jsonl"
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text("".join(json.dumps(e) + "\n" for e in events()), encoding="utf-8")
    db_path = folder / "ledger.db"
    ingest(db_path, [ledger], Options(budget=BUDGET))
    return db_path
