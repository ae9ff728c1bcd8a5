"""What the map files (vendor map, action map) share: reading the TOML and its top level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.core.vendors import quote


def read_toml(path: Path, error: type[ValueError]) -> dict[str, Any]:
    """The parsed file; ``error`` (naming the file) for bad TOML or bytes that are not UTF-8.
    An unreadable file raises the usual OSError."""
    import tomllib  # here: the hook reads no map file, and tomllib costs it some 3 ms

    with path.open("rb") as handle:
        try:
            return tomllib.load(handle)
        except tomllib.TOMLDecodeError as exc:
            raise error(f"{path}: invalid TOML: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise error(f"{path}: invalid TOML: not UTF-8 ({exc})") from exc


def replace_flag(
    data: dict[str, Any], where: object, tables: tuple[str, ...], error: type[ValueError]
) -> bool:
    """Check that the top level holds only ``replace`` and ``tables``; return ``replace``."""
    unknown = [key for key in data if key != "replace" and key not in tables]
    if unknown:
        names = " and ".join(f"[{t}]" for t in tables)
        raise error(
            f"{where}: unknown top-level key or table {quote(unknown[0])}; expected only "
            f"'replace', {names}"
        )
    replace = data.get("replace", False)
    if not isinstance(replace, bool):
        raise error(f"{where}: 'replace' must be true or false, not {replace!r}")
    return replace
