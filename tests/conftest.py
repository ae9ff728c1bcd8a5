from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from ledger.core import secret_rules
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.live.hook_store import DB_ENV
from tests.helpers import SAMPLES

# No property test depends on how fast the machine is: Hypothesis's default 200 ms deadline
# per example and its too_slow health check fail a loaded or slow machine, not the code.
settings.register_profile(
    "agent-ledger", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("agent-ledger")


def pytest_configure(config: pytest.Config) -> None:
    """The suite's own folders for what agent-ledger keeps in the user's home, set in the
    environment so that the commands the tests start use them too: no test reads what the
    user's own runs left there, or leaves anything there.

    * the user cache folder (the price and action-map caches, ``ledger/config/user_cache.py``).
      The rule set's compiled cache stays where the library keeps it (``kingfisher/rule-cache``
      in the user's cache folder): compiling it again costs seconds and tells nothing.
    * the hook's default database (``AGENT_LEDGER_DB``, else ``~/.agent-ledger/ledger.db``),
      which a hook client given no ``--db`` falls back to."""
    real = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ.setdefault("KF_RULE_CACHE_DIR", os.path.join(real, "kingfisher", "rule-cache"))
    folder = config._ledger_home = tempfile.mkdtemp(  # type: ignore[attr-defined]
        prefix="agent-ledger-test-home-")
    os.environ["XDG_CACHE_HOME"] = os.path.join(folder, "cache")
    os.environ[DB_ENV] = os.path.join(folder, "agent-ledger", "ledger.db")


def pytest_unconfigure(config: pytest.Config) -> None:
    if folder := getattr(config, "_ledger_home", None):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def _rule_set_loaded() -> None:
    """The rule set loaded once for the suite, as an ingest process holds it after its first
    load: workers are then forked holding it (:class:`ledger.ingest.parallel.Workers`), so
    none hands a file back for want of it, and every test pays its load once. Tests of
    loading run a fresh process, or fake the load."""
    secret_rules.load()


@pytest.fixture
def samples(tmp_path: Path) -> Path:
    """A private copy of sample_ledgers/, so tests may append to it."""
    target = tmp_path / "sample_ledgers"
    shutil.copytree(SAMPLES, target)
    return target


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.db"


@pytest.fixture
def sample_db(samples: Path, db_path: Path) -> Path:
    ingest(db_path, [samples])
    return db_path


@pytest.fixture
def write_jsonl() -> Callable[..., Path]:
    def write(path: Path, records: Iterable[Any], mode: str = "w") -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open(mode, encoding="utf-8") as f:
            for record in records:
                f.write((record if isinstance(record, str) else json.dumps(record)) + "\n")
        return path

    return write



@pytest.fixture
def ingest_logs(tmp_path: Path, write_jsonl: Callable[..., Path]) -> Callable[..., Path]:
    """Ingest log files, or lists of records (each written to a file of its own), into one
    database; returns its path."""

    def run(*sources: list[Any] | Path, dialect: str | None = None) -> Path:
        db = tmp_path / "ledger.db"
        paths = [
            source if isinstance(source, Path)
            else write_jsonl(tmp_path / "logs" / f"log-{i}.jsonl", source)
            for i, source in enumerate(sources)
        ]
        ingest(db, paths, Options(dialect=dialect))
        return db

    return run
