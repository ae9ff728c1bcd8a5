"""A budget file (TOML): budget keys at the top level or under ``[budget]``, and task class
names for folders under ``[task_classes]`` (docs/budgets.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ledger.core.budget import Budget, BudgetError
from ledger.core.task_classes import TaskClasses

TASK_CLASSES = "task_classes"
#: Not a cap but how sessions are counted: true holds a parent session and its sub-agents to
#: the caps together (ledger.core.family), as well as each on its own.
FAMILY = "subagents_count_in_parent"


def _read(path: str | Path) -> dict[str, Any]:
    import tomllib  # here: a hook call with no budget file does not pay for it

    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BudgetError(f"{path}: not a valid TOML budget file: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BudgetError(f"{path}: not a valid TOML budget file: {exc}{_hint(text)}") from None


def _hint(text: str) -> str:
    """What to do about a file of several ``[budget]`` tables: ``propose-budget`` printed
    one per task class into it (``... > budget.toml``, as the ingest's summary suggests)."""
    tables = sum(line.split("#")[0].strip() == "[budget]" for line in text.splitlines())
    if tables < 2:
        return ""
    return (f" ({tables} [budget] tables: propose-budget prints one per task class; keep one "
            "with --task-class CLASS, or write each to a file with --output-dir DIR)")


def _table(path: str | Path) -> dict[str, Any]:
    data = _read(path)
    table = data.get("budget", {k: v for k, v in data.items() if k != TASK_CLASSES})
    if not isinstance(table, dict):
        raise BudgetError(f"{path}: [budget] must be a table")
    stray = sorted(set(data) - {"budget", TASK_CLASSES}) if "budget" in data else []
    if stray:  # beside [budget] they would be ignored: a cap the user believes in force
        raise BudgetError(
            f"{path}: {stray[0]!r} beside [budget]: put every budget key under [budget] "
            f"(only [budget] and [{TASK_CLASSES}] are read)"
        )
    return table


def read_budget_file(path: str | Path) -> dict[str, Any]:
    """The budget keys (caps) of ``path``; BudgetError names the file for bad TOML, a bad
    table, an unknown key or a bad value."""
    caps = {k: v for k, v in _table(path).items() if k != FAMILY}
    try:
        Budget.from_mapping(caps)
    except BudgetError as exc:
        raise BudgetError(f"{path}: {exc}") from None
    return caps


def read_family(path: str | Path) -> bool:
    """Whether ``path`` counts sub-agents' steps in their parent's (``FAMILY``; false if
    absent)."""
    value = _table(path).get(FAMILY, False)
    if not isinstance(value, bool):
        raise BudgetError(f"{path}: {FAMILY} must be true or false, not {value!r}")
    return value


def read_task_classes(path: str | Path) -> TaskClasses:
    """The ``[task_classes]`` table of ``path`` (folder glob = name, in the file's order)."""
    table = _read(path).get(TASK_CLASSES, {})
    if not isinstance(table, dict):
        raise BudgetError(f"{path}: [{TASK_CLASSES}] must be a table of \"folder glob\" = \"name\"")
    for glob, name in table.items():
        if not isinstance(name, str) or not name.strip():
            raise BudgetError(
                f"{path}: [{TASK_CLASSES}] {glob!r}: the task class must be a non-empty string"
            )
    return TaskClasses(tuple(table.items()))
