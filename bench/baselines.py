"""The two baselines agent-ledger's ingest is measured against, in the same run.

* :func:`raw_limit`: what this machine can do at best: read the same files, parse every record
  with the fastest JSON parser installed, and insert one row per event into a table shaped like
  ``steps`` (the same columns, the same primary key, ``WITHOUT ROWID``) with ``executemany``, one
  transaction per file, each file's rows in key order, as ingest writes its batches. (In file
  order the interleaved sessions make B-tree inserts jump from page to page; in one
  transaction of 1M rows SQLite's 2 MB page cache spills to the WAL again and again. Either
  makes the "limit" disk-bound and slower than ingest itself: 54.6 s and 25.2 s of wall-clock
  time for 11.4 s of CPU, against ingest's 20.7 s.) No fold, no redaction, no hashing, no
  sessions: only read, parse and insert.
* :func:`sqlite_utils_lines`: the input of the user's alternative, ``sqlite-utils insert DB
  steps FILE --nl``: the JSONL records of the corpus in one file (lines sqlite-utils would
  crash on are left out, since it stops at the first one; traces are one document per file
  and are not JSONL).

``raw_limit(..., shaped=True)`` is not a baseline the issue asks for, but a reference the
report gives beside it: the raw limit with the tricks ingest uses that are not about
folding: binding None without the adapter search
(``ledger.db.connection.bind_none_directly``), pages of 16 KB
(``ledger.db.connection.PAGE_SIZE``) and the process settings of ``ledger.ingest.bulk.bulk_work``
(the garbage collector's young pass run rarely, the C heap's top kept for reuse).
Python's ``sqlite3`` binds a None for about 0.3 us, and the raw limit's rows hold about eleven
(no hashes, no counters, no stop), so this shows how much of ingest's ratio to the raw limit
those tricks account for.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any

from raw_lines import fastest_parser

from ledger.core.fold import STEP_COLUMNS
from ledger.db.connection import PAGE_SIZE, bind_none_directly
from ledger.ingest.bulk import bulk_work

COLUMNS = STEP_COLUMNS  # the raw limit's rows below are in this order


def ledger_files(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*") if p.suffix in (".jsonl", ".json"))


def _records(path: Path, parse: Callable[[bytes], Any]) -> Iterator[tuple[int, int, Any]]:
    """(line, offset, parsed object) for each record; unparseable lines are skipped."""
    if path.suffix == ".json":
        doc = parse(path.read_bytes())
        for n, item in enumerate(doc.get("rounds", ()), 1):
            yield n, 0, item
        return
    offset = 0
    with path.open("rb") as f:
        for n, line in enumerate(f, 1):
            try:
                yield n, offset, parse(line)
            except Exception:  # noqa: BLE001 - a baseline keeps going, like ingest does
                pass
            offset += len(line)


_KEY = itemgetter(0, 1)


def raw_limit(corpus: Path, db_path: Path, shaped: bool = False) -> int:
    """Read, parse and insert every event of ``corpus``; returns the rows inserted.
    ``shaped``: with ingest's tricks (a reference, see above; each stage of the benchmark is
    a process of its own, so the plain raw limit never has None's adapter registered)."""
    if shaped:
        bind_none_directly()
        with bulk_work():
            return _raw_limit(corpus, db_path, PAGE_SIZE)
    return _raw_limit(corpus, db_path)


def _raw_limit(corpus: Path, db_path: Path, page_size: int | None = None) -> int:
    _, parse = fastest_parser()
    conn = sqlite3.connect(db_path, isolation_level=None)
    if page_size:
        conn.execute(f"PRAGMA page_size = {page_size}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        f"CREATE TABLE steps ({', '.join(COLUMNS)}, PRIMARY KEY (session_id, idx)) WITHOUT ROWID"
    )
    sql = f"INSERT INTO steps VALUES ({', '.join('?' for _ in COLUMNS)})"
    count = 0
    for source, path in enumerate(ledger_files(corpus)):
        source_id = f"s{source}"
        rows = []
        for line, offset, obj in _records(path, parse):
            if not isinstance(obj, dict):
                continue
            get = obj.get
            calls = get("tool_calls")
            rows.append((
                get("session") or source_id, line, get("type"), get("tool"),
                get("detail"), len(calls) if isinstance(calls, list) else calls,
                get("output_tokens"), get("tool_error"), None, get("vendor_stop"),
                get("outcome"), get("ts"), get("elapsed_s"), None, get("step"), None, None,
                None, get("writes"), None, 0, source_id, line, offset, 0,
                None, None, None, None, get("model"), None, None, None,
            ))
        rows.sort(key=_KEY)  # key order, as ingest writes its batches
        conn.execute("BEGIN")  # one transaction per file, as ingest commits per batch
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
        count += len(rows)
    conn.close()
    return count


def sqlite_utils_lines(corpus: Path, out: Path) -> tuple[int, int]:
    """Write the corpus's valid JSONL records to ``out``; returns (records, bytes)."""
    records = 0
    with out.open("wb") as f:
        for path in ledger_files(corpus):
            if path.suffix != ".jsonl":
                continue
            for line in path.open("rb"):
                try:
                    json.loads(line, parse_constant=_refuse)
                except ValueError:
                    continue
                f.write(line)
                records += 1
    return records, out.stat().st_size


def _refuse(name: str) -> None:
    raise ValueError(name)
