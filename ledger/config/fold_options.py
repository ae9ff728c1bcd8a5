"""The options a fold runs under, from the files a user gives: what the command line's
``make_options`` and the live hook's ``options_for`` share (neither imports the other's
world: click stays out of the hook, the hook's remembered parses out of the command line).

The price book and action map come in built, since the two build them differently (the hook
remembers the default map's parse and reads the price library's version cheaply); a bad file
raises its reader's error (:class:`~ledger.core.budget.BudgetError`,
:class:`~ledger.core.vendors.VendorMapError`, ...), which each caller turns into its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.config.action_map import ActionMapError, default_action_map, load_action_map
from ledger.config.budget_file import read_budget_file, read_family, read_task_classes
from ledger.config.prices import PricesError, load_prices
from ledger.config.vendor_map import load_vendor_map
from ledger.core.actions import ActionMap
from ledger.core.budget import Budget, BudgetError
from ledger.core.pricing import PriceBook
from ledger.core.task_classes import TaskClasses
from ledger.core.vendors import DEFAULT_VENDOR_MAP, VendorMapError
from ledger.ingest.files import DEFAULT_MAX_LINE
from ledger.ingest.options import Options

#: What a bad budget, vendor map, prices file or action map raises from :func:`options_of`.
OPTION_ERRORS = (BudgetError, VendorMapError, PricesError, ActionMapError)


def options_of(
    budget_pairs: Sequence[str],
    budget_file: str | None,
    vendor_map: str | None,
    prices: str | None = None,
    action_map: str | None = None,
    task_class: str | None = None,
    dialect: str | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE,
) -> Options:
    """The options of the command line's fold options (``--budget``, ``--budget-file``,
    ``--vendor-map``, ``--prices``, ``--action-map``, ``--task-class``, ``--dialect``,
    ``--max-line-bytes``); raises one of :data:`OPTION_ERRORS` for a bad file."""
    return options_from_files(
        budget_pairs, budget_file, vendor_map, load_prices(prices),
        load_action_map(action_map) if action_map else default_action_map(),
        task_class=task_class, dialect=dialect, max_line=max_line_bytes,
    )


def options_from_files(
    budget_pairs: Sequence[str], budget_file: str | None, vendor_map: str | None,
    prices: PriceBook, action_map: ActionMap, **rest: Any,
) -> Options:
    """The budget file's caps with ``--budget`` pairs over them, its task classes and family
    key, the vendor map of ``vendor_map`` (the default one without), and ``rest`` as given."""
    budget = Budget.from_mapping(read_budget_file(budget_file), Budget()) if budget_file \
        else Budget()
    return Options(
        budget=Budget.from_assignments(tuple(budget_pairs), budget),
        vendor_map=read_vendor_map(vendor_map),
        prices=prices,
        action_map=action_map,
        task_classes=read_task_classes(budget_file) if budget_file else TaskClasses(),
        subagents_count_in_parent=read_family(budget_file) if budget_file else False,
        **rest,
    )


def read_vendor_map(path: str | None) -> dict[str, str]:
    """The vendor map of ``--vendor-map`` (the default map without one)."""
    return load_vendor_map(path) if path else dict(DEFAULT_VENDOR_MAP)
