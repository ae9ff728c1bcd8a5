"""A budget file (TOML): budget keys at the top level or under ``[budget]``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from ledger.core.budget import BudgetError


def read_budget_file(path: str | Path) -> dict[str, Any]:
    """The budget keys of ``path``; BudgetError names the file for bad TOML or a bad table."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BudgetError(f"{path}: not a valid TOML budget file: {exc}") from None
    table = data.get("budget", data)
    if not isinstance(table, dict):
        raise BudgetError(f"{path}: [budget] must be a table")
    return table
