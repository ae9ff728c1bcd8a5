"""The raw line limit of agent logs (issue 22), in process or as a whole command.

Read every file, decode every line with the fastest JSON parser installed, insert one 7-column
row per line (file, line, offset, type, timestamp, session, bytes), all in one transaction: no
fold, no redaction, no classing, no sessions. It imports ``sqlite3`` and the parser only, so
that run as a command it is the cheapest whole process that reads the logs in Python:

    python bench/raw_lines.py DB PATH...     # files, or folders searched for *.jsonl

Beside ``ccusage`` over the same files (``bench/real_bench.py``), that command is the ceiling of
the first-ingest row: an ingest that does everything it does and more cannot be faster.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def fastest_parser() -> tuple[str, Callable[[bytes], Any]]:
    """The fastest JSON parser installed (measured: msgspec, then orjson, then the stdlib)."""
    try:
        import msgspec

        return "msgspec", msgspec.json.Decoder().decode
    except ImportError:
        pass
    try:
        import orjson

        return "orjson", orjson.loads
    except ImportError:
        return "json", json.loads


def raw_lines(paths: list[Path], db_path: Path) -> tuple[int, int]:
    """Store a row per line of ``paths`` in a new table ``lines`` of ``db_path``; returns
    (rows, bytes read). Lines that do not decode are stored too, without their fields."""
    _, parse = fastest_parser()
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE lines (file, line, offset, type, ts, session, bytes)")
    conn.execute("BEGIN")
    rows = size = 0
    for source, path in enumerate(paths):
        batch = []
        offset = 0
        with path.open("rb") as f:
            for n, line in enumerate(f, 1):
                try:
                    obj = parse(line)
                except Exception:  # noqa: BLE001 - a baseline keeps going, like ingest does
                    obj = None
                get = obj.get if isinstance(obj, dict) else {}.get
                batch.append((source, n, offset, get("type"), get("timestamp"),
                              get("sessionId"), len(line)))
                offset += len(line)
        conn.executemany("INSERT INTO lines VALUES (?, ?, ?, ?, ?, ?, ?)", batch)
        rows += len(batch)
        size += offset
    conn.execute("COMMIT")
    conn.close()
    return rows, size


def log_files(paths: list[Path]) -> list[Path]:
    """``paths``, each folder replaced by the ``*.jsonl`` files under it, in name order."""
    found: list[Path] = []
    for path in paths:
        found.extend(sorted(path.rglob("*.jsonl")) if path.is_dir() else [path])
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python bench/raw_lines.py DB PATH...", file=sys.stderr)
        return 2
    rows, size = raw_lines(log_files([Path(p) for p in argv[1:]]), Path(argv[0]))
    print(json.dumps({"rows": rows, "bytes": size}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
