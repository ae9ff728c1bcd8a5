"""An action map file (TOML): the user's tools and shell commands over the default map.

The default map is ``action_classes.toml`` beside this module (package data), each entry with
the source it comes from. A user's file has the same shape::

    replace = false                    # optional; true starts from an empty map
    [tools]
    "mcp__linear-server__create_issue" = "write"
    "mcp__*__get_weather" = "read"     # a glob: * and ?
    Bash = "shell"                     # classed by its command
    [commands]
    "mise run lint" = "read"
    "bd show" = "read"

``[tools]`` values are think, read, write, shell, stdin or agent (``"Task:Explore" = "read"``
classes a sub-agent type), or "unclassified" to take a default entry back out; ``[commands]``
values are read or write. See :mod:`ledger.core.actions`.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

from ledger.config.toml_file import read_toml, replace_flag
from ledger.core.actions import (
    COMMAND_VALUES,
    TOOL_VALUES,
    ActionMap,
    CommandKey,
    command_key,
)

UNCLASSIFIED = "unclassified"
#: The default map (package data; read by path: importlib.resources costs an import ~9 ms).
DEFAULT_FILE = Path(__file__).with_name("action_classes.toml")
_GLOB = frozenset("*?[")


class ActionMapError(ValueError):
    """An action map file that cannot be used: names the file and the key."""


#: The parse of the built-in map kept in the user's cache folder (see remembered_default_map).
CACHE_NAME = "action-map.json"


@functools.lru_cache(maxsize=1)
def default_action_map() -> ActionMap:
    """The built-in map (read once a process; its parse remembered in the user's cache
    folder, :mod:`ledger.config.user_cache`, where there is one)."""
    from ledger.config.user_cache import cache_folder

    folder = cache_folder()
    if folder is None:
        return parse_action_map(_default_data(), DEFAULT_FILE.name)
    return remembered_default_map(folder / CACHE_NAME)


def remembered_default_map(cache: Path) -> ActionMap:
    """:func:`default_action_map`, its parsed TOML kept as JSON in ``cache`` for as long as the
    file's size and mtime are the same: what a process that reads the map once (a hook call)
    would otherwise pay for tomllib and its parse, some 10 ms. The same map either way: the
    file's values are strings and booleans, which JSON keeps, in order. The cache's folder is
    made if missing; a cache that cannot be read or written is not used."""
    stat = DEFAULT_FILE.stat()
    key = [stat.st_size, stat.st_mtime_ns]
    try:
        saved = json.loads(cache.read_bytes())
        if saved["key"] == key:
            return parse_action_map(saved["data"], DEFAULT_FILE.name)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    data = _default_data()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "data": data}), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass
    return parse_action_map(data, DEFAULT_FILE.name)


def _default_data() -> dict[str, Any]:
    import tomllib  # here: a process that reads the cache of remembered_default_map needs none

    return tomllib.loads(DEFAULT_FILE.read_text("utf-8"))


def load_action_map(path: str | Path, base: ActionMap | None = None) -> ActionMap:
    """Read a TOML file over ``base`` (the default map). Raises ActionMapError naming the
    file and key for bad TOML, unknown tables, keys or values; an unreadable file raises the
    usual OSError."""
    path = Path(path)
    data = read_toml(path, ActionMapError)
    return parse_action_map(data, str(path), default_action_map() if base is None else base)


def parse_action_map(data: dict[str, Any], where: str, base: ActionMap | None = None) -> ActionMap:
    """A map from parsed TOML, its entries over ``base``'s (none with ``replace = true``)."""
    replace = replace_flag(data, where, ("tools", "commands"), ActionMapError)
    if replace or base is None:
        base = ActionMap()
    tools = _table(data, "tools", where)
    commands = _table(data, "commands", where)
    exact = dict(base.tools)
    patterns = dict(base.patterns)
    mine: dict[str, str] = {}
    for name, value in tools.items():
        _check(where, "tools", name, value, (*TOOL_VALUES, UNCLASSIFIED))
        target = mine if _GLOB & set(name) else exact
        if value == UNCLASSIFIED:
            exact.pop(name, None)
            patterns.pop(name, None)
        else:
            target[name] = value
    for name in mine:
        patterns.pop(name, None)
    ordered = (*mine.items(), *patterns.items())  # the user's globs are tried first
    entries: dict[CommandKey, str] = dict(base.commands)
    for text, value in commands.items():
        _check(where, "commands", text, value, COMMAND_VALUES)
        entries[command_key(text)] = value
    return ActionMap(exact, ordered, entries)


def _table(data: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ActionMapError(f"{where}: '{name}' must be a table ([{name}]), not {table!r}")
    return table


def _check(where: str, table: str, key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if not key.strip():
        raise ActionMapError(f"{where}: [{table}] has an empty key")
    if not isinstance(value, str) or value not in allowed:
        raise ActionMapError(
            f"{where}: [{table}] {key!r} = {value!r}: expected one of {', '.join(allowed)}"
        )
