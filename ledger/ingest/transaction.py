"""The ingest's write transaction: units of work in savepoints, committed a batch at a time."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ledger.db import rollup

if TYPE_CHECKING:  # annotations only: ledger.db.connection imports it (without pandas)
    import sqlite_utils

#: TEST ONLY, not an option: seconds the writer sleeps after each commit, read once from
#: AGENT_LEDGER_TEST_BATCH_PAUSE (unset or 0: no pause, no cost). Tests that must stop or kill
#: an ingest in the middle of its work set it, so that the work lasts at least this long per
#: batch however fast the machine is (with workers too: every batch is committed here). The
#: pause comes after the commit, so it holds no lock and concurrent ingests interleave as ever.
TEST_BATCH_PAUSE = float(os.environ.get("AGENT_LEDGER_TEST_BATCH_PAUSE") or 0)
#: TEST ONLY, not an option: a path, read once from AGENT_LEDGER_TEST_BATCH_GATE (unset: no
#: gate, no cost). After each commit the writer waits until a file is there, and removes it
#: before it goes on: a test that kills an ingest at chosen points lets it through one batch
#: at a time, so that it cannot run ahead of the test however slow or busy the test process.
TEST_BATCH_GATE = os.environ.get("AGENT_LEDGER_TEST_BATCH_GATE") or None


class Transaction:
    """One write transaction shared by units of work (claiming a file, or a batch of its lines).

    Each unit runs in a savepoint, so a file that fails takes back only its own unit, and the
    transaction is committed once it holds ``batch`` lines: a night of many small files costs
    a commit per batch, not one or two per file. What a commit covers is consistent: rows,
    resumable state and offsets together, and the rollup counts of the sessions written.
    """

    def __init__(self, db: sqlite_utils.Database, batch: int) -> None:
        self.db = db
        self.batch = batch
        self.pending = 0  # lines in the open transaction
        self.rollup = rollup.Pending()  # sessions taken out of the rollup until the commit

    @contextmanager
    def unit(self, lines: int = 0) -> Iterator[sqlite3.Connection]:
        """One atomic unit of work; ``lines``: how many it adds towards the batch."""
        conn = self.db.conn
        if not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
        conn.execute("SAVEPOINT unit")
        taken_out = self.rollup.mark()
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK TO unit")
            conn.execute("RELEASE unit")
            self.rollup.reset(taken_out)
            raise
        conn.execute("RELEASE unit")
        self.add(lines)

    def add(self, lines: int) -> None:
        """Count ``lines`` written in a unit already released; commit once a batch is full."""
        self.pending += lines
        if self.pending >= self.batch:
            self.end("COMMIT")

    def end(self, how: str) -> None:
        """``COMMIT`` or ``ROLLBACK`` the open transaction, if any."""
        conn = self.db.conn
        if conn.in_transaction:
            if how == "COMMIT":
                self.rollup.add_back(conn)
            conn.execute(how)
            if TEST_BATCH_PAUSE and how == "COMMIT":
                time.sleep(TEST_BATCH_PAUSE)
            if TEST_BATCH_GATE and how == "COMMIT":
                _through_the_gate(TEST_BATCH_GATE)
        self.rollup = rollup.Pending()
        self.pending = 0


#: Seconds a process waits at the gate at most: then the test that held it is gone (failed,
#: killed), and the process carries on without the gate rather than wait for ever.
TEST_GATE_WAIT_S = 300.0


def _through_the_gate(gate: str) -> None:
    """Wait for the file ``gate`` (:data:`TEST_BATCH_GATE`) and take it away (of processes
    waiting at one gate, the one whose unlink succeeds goes through)."""
    global TEST_BATCH_GATE
    given_up = time.monotonic() + TEST_GATE_WAIT_S
    while True:
        try:
            os.unlink(gate)
            return
        except FileNotFoundError:
            if time.monotonic() > given_up:
                TEST_BATCH_GATE = None
                return
            time.sleep(0.001)
