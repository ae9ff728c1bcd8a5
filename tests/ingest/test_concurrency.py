"""Concurrency, for real: two ingest processes on one database at once, on overlapping files,
while Datasette reads it.

Both finish; the database equals one clean ingest of all the files (no file read twice, no
batch lost); Datasette never sees "database is locked" and always sees a consistent database,
because every batch (rows, sessions, resumable state, offset) is one transaction and WAL lets
readers see the last committed one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from datasette.app import Datasette

from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.corpus import write_ledgers
from tests.helpers import ROOT, dump, scratch_dir

BATCH = 200
#: Seconds to wait at most for the ingests to get somewhere: only a hang gets near it.
HANG_S = 120

#: One read transaction (one statement) that must hold after every committed batch.
CONSISTENCY = """
select
  (select coalesce(sum(events), 0) from sessions) as events,
  (select count(*) from steps) as steps,
  (select count(*) from sessions) as sessions,
  (select count(*) from fold_state) as states,
  (select count(*) from steps t join sources s using (source_id)
    where t.source_offset >= s.offset) as steps_past_offset,
  (select count(*) from ingest_errors e join sources s using (source_id)
    where e.offset >= s.offset) as errors_past_offset
"""


def start_ingest(db: Path, paths: list[Path], gate: Path) -> subprocess.Popen[bytes]:
    """An ingest that waits after each commit for the file ``gate`` and takes it away
    (AGENT_LEDGER_TEST_BATCH_GATE, test only): the reader makes it after each of its looks,
    so each ingest commits at most a batch a look, and both are at work through forty looks
    and more (each commits 40 batches of its own at least), however slow or busy the reader's
    process and however fast theirs (the bars below)."""
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", str(db), *map(str, paths), "--no-progress",
         "--batch-size", str(BATCH), "--json"],
        cwd=ROOT, env={**os.environ, "AGENT_LEDGER_TEST_BATCH_GATE": str(gate)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def wait_for_tables(db: Path, procs: list[subprocess.Popen[bytes]], gates: list[Path]) -> None:
    hang = time.monotonic() + HANG_S
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < hang, f"no source committed in {HANG_S} s"
        for gate in gates:
            gate.touch()
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                if conn.execute("select count(*) from sqlite_master where name = 'sources' "
                                "and (select count(*) from sources) > 0").fetchone()[0]:
                    return
            finally:
                conn.close()
        except sqlite3.OperationalError:
            pass  # not created yet
        time.sleep(0.01)


async def read_while_running(
    db: Path, procs: list[subprocess.Popen[bytes]], gates: list[Path]
) -> list[dict]:
    """Datasette's own client, as a browser would use it, for as long as the ingests run,
    letting each through its gate once after each look."""
    # (its one-second limit on a query is wall-clock time: this process kept off the CPU
    # mid-query got "SQL Interrupted", which has nothing to do with what is tested here)
    ds = Datasette([str(db)], settings={"sql_time_limit_ms": HANG_S * 1000})
    seen: list[dict] = []
    hang = time.monotonic() + HANG_S
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < hang, f"no batch committed in {HANG_S} s"
        if len(seen) > 1 and seen[-1] != seen[-2]:
            hang = time.monotonic() + HANG_S  # (they get on: a slow reader is no hang)
        for gate in gates:
            gate.touch()
        for path in (f"/{db.stem}.json", f"/{db.stem}/sessions.json?_size=5"):
            page = await ds.client.get(path)
            assert page.status_code == 200, page.text
        answer = await ds.client.get(f"/{db.stem}.json", params={"sql": CONSISTENCY,
                                                                 "_shape": "array"})
        assert answer.status_code == 200, answer.text
        seen.append(answer.json()[0])
    return seen


@pytest.mark.parametrize("events", [24_000, 48_000], ids=["one-process", "workers"])
def test_two_ingests_and_a_reader_at_once(events: int) -> None:
    """With 48,000 events each ingest has over 4 MB of new files and starts workers, which
    fold the same files in both: a batch is written by whichever process claims the file or
    gets to the batch first, and the other goes on from there itself."""
    with scratch_dir() as tmp:
        root = Path(tmp)
        files = write_ledgers(root / "runs", events, files=6, seed=5)
        db = root / "ledger.db"
        # Both start on the same two files, then go their own ways.
        gates = [root / "gate-0", root / "gate-1"]
        procs = [start_ingest(db, files[2:4] + files[:2], gates[0]),
                 start_ingest(db, files[2:], gates[1])]
        try:
            wait_for_tables(db, procs, gates)
            seen = asyncio.run(read_while_running(db, procs, gates))
        finally:  # (a failed test leaves no ingest waiting at its gate)
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        summaries = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()
            assert b"locked" not in err
            summaries.append(json.loads(out))
        # Every line was consumed once, by one process or the other.
        lines = sum(f.read_bytes().count(b"\n") for f in files)
        assert sum(s["lines"] for s in summaries) == lines
        assert all(s["lines"] > 0 for s in summaries)
        assert any(s["workers"] for s in summaries) == (events > 24_000)
        assert len(seen) >= 5, "the reader hardly ran while the ingests did"
        for snapshot in seen:
            assert snapshot["events"] == snapshot["steps"]
            assert snapshot["sessions"] == snapshot["states"]
            assert (snapshot["steps_past_offset"], snapshot["errors_past_offset"]) == (0, 0)
        assert len({s["steps"] for s in seen}) > 1, "the reader never saw the data grow"

        clean = root / "clean.db"
        ingest(clean, files, Options(batch=BATCH))
        assert dump(db) == dump(clean)
