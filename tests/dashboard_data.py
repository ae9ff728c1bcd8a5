"""A ledger database for the dashboard tests: the samples, hostile text and a long session.

Hostile strings go everywhere ledger text can go (session id, task class, tool, detail,
observation, vendor stop string); each would set ``window.__pwned`` if it ever ran.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ledger.ingest.ingester import ingest
from tests.helpers import SAMPLES

SCRIPT = "<script>window.__pwned = 'script'</script>"
IMG = "<img src=x onerror=\"window.__pwned = 'img'\">"
JS_URL = "javascript:window.__pwned = 'href'"
SVG = "<svg onload=\"window.__pwned = 'svg'\"></svg>"
PAYLOADS = (SCRIPT, IMG, JS_URL, SVG)

#: A session id with a slash, a dot and markup: it must survive URLs and HTML.
XSS_SESSION = f"xss/{IMG}.json"
XSS_CLASS = f"evil{SCRIPT}"
LONG_SESSION = "long-1"
LONG_STEPS = 1100


def hostile_events() -> list[dict[str, Any]]:
    base = {"session": XSS_SESSION}
    ts = iter(f"2026-11-28T10:00:{n:02d}Z" for n in range(60))
    events: list[dict[str, Any]] = [
        {**base, "ts": next(ts), "type": "start", "task_class": XSS_CLASS, "detail": SCRIPT},
    ]
    for _ in range(2):
        events.append({
            **base, "ts": next(ts), "type": "round", "tool_calls": [{"name": IMG}], "tool": IMG,
            "observation": IMG, "output_tokens": 150, "tool_error": True,
        })
    for _ in range(4):
        events.append({
            **base, "ts": next(ts), "type": "action", "action": "retry", "tool": JS_URL,
            "detail": SCRIPT,
        })
    events.append({**base, "ts": next(ts), "type": "round", "vendor_stop": JS_URL})
    other = {"session": "xss-2", "task_class": XSS_CLASS}
    events.append({**other, "ts": next(ts), "type": "round", "vendor_stop": SVG})
    events.append({**other, "ts": next(ts), "type": "round", "vendor_stop": SCRIPT})
    return events


def long_events() -> list[dict[str, Any]]:
    """One native session of LONG_STEPS steps (the timeline pages through it)."""
    events = [{"session": LONG_SESSION, "type": "start", "task_class": "long", "elapsed_s": 0}]
    for n in range(1, LONG_STEPS):
        events.append({
            "session": LONG_SESSION, "type": "action", "action": "read", "tool": "read_file",
            "detail": f"file {n}", "elapsed_s": n * 0.01,
            "observation": "same" if n > LONG_STEPS - 4 else f"obs {n}",
        })
    return events


def write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def build(folder: Path) -> Path:
    """Copy the samples into ``folder``, add the hostile and long ledgers, ingest; the DB."""
    ledgers = folder / "ledgers"
    shutil.copytree(SAMPLES, ledgers)
    write(ledgers / "hostile" / "xss.jsonl", hostile_events())
    write(ledgers / "long" / "long.jsonl", long_events())
    db_path = folder / "ledger.db"
    ingest(db_path, [ledgers])
    return db_path
