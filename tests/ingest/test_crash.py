"""Crash safety, for real: ``kill -9`` an ingest at random moments, run it again, and the
database ends up identical to a clean ingest's: nothing lost, nothing doubled.

Every batch is committed together with the source's new offset and the sessions' resumable
state, so a killed run leaves the database as it was after some batch, and the next run goes
on from there. With workers (the default for new files), the killed process is the writer:
its workers, folding ahead, find their pipe closed and end.
"""

from __future__ import annotations

import os
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
POLL = 0.005  # seconds between two looks at the database
HANG_S = 120  # seconds a run may take to get somewhere: only a hang gets near it


def start_ingest(db: Path, ledgers: Path, jobs: str, gate: Path | None = None,
                 ) -> subprocess.Popen[bytes]:
    """An ingest; with ``gate``, one that waits after each commit for the file ``gate``
    (AGENT_LEDGER_TEST_BATCH_GATE, test only) and takes it away before it goes on."""
    env = dict(os.environ)
    if gate is not None:
        gate.unlink(missing_ok=True)
        env["AGENT_LEDGER_TEST_BATCH_GATE"] = str(gate)
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", str(db), str(ledgers), "--no-progress",
         "--batch-size", str(BATCH), "--jobs", jobs],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
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
    """Why no machine is too fast (or too slow, or too busy) for this test:

    - A run to be killed goes through a gate after each commit (AGENT_LEDGER_TEST_BATCH_GATE,
      test only): it waits for a file the test makes, and takes it away. The test makes it
      (one file: one batch, however many times it is made before it is taken) once each
      time it looks at the database, so a run commits at most one batch a look, whatever the
      two processes' speeds: a test process kept off the CPU (a busy machine) holds the run
      back, instead of letting it run to its end unkilled, as a pause after each commit did.
    - Each kill comes once the test sees the committed bytes pass a mark, after letting the
      run through once more and a random wait of up to one batch as this machine does it now
      (timed on the clean ingest just before), so that kills land at any point of a batch
      (folding, writing, committing, waiting at the gate).
    - The byte marks lie one in each sixteenth of the first three quarters of the bytes, so
      most kills leave a file half read; a quarter of the work is left after the last mark.
    - A start-up kill comes at a random moment of the run's first 0.05-0.3 s, or after its
      first commit if that comes first (it then waits at the gate).
    - Every wait for an ingest to get somewhere ends when it does (proc.poll() is checked).
    """
    with scratch_dir() as tmp:  # kill -9 leaves the page cache as it is, disk or memory
        run_kills(Path(tmp), jobs)


def run_kills(tmp_path: Path, jobs: str) -> None:
    ledgers = tmp_path / "runs"
    total = sum(p.stat().st_size for p in write_ledgers(ledgers, EVENTS, files=4, seed=SEED))
    clean = tmp_path / "clean.db"
    started = time.monotonic()
    lines = ingest(clean, [ledgers], Options(batch=BATCH)).lines
    batch_time = (time.monotonic() - started) / -(-lines // BATCH)
    rng = random.Random(SEED)
    # Some kills at random moments of start-up (imports, creating and migrating the
    # database, starting workers), then kills at random points of the work: once the
    # committed bytes pass a random mark and this run has committed a batch of its own, after
    # a random part of a batch's time more (mid-batch, mid-commit, between). One mark in each
    # sixteenth of the first three quarters of the bytes: a quarter of the work (15,000
    # events) is left to kill the last run in.
    moments = [("time", rng.uniform(0.05, 0.3)) for _ in range(STARTUP_KILLS)]
    span = 0.75 * total / (KILLS - STARTUP_KILLS)
    moments += [("bytes", (n + rng.random()) * span) for n in range(KILLS - STARTUP_KILLS)]
    crashed = tmp_path / "crashed.db"
    gate = tmp_path / "gate"
    kills, mid_file = 0, 0
    for kind, mark in moments:
        floor = bytes_read(crashed)
        proc = start_ingest(crashed, ledgers, jobs, gate)
        hang = time.monotonic() + HANG_S
        try:
            if kind == "time":
                until = time.monotonic() + mark
                while time.monotonic() < until and bytes_read(crashed) == floor and (
                        proc.poll() is None):
                    time.sleep(POLL)
            else:
                while bytes_read(crashed) < max(mark, floor + 1) and proc.poll() is None:
                    assert time.monotonic() < hang, f"no commit past {mark} in {HANG_S} s"
                    gate.touch()  # through once more (a file still there: not gone through)
                    time.sleep(POLL)
                gate.touch()
                time.sleep(rng.uniform(0.0, batch_time))
            assert proc.poll() is None, "the ingest finished before it could be killed"
        finally:  # (and a failed test leaves no ingest waiting at the gate)
            proc.kill()  # SIGKILL: no cleanup, no rollback, no atexit
            proc.wait()
        kills += 1
        mid_file += any(0 < offset < size for offset, size in progress(crashed))
    proc = start_ingest(crashed, ledgers, jobs)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr.decode()

    assert kills == KILLS
    assert mid_file >= KILLS // 2, f"only {mid_file} kills left a file half read"
    assert dump(crashed) == dump(clean)
