"""The brake's entries in Claude Code's ``settings.json``: merged in, taken out, nothing else
touched (docs/hooks.md).

Claude Code reads hooks from ``hooks.<Event>``: a list of matcher groups, each
``{"matcher": ..., "hooks": [{"type": "command", "command": ..., "timeout": ...}]}``. The
brake's entry is the command hook whose command runs ``hook claude-code`` (the light
``agent-ledger-hook claude-code``, or the resident client, ``hook_client.py``); merging removes
any such entry first and adds one, so installing twice (or with another budget file) leaves one.
Pure functions over the parsed file, and a thin writer that shows the diff and keeps a backup.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import shlex
import time
from pathlib import Path
from typing import Any

CLIENT = "hook_client.py"
MARKS = (" hook claude-code", f"{CLIENT} ", "agent-ledger-hook claude-code",
         "ledger.live.hook_main claude-code")
#: The events the brake is installed for: PreToolUse alone decides; each call reads every new
#: line of the transcript, so no other event is needed (the command accepts them all).
EVENTS = ("PreToolUse",)
MATCH_ALL = "*"
TIMEOUT_S = 10


class SettingsError(ValueError):
    """A settings file that is not a JSON object with the documented ``hooks`` shape."""


def settings_path(scope: str, project: Path, home: Path) -> Path:
    """Where Claude Code reads settings: user, project (shared) or project local."""
    if scope == "user":
        return home / ".claude" / "settings.json"
    name = "settings.local.json" if scope == "local" else "settings.json"
    return project / ".claude" / name


def is_ours(hook: Any) -> bool:
    if not isinstance(hook, dict) or hook.get("type") != "command":
        return False
    command = str(hook.get("command", ""))
    return any(mark in f" {command} " for mark in MARKS) or _client_at(_words(command)) is not None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return []


def _client_at(parts: list[str]) -> int | None:
    """Where the resident client's script is among a command's words (a quoted path too)."""
    return next((i for i, p in enumerate(parts) if p.endswith("/" + CLIENT)), None)


def uninstalled(settings: dict[str, Any]) -> dict[str, Any]:
    """``settings`` without the brake's entries (groups and events left empty removed)."""
    out = copy.deepcopy(settings)
    hooks = _hooks(out)
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not is_ours(h)]
                if not inner and group["hooks"]:
                    continue
                group = {**group, "hooks": inner}
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if "hooks" in out and not out["hooks"]:
        del out["hooks"]
    return out


def installed(settings: dict[str, Any], command: str) -> dict[str, Any]:
    """``settings`` with exactly one brake entry per event of :data:`EVENTS`, running
    ``command``; the user's other hooks and settings as they were."""
    out = uninstalled(settings)
    hooks = out.setdefault("hooks", {})
    for event in EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SettingsError(f"hooks.{event} must be a list")
        groups.append({
            "matcher": MATCH_ALL,
            "hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_S}],
        })
    return out


def _hooks(settings: dict[str, Any]) -> dict[str, Any]:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("'hooks' must be an object")
    return hooks


def read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path}: not valid JSON: {exc}") from None
    except OSError as exc:  # a folder in its place, no permission
        raise SettingsError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: a settings file must be a JSON object")
    return data


def render(settings: dict[str, Any]) -> str:
    return json.dumps(settings, indent=2, ensure_ascii=False) + "\n"


def diff(path: Path, before: dict[str, Any], after: dict[str, Any]) -> str:
    old = render(before).splitlines(keepends=True) if before else []
    return "".join(difflib.unified_diff(
        old, render(after).splitlines(keepends=True), f"{path} (before)", f"{path} (after)"
    ))


def write(path: Path, settings: dict[str, Any]) -> Path | None:
    """Write ``settings`` to ``path`` (a new file renamed over the old); the old file is kept
    as ``<name>.bak-<time>`` first. Returns the backup's path (None if there was no file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if path.exists():
        stamp = time.strftime("%Y%m%dT%H%M%S")
        backup = path.with_name(f"{path.name}.bak-{stamp}")
        n = 1
        while backup.exists():  # two changes in one second: keep both backups
            n += 1
            backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        backup.write_bytes(path.read_bytes())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(render(settings), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return backup


def client_sockets(settings: dict[str, Any]) -> list[tuple[str, str]]:
    """The (socket, database) of each resident client among the brake's entries (what
    ``hook uninstall`` stops): ``python -S .../hook_client.py SOCKET --db DB ...``."""
    found = []
    for groups in _hooks(settings).values():
        for group in groups if isinstance(groups, list) else []:
            hooks = group.get("hooks") if isinstance(group, dict) else None
            for hook in hooks if isinstance(hooks, list) else []:
                parts = _words(str(hook.get("command", ""))) if is_ours(hook) else []
                at = _client_at(parts)
                if at is not None and "--db" in parts[at + 2:-1]:
                    found.append((parts[at + 1], parts[parts.index("--db", at + 2) + 1]))
    return found
