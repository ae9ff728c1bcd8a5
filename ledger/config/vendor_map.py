"""A vendor map file (TOML): the user's strings over the default map, checked key by key."""

from __future__ import annotations

from pathlib import Path

from ledger.config.toml_file import read_toml, replace_flag
from ledger.core.reasons import CONTINUE, SEED_VENDOR_MAP
from ledger.core.vendors import (
    DEFAULT_VENDOR_MAP,
    MAP_VALUES,
    VendorMap,
    VendorMapError,
    bad_value_hint,
    quote,
)


def load_vendor_map(path: str | Path, base: VendorMap = DEFAULT_VENDOR_MAP) -> dict[str, str]:
    """Read a TOML file that extends or overrides the map. Format::

        replace = false            # optional; true starts from the seed map only, not base
        [stops]
        "end_turn" = "task_complete"
        "my_vendor_limit" = "max_rounds"
        [continue]
        strings = ["tool_use", "pause_turn"]

    Values in ``[stops]`` are StopReason values (or "continue"); map a string to
    "unknown_vendor" to take a default entry back out. A string may not be in both ``[stops]``
    (with a stop reason) and ``[continue]``. Returns a new dict; ``base`` is not modified.

    Raises VendorMapError (a ValueError) naming the file and key for bad TOML, unknown tables or
    keys, unknown reason names, non-string values and empty strings. An unreadable file raises
    the usual OSError.
    """
    path = Path(path)
    data = read_toml(path, VendorMapError)
    replace = replace_flag(data, path, ("stops", "continue"), VendorMapError)

    stops = data.get("stops", {})
    if not isinstance(stops, dict):
        raise VendorMapError(f"{path}: 'stops' must be a table ([stops]), not {stops!r}")

    continue_table = data.get("continue", {})
    if not isinstance(continue_table, dict):
        raise VendorMapError(
            f"{path}: 'continue' must be a table ([continue]), not {continue_table!r}"
        )
    extra = [key for key in continue_table if key != "strings"]
    if extra:
        raise VendorMapError(
            f"{path}: [continue] has unknown key {quote(extra[0])}; expected only 'strings'"
        )
    continue_strings = continue_table.get("strings", [])
    if not isinstance(continue_strings, list):
        raise VendorMapError(
            f"{path}: [continue] strings must be an array of strings, not {continue_strings!r}"
        )

    result = dict(SEED_VENDOR_MAP) if replace else _checked_copy(base)

    for raw, value in stops.items():
        where = f"{path}: [stops] {quote(raw)}"
        if raw == "":
            raise VendorMapError(f"{where}: the empty string cannot be mapped (it means no stop)")
        if not isinstance(value, str):
            raise VendorMapError(
                f'{where}: the reason must be a string such as "task_complete", not '
                f"{type(value).__name__} {value!r}"
            )
        if value not in MAP_VALUES:
            raise VendorMapError(f"{where} = {quote(value)}: {bad_value_hint(value)}")
        result[raw] = value

    for index, raw in enumerate(continue_strings):
        where = f"{path}: [continue] strings[{index}]"
        if not isinstance(raw, str):
            raise VendorMapError(f"{where}: must be a string, not {type(raw).__name__} {raw!r}")
        if raw == "":
            raise VendorMapError(f"{where}: the empty string cannot be mapped (it means no stop)")
        if stops.get(raw, CONTINUE) != CONTINUE:
            raise VendorMapError(
                f"{where} = {quote(raw)}: also mapped to {quote(stops[raw])} in [stops]; "
                "a string is either a stop or a continue"
            )
        result[raw] = CONTINUE

    return result


def _checked_copy(base: VendorMap) -> dict[str, str]:
    """Copy ``base``, checking every key and value, so the result is a valid map."""
    result: dict[str, str] = {}
    for raw, value in base.items():
        if not isinstance(raw, str) or raw == "":
            raise VendorMapError(f"base vendor map: key {raw!r} must be a non-empty string")
        if not isinstance(value, str) or value not in MAP_VALUES:
            raise VendorMapError(
                f"base vendor map: {quote(raw)} = {value!r}: {bad_value_hint(value)}"
            )
        result[raw] = value
    return result
