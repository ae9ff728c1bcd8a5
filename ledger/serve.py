"""``agent-ledger serve``: Datasette over a ledger database, with our metadata and plugins.

The plugins load through the ``datasette`` entry point (package ``ledger_dashboard``). The
metadata is the packaged ``metadata.yml``, its database key renamed to the file's stem so the
titles, descriptions and canned queries apply whatever the file is called.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

METADATA_DB_KEY = "ledger"


def metadata_for(db_path: str | Path) -> dict[str, Any]:
    text = resources.files("ledger").joinpath("metadata.yml").read_text(encoding="utf-8")
    metadata: dict[str, Any] = yaml.safe_load(text)
    databases = metadata.get("databases", {})
    stem = Path(db_path).stem
    if METADATA_DB_KEY in databases and stem != METADATA_DB_KEY:
        databases[stem] = databases.pop(METADATA_DB_KEY)
    return metadata


def datasette_args(
    db_path: str, metadata_path: str, host: str, port: int, get: str | None, extra: Sequence[str]
) -> list[str]:
    args = [db_path, "--metadata", metadata_path, "--host", host, "--port", str(port)]
    if get:
        args += ["--get", get]
    return [*args, *extra]


def run(
    db_path: str, host: str = "127.0.0.1", port: int = 8001, get: str | None = None,
    extra: Sequence[str] = (),
) -> int:
    from datasette.cli import serve

    with tempfile.TemporaryDirectory(prefix="agent-ledger-") as tmp:
        metadata_path = str(Path(tmp) / "metadata.json")
        Path(metadata_path).write_text(json.dumps(metadata_for(db_path)), encoding="utf-8")
        try:
            serve.main(
                datasette_args(db_path, metadata_path, host, port, get, extra),
                prog_name="agent-ledger serve",
                standalone_mode=False,
            )
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0
