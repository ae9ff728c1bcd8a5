"""Three hosts' ledgers, each ingested with its own ``--host``, and a merge of them (the
tests of ``agent-ledger merge`` and of many hosts' exports read as one)."""

from __future__ import annotations

from pathlib import Path

from ledger.db import connection, merge
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import FIXTURES, SAMPLES

SPANS = FIXTURES / "otlp" / "genai_spans.jsonl"
LOGS = FIXTURES / "otlp" / "agent_logs.jsonl"
REAL = FIXTURES / "real-agent-logs"
#: Three hosts, two of them with the same file (its sessions and source ids meet in the merge).
OVERLAPPING = {"host-a": [SAMPLES, SPANS], "host-b": [SPANS, LOGS], "host-c": [REAL]}
#: Three hosts with files of their own.
DISJOINT = {"host-a": [SAMPLES], "host-b": [SPANS, LOGS], "host-c": [REAL]}


def host_dbs(folder: Path, hosts: dict[str, list[Path]]) -> list[Path]:
    paths = []
    for host, inputs in hosts.items():
        path = folder / f"{host}.db"
        ingest(path, inputs, Options(host=host))
        paths.append(path)
    return paths


def merge_into(target: Path, sources: list[Path]) -> list[merge.Merged]:
    db = connection.connect(target)
    try:
        done = []
        for path in sources:
            with merge.open_source(path, target) as source:
                done.append(merge.merge(db, source))
        merge.finish(db, changed=any(m.sessions for m in done))
        return done
    finally:
        db.conn.close()
