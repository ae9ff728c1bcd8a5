"""Crash safety, for real: ``kill -9`` an ingest at random moments, run it again, and the
database ends up identical to a clean ingest's: nothing lost, nothing doubled.

Every batch is committed together with the source's new offset and the sessions' resumable
state, so a killed run leaves the database as it was after some batch, and the next run goes
on from there. With workers (the default for new files), the killed process is the writer:
its workers, folding ahead, find their pipe closed and end.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.corpus import write_ledgers
from tests.helpers import ROOT, dump, rows, scratch_dir

EVENTS = 60_000
BATCH = 500  # small batches, so kills land inside files, between and during commits
KILLS = 20
STARTUP_KILLS = 4
SEED = 3


def start_ingest(db: Path, ledgers: Path, jobs: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", str(db), str(ledgers), "--no-progress",
         "--batch-size", str(BATCH), "--jobs", jobs],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def progress(db: Path) -> list[tuple[int, int]]:
    """(offset, size) of every source, as far as the database says."""
    try:
        return [(r["offset"], r["size"]) for r in rows(db, "select * from sources")]
    except sqlite3.OperationalError:  # killed before the tables were made
        return []


def bytes_read(db: Path) -> int:
    return sum(offset for offset, _ in progress(db))


@pytest.mark.parametrize("jobs", ["0", "2"], ids=["one-process", "workers"])
def test_kill_9_at_random_moments_then_rerun_equals_a_clean_ingest(jobs: str) -> None:
    with scratch_dir() as tmp:  # kill -9 leaves the page cache as it is, disk or memory
        run_kills(Path(tmp), jobs)


def run_kills(tmp_path: Path, jobs: str) -> None:
    ledgers = tmp_path / "runs"
    total = sum(p.stat().st_size for p in write_ledgers(ledgers, EVENTS, files=4, seed=SEED))
    rng = random.Random(SEED)
    # Some kills at random moments of start-up (imports, creating and migrating the
    # database, starting workers), then kills at random points of the work: once the
    # committed bytes pass a random mark and this run has committed a batch of its own, after
    # a random few milliseconds more (mid-batch, mid-commit, between). The marks stop at
    # three quarters of the bytes, so that however fast ingest gets, a quarter of the work
    # (15,000 events) is left to kill it in. (A start-up kill as late as 0.8 s once let an
    # ingest with workers read every file, and every later kill land in a start-up.)
    moments = [("time", rng.uniform(0.05, 0.3)) for _ in range(STARTUP_KILLS)]
    moments += [("bytes", mark) for mark in sorted(rng.uniform(0.0, 0.75) * total
                                                   for _ in range(KILLS - STARTUP_KILLS))]
    crashed = tmp_path / "crashed.db"
    kills, mid_file = 0, 0
    for kind, mark in moments:
        proc = start_ingest(crashed, ledgers, jobs)
        if kind == "time":
            time.sleep(mark)
        else:
            floor = bytes_read(crashed)
            while bytes_read(crashed) < max(mark, floor + 1) and proc.poll() is None:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.05))
        assert proc.poll() is None, "the ingest finished before it could be killed"
        proc.kill()  # SIGKILL: no cleanup, no rollback, no atexit
        proc.wait()
        kills += 1
        mid_file += any(0 < offset < size for offset, size in progress(crashed))
    proc = start_ingest(crashed, ledgers, jobs)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr.decode()

    clean = tmp_path / "clean.db"
    ingest(clean, [ledgers], Options(batch=BATCH))
    assert kills == KILLS
    assert mid_file >= KILLS // 2, f"only {mid_file} kills left a file half read"
    assert dump(crashed) == dump(clean)
