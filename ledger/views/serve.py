"""``agent-ledger serve``: Datasette over a ledger database, with our metadata and plugins.

The plugins load through the ``datasette`` entry point (package ``ledger_dashboard``). The
metadata is the packaged ``metadata.yml``, its database key renamed to the file's stem so the
titles, descriptions and canned queries apply whatever the file is called. Files given to
``--metadata`` are merged over it (a password plugin's settings, an ``allow`` block).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

METADATA_DB_KEY = "ledger"


class MetadataError(ValueError):
    """A ``--metadata`` file that cannot be read as a YAML or JSON mapping."""


def metadata_for(db_path: str | Path, extra: Sequence[str | Path] = ()) -> dict[str, Any]:
    text = resources.files("ledger.views").joinpath("metadata.yml").read_text(encoding="utf-8")
    metadata: dict[str, Any] = yaml.safe_load(text)
    databases = metadata.get("databases", {})
    stem = Path(db_path).stem
    if METADATA_DB_KEY in databases and stem != METADATA_DB_KEY:
        databases[stem] = databases.pop(METADATA_DB_KEY)
        if "description_html" in metadata:
            metadata["description_html"] = metadata["description_html"].replace(
                f'href="/{METADATA_DB_KEY}/', f'href="/{quote(stem)}/'
            )
    for path in extra:
        metadata = merge(metadata, read_metadata(path))
    return metadata


def read_metadata(path: str | Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MetadataError(f"{path}: cannot read metadata: {exc}") from None
    if not isinstance(data, dict):
        raise MetadataError(f"{path}: metadata must be a mapping (YAML or JSON object)")
    return data


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``: mappings merge key by key, anything else replaces."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


#: Datasette settings for a ledger database. Suggested facets run one GROUP BY per column on
#: every table page: seconds on a steps table of a million events, for a hint nobody asked for.
SETTINGS: dict[str, Any] = {"suggest_facets": False}


def datasette_args(
    db_path: str, metadata_path: str, host: str, port: int, get: str | None, extra: Sequence[str]
) -> list[str]:
    args = [db_path, "--metadata", metadata_path, "--host", host, "--port", str(port)]
    for name, value in SETTINGS.items():
        args += ["--setting", name, _setting_text(value)]
    if get:
        args += ["--get", get]
    return [*args, *extra]


def _setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def run(
    db_path: str, host: str = "127.0.0.1", port: int = 8001, get: str | None = None,
    extra: Sequence[str] = (), metadata_files: Sequence[str] = (),
) -> int:
    from datasette.cli import serve

    metadata = metadata_for(db_path, metadata_files)
    with tempfile.TemporaryDirectory(prefix="agent-ledger-") as tmp:
        metadata_path = str(Path(tmp) / "metadata.json")
        Path(metadata_path).write_text(json.dumps(metadata), encoding="utf-8")
        try:
            serve.main(
                datasette_args(db_path, metadata_path, host, port, get, extra),
                prog_name="agent-ledger serve",
                standalone_mode=False,
            )
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0
