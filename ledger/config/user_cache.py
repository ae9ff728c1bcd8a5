"""The user's cache folder for agent-ledger: what a process learnt that a later one can read
back instead of working it out again (the price library's schedules, the default action map's
parse). ``$XDG_CACHE_HOME/agent-ledger``, else ``~/.cache/agent-ledger``; None without either
(a bare ``env -i``, some services): nothing is then remembered, which costs only time."""

from __future__ import annotations

import os
from pathlib import Path


def cache_folder() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.path.join(home, ".cache") if (home := os.environ.get("HOME")) else None
    )
    return Path(base, "agent-ledger") if base else None
