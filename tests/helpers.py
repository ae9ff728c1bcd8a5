"""Shared test helpers (fixtures live in conftest.py)."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import sqlite_utils

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_ledgers"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
REAL_LOGS = FIXTURES / "real-agent-logs"  # public Claude Code, Codex and Langfuse samples
#: More public logs, beside the repository when it is there (as in CI); never copied into it.
MORE_LOGS = ROOT.parent / "shared" / "fixtures" / "real-agent-logs"


def real_log(name: str) -> Path:
    """A real log by its name in the expected_*.json tables: a sample here, or ``more/...``
    beside the repository (the test is skipped when that folder is not there)."""
    import pytest

    if not name.startswith("more/"):
        return REAL_LOGS / name
    path = MORE_LOGS / name
    if not path.exists():
        pytest.skip(f"{name}: ../shared/fixtures/real-agent-logs/more/ is not beside the repo")
    return path


def paused_env(seconds: float) -> dict[str, str]:
    """The environment for an ingest subprocess that sleeps ``seconds`` after each commit
    (AGENT_LEDGER_TEST_BATCH_PAUSE, test only): a test that stops or kills it mid-work, or
    reads alongside it, then has at least that long per batch, however fast the machine."""
    return {**os.environ, "AGENT_LEDGER_TEST_BATCH_PAUSE": str(seconds)}


def scratch_dir() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder in memory where there is one (/dev/shm): property tests create
    hundreds of small databases, and on a disk their fsyncs dominate the run time."""
    shm = "/dev/shm"
    return tempfile.TemporaryDirectory(dir=shm if os.access(shm, os.W_OK) else None)


def rows(db_path: Path, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
    db = sqlite_utils.Database(db_path)
    try:
        return list(db.query(sql, list(params)))
    finally:
        db.conn.close()


def session_row(db_path: Path, session_id: str = "s1") -> dict[str, Any]:
    return rows(db_path, "select * from sessions where session_id = ?", [session_id])[0]


def step_rows(db_path: Path, session_id: str = "s1") -> list[dict[str, Any]]:
    return rows(db_path, "select * from steps where session_id = ? order by idx", [session_id])


def dump(db_path: Path) -> dict[str, list[dict[str, Any]]]:
    """Everything a user can see in the database, in a stable order, minus ingest times."""
    tables = {
        "sessions": "select * from sessions order by session_id",
        "steps": "select * from steps order by session_id, idx",
        "incidents": "select * from incidents order by session_id, kind, start_idx",
        "ingest_errors": "select source_id, path, line, offset, reason, raw from ingest_errors "
        "order by source_id, offset, line, reason",
        "sources": "select source_id, path, dialect, fingerprint, check_hash, "
        "offset, size, lines, blank_lines, fold_digest, cursor from sources order by source_id",
        "fold_state": "select * from fold_state order by session_id",
    }
    return {name: rows(db_path, sql) for name, sql in tables.items()}


def refuse_to_open(monkeypatch: Any, path: Path) -> Callable[[], None]:
    """Make ``path`` a file the kernel will not open: tests run as root, whom ``chmod 000``
    does not stop, so ``os.open`` says for this one path what the kernel says to everybody
    else. Returns what makes it readable again."""
    real_open = os.open

    def refusing(file: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(file) == str(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing)
    return lambda: monkeypatch.setattr(os, "open", real_open)


#: Seconds a test waits at most for `agent-ledger serve` to answer, or to end once stopped:
#: only a hang gets near it. Datasette's imports alone take seconds where the CPU is shared.
SERVE_START_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_serving(
    db_path: Path, log: IO[str], env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """`agent-ledger serve db_path` on a free port of 127.0.0.1, once it answers (waits up to
    :data:`SERVE_START_S`): the process and its address. It is killed if it does not start."""
    import httpx

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "ledger", "serve", str(db_path), "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVE_START_S
    while True:
        try:
            if httpx.get(f"{base}/-/versions.json").status_code == 200:
                return process, base
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise RuntimeError(f"agent-ledger serve did not start; see {log.name}")
        time.sleep(0.2)


@contextmanager
def serving(db_path: Path, log_path: Path) -> Iterator[str]:
    """:func:`start_serving`, stopped on leaving."""
    with log_path.open("w") as log:
        process, base = start_serving(db_path, log)
        try:
            yield base
        finally:
            process.terminate()
            process.wait(timeout=SERVE_START_S)
