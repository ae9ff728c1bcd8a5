"""A ledger whose text carries direction controls: an override that shows "invoice.exe.txt"
backwards, and an isolate around a tool name. Pages must show them as ``<U+202E>``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ledger.ingest.ingester import ingest

BIDI = "invoice\u202etxt.exe"
ISOLATE = "\u2066tool\u2069"
SESSION = "bidi\u202e-1"


def events() -> list[dict[str, Any]]:
    base = {"session": SESSION}
    ts = iter(f"2026-11-28T10:00:{n:02d}Z" for n in range(10))
    return [
        {**base, "ts": next(ts), "type": "start", "task_class": f"class{BIDI}", "detail": BIDI},
        {**base, "ts": next(ts), "type": "round", "tool_calls": [{"name": ISOLATE}],
         "tool": ISOLATE, "observation": BIDI, "output_tokens": 5},
        {**base, "ts": next(ts), "type": "round", "vendor_stop": BIDI},
    ]


def build(folder: Path) -> Path:
    """The ledger written and ingested into ``folder``/ledger.db; the database's path."""
    ledger = folder / "bidi.jsonl"
    ledger.write_text("".join(json.dumps(e) + "\n" for e in events()), encoding="utf-8")
    db_path = folder / "ledger.db"
    ingest(db_path, [ledger])
    return db_path
