from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from ledger.ingest import ingest
from tests.helpers import SAMPLES


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

