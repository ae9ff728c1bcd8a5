"""``agent-ledger-hook``: the command Claude Code runs before each tool call, started light.

``agent-ledger hook claude-code`` answers the same, but starts the whole command line (click,
every command's options) first; this entry imports only what a call needs: the hook, the
fold, the budget and the configuration readers (``python -X importtime`` shows the rest
stays out). Its arguments are those of ``hook claude-code``; a bad one is a call that cannot
be checked, denied (or allowed with ``--fail-open``) with the reason, never a traceback.

    agent-ledger-hook claude-code --db ~/.agent-ledger/ledger.db [--budget-file F] [--fail-open]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from ledger.core.pricing import PriceBook
from ledger.ingest.options import Options
from ledger.live import hook_store
from ledger.live.hook import HookInputError
from ledger.live.hook_run import OptionsFor, output, run, verdict_of_failure

COMMAND = "claude-code"
ACTION_MAP_FILE = "action_map.json"
_VALUED = {"--db": "db", "--budget-file": "budget_file", "--vendor-map": "vendor_map",
           "--prices": "prices"}


@dataclass
class Arguments:
    db: str | None = None
    budget_file: str | None = None
    vendor_map: str | None = None
    prices: str | None = None
    fail_open: bool = False
    budget_pairs: list[str] = field(default_factory=list)


def parse(argv: list[str]) -> Arguments:
    """The arguments of ``hook claude-code`` (``--opt value`` or ``--opt=value``)."""
    args = Arguments()
    rest = argv[1:] if argv[:1] == [COMMAND] else argv
    items = iter(rest)
    for item in items:
        name, eq, value = item.partition("=")
        if item == "--fail-open":
            args.fail_open = True
            continue
        if name not in (*_VALUED, "--budget"):
            raise HookInputError(f"agent-ledger-hook: unknown argument {item!r}")
        if not eq:
            value = next(items, "")
            if not value:
                raise HookInputError(f"agent-ledger-hook: {name} needs a value")
        if name == "--budget":
            args.budget_pairs.append(value)
        else:
            setattr(args, _VALUED[name], value)
    return args


def options_for(
    budget_pairs: list[str] | tuple[str, ...], vendor_map: str | None, prices: str | None,
    state: Path | None = None,
) -> OptionsFor:
    """Given the budget file found for a session, the options to fold under: what
    ``make_options`` of the command line makes, without click (a bad file is a
    :class:`HookInputError`, and the call is denied saying why). With the hook's ``state``
    folder, the default action map's parse is remembered there (a process reads it once)."""

    def make(found: str | None) -> Options:
        from ledger.config.action_map import (
            ActionMapError,
            default_action_map,
            remembered_default_map,
        )
        from ledger.config.budget_file import read_budget_file, read_family, read_task_classes
        from ledger.config.prices import PricesError, load_prices
        from ledger.config.vendor_map import load_vendor_map
        from ledger.core.budget import Budget, BudgetError
        from ledger.core.task_classes import TaskClasses
        from ledger.core.vendors import DEFAULT_VENDOR_MAP, VendorMapError

        try:
            budget = Budget.from_mapping(read_budget_file(found), Budget()) if found else Budget()
            return Options(
                budget=Budget.from_assignments(tuple(budget_pairs), budget),
                vendor_map=load_vendor_map(vendor_map) if vendor_map else dict(DEFAULT_VENDOR_MAP),
                prices=load_prices(prices) if prices else _library_book(),
                action_map=remembered_default_map(state / ACTION_MAP_FILE)
                if state else default_action_map(),
                task_classes=read_task_classes(found) if found else TaskClasses(),
                subagents_count_in_parent=read_family(found) if found else False,
            )
        except (BudgetError, VendorMapError, PricesError, ActionMapError, OSError) as exc:
            raise HookInputError(str(exc)) from None

    return make


def _library_book() -> PriceBook:
    """The price library's book (:func:`ledger.config.prices.library_book`), its version read
    without :mod:`importlib.metadata` (about 30 ms a call) where the folder tells it."""
    from ledger.config.prices import LIBRARY, library_book, library_rates
    from ledger.core.installed import installed_version

    version = installed_version("genai_prices", LIBRARY)
    return PriceBook(LIBRARY, version, library_rates) if version else library_book()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
    except HookInputError as exc:
        sys.stdout.write(output(verdict_of_failure(None, exc, "--fail-open" in argv), None))
        return
    db = Path(args.db).expanduser().resolve() if args.db else hook_store.default_db()
    make = options_for(args.budget_pairs, args.vendor_map, args.prices, hook_store.state_dir(db))
    text = run(sys.stdin.buffer.read(), db, make, args.budget_file, args.fail_open)
    if text:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
