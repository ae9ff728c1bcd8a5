"""Crash safety, for real: ``kill -9`` an ingest at random moments, run it again, and the
database ends up identical to a clean ingest's: nothing lost, nothing doubled.

Every batch is committed together with the source's new offset and the sessions' resumable
state, so a killed run leaves the database as it was after some batch, and the next run goes
on from there.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ledger.ingest import Options, ingest
from tests.corpus import write_ledgers
from tests.helpers import ROOT, dump, rows, scratch_dir

EVENTS = 60_000
BATCH = 500  # small batches, so kills land inside files, between and during commits
KILLS = 20
SEED = 3


def start_ingest(db: Path, ledgers: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", str(db), str(ledgers), "--no-progress",
         "--batch-size", str(BATCH)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def progress(db: Path) -> list[tuple[int, int]]:
    """(offset, size) of every source, as far as the database says."""
    try:
        return [(r["offset"], r["size"]) for r in rows(db, "select * from sources")]
    except sqlite3.OperationalError:  # killed before the tables were made
        return []


def test_kill_9_at_random_moments_then_rerun_equals_a_clean_ingest() -> None:
    with scratch_dir() as tmp:  # kill -9 leaves the page cache as it is, disk or memory
        run_kills(Path(tmp))


def run_kills(tmp_path: Path) -> None:
    ledgers = tmp_path / "runs"
    write_ledgers(ledgers, EVENTS, files=4, seed=SEED)
    rng = random.Random(SEED)

    crashed = tmp_path / "crashed.db"
    kills, mid_file, finished = 0, 0, False
    while kills < KILLS:
        proc = start_ingest(crashed, ledgers)
        # From before the imports are done (killed while starting or migrating) to well into
        # the ingest; each run goes on from where the last one was killed.
        delay = rng.uniform(0.05, 1.0)
        time.sleep(delay)
        if proc.poll() is not None:
            finished = True
            break
        proc.kill()  # SIGKILL: no cleanup, no rollback, no atexit
        proc.wait()
        kills += 1
        mid_file += any(0 < offset < size for offset, size in progress(crashed))
    if not finished:
        proc = start_ingest(crashed, ledgers)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr.decode()

    clean = tmp_path / "clean.db"
    ingest(clean, [ledgers], Options(batch=BATCH))
    assert kills == KILLS, "the ingest finished before it could be killed often enough"
    assert mid_file >= KILLS // 2, f"only {mid_file} kills left a file half read"
    assert dump(crashed) == dump(clean)
