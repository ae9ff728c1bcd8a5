"""A ledger with every kind of answer in it, and its export (shared by the export tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledger.db import connection
from ledger.export.parquet import export
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import FIXTURES, SAMPLES

#: The bundled samples (retry storms, no-progress runs, caps), the public agent logs (unknown
#: vendor stops, prices) and the OTLP fixtures (costs the log gives).
INPUTS = (SAMPLES, FIXTURES / "real-agent-logs", FIXTURES / "otlp")


@pytest.fixture(scope="module")
def ledger_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("ledger") / "ledger.db"
    ingest(db, list(INPUTS), Options(host="laptop-1"))
    return db


@pytest.fixture(scope="module")
def exported(ledger_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export")
    run_export(ledger_db, out, "laptop-1")
    return out


def run_export(db_path: Path, out: Path, host: str | None, full: bool = False):
    db = connection.connect(db_path)
    try:
        return export(db.conn, out, host, full=full)
    finally:
        db.conn.close()
