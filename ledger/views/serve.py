"""``agent-ledger serve``: Datasette over a ledger database, with our metadata and plugins.

The plugins load through the ``datasette`` entry point (package ``ledger_dashboard``). The
metadata is the packaged ``metadata.yml``, its database key renamed to the file's stem so the
titles, descriptions and canned queries apply whatever the file is called. Files given to
``--metadata`` are merged over it (a password plugin's settings, an ``allow`` block).
"""

from __future__ import annotations

import ipaddress
import json
import signal
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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


#: The names a loopback server answers to (with any port); others are refused, so a web page
#: that rebinds its own name to 127.0.0.1 cannot read the ledger (DNS rebinding).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
PLUGIN = "ledger_dashboard"


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(bind: str, extra: Sequence[str] = ()) -> list[str] | None:
    """The ``Host`` names the server answers to: the loopback names on a loopback bind, plus
    ``extra`` (a reverse proxy's name); None (any) on another bind with no ``extra``, since
    the names a network reaches it by are the operator's to give."""
    if is_loopback(bind):
        return [*LOOPBACK_HOSTS, *extra]
    return list(extra) or None


def with_hosts(metadata: dict[str, Any], hosts: list[str] | None) -> dict[str, Any]:
    """``metadata`` with ``hosts`` added to the plugin's ``allowed_hosts`` (kept if set)."""
    if hosts is None:
        return metadata
    config = metadata.setdefault("plugins", {}).setdefault(PLUGIN, {})
    config["allowed_hosts"] = [*config.get("allowed_hosts", []), *hosts]
    return metadata


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
    extra: Sequence[str] = (), metadata_files: Sequence[str] = (), allow_hosts: Sequence[str] = (),
) -> int:
    from datasette.cli import serve

    metadata = with_hosts(metadata_for(db_path, metadata_files), allowed_hosts(host, allow_hosts))
    with tempfile.TemporaryDirectory(prefix="agent-ledger-") as tmp, _exit_on_sigterm():
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


@contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    """SIGTERM made a ``SystemExit(143)`` while serving, so that the metadata's temporary
    folder is removed when the server is stopped (``kill``, a service manager). uvicorn
    shuts down gracefully on SIGTERM, puts back the handler it found and raises the signal
    again: with Python's default one the process died there and left the folder behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_exit(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)
