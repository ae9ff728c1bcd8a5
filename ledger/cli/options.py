"""What the commands share: budget, source and fold options, the exit codes, a plain table.

Exit codes: 0 success; 1 an error (a path that does not exist, a bad budget, vendor map,
action map or prices file, a database that cannot be opened; for ``merge``, no database could
be merged); 2 a usage error; 3 ``--strict`` and some lines were put aside (or, for ``ingest``,
some files skipped), and ``merge`` when some databases were not merged (the others were);
4 ``paid-path --fail-on-stay`` and some task class must stay on the paid path;
5 ``record``: the session's budget is exceeded; 6 ``propose-budget``: nothing to propose from.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ledger.config.action_map import ActionMapError, default_action_map, load_action_map
from ledger.config.fold_options import (
    options_from_files,
    read_vendor_map,  # noqa: F401 - the commands read it here
)
from ledger.config.prices import PricesError, load_prices
from ledger.core.budget import BudgetError
from ledger.core.pricing import PriceBook
from ledger.core.vendors import VendorMapError
from ledger.formats.detect import IMPORTED
from ledger.formats.seed_dialects import DIALECTS
from ledger.ingest.files import storable
from ledger.ingest.options import Options

EXIT_ERROR = 1
EXIT_STRICT = 3
EXIT_STAY = 4
EXIT_BUDGET = 5
EXIT_NO_VERIFIED = 6

F = TypeVar("F", bound=Callable[..., Any])



def budget_options(func: F) -> F:
    """--budget, --budget-file, --vendor-map and --prices, shared by every command that folds."""
    func = click.option(
        "--prices",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML file of model prices (USD per million tokens) over the pinned price data.",
    )(func)
    func = click.option(
        "--vendor-map",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML file that extends or overrides the vendor stop map.",
    )(func)
    func = click.option(
        "--budget-file",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML file of budget keys (top level or under [budget]); for ingest and replay, "
        "its [task_classes] names task classes by folder glob.",
    )(func)
    func = click.option(
        "budget_pairs",
        "--budget",
        "-b",
        multiple=True,
        metavar="KEY=VALUE",
        help="Set a budget cap, e.g. max_rounds=20 or max_seconds=off. Repeatable.",
    )(func)
    return func


def utf8_text(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A text the database will store (see :func:`ledger.ingest.files.storable`)."""
    if value is not None and not storable(value):
        raise click.BadParameter("not valid UTF-8", param=param)
    return value


def source_options(func: F) -> F:
    """How files are read: --action-map (the importers class tool calls with it), --dialect,
    --task-class and --max-line-bytes."""
    func = click.option(
        "--action-map",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML file that extends or overrides the action map: the class (think, read, "
        "write) of each tool and shell command in real agent logs.",
    )(func)
    func = click.option(
        "--dialect",
        type=click.Choice([*DIALECTS, *IMPORTED]),
        help="Read every file as this dialect instead of detecting it.",
    )(func)
    func = click.option(
        "--task-class",
        callback=utf8_text,
        help="Task class for sessions whose events name none (default: parent folder name).",
    )(func)
    func = click.option(
        "--max-line-bytes",
        type=click.IntRange(min=1024),
        default=8 * 1024 * 1024,
        show_default=True,
        help="Longer lines are put aside, never held in memory.",
    )(func)
    return func


def make_options(
    budget_pairs: tuple[str, ...],
    budget_file: str | None,
    vendor_map: str | None,
    prices: str | None = None,
    action_map: str | None = None,
    task_class: str | None = None,
    dialect: str | None = None,
    max_line_bytes: int = 8 * 1024 * 1024,
) -> Options:
    try:
        return options_from_files(
            budget_pairs, budget_file, vendor_map, read_prices(prices),
            load_action_map(action_map) if action_map else default_action_map(),
            task_class=task_class, dialect=dialect, max_line=max_line_bytes,
        )
    except (BudgetError, VendorMapError, PricesError, ActionMapError) as exc:
        raise click.ClickException(str(exc)) from None


def fold_options(func: F) -> F:
    """Budget and source options, handed to the command as one ready ``options: Options``."""

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        kwargs["options"] = make_options(*(kwargs.pop(name) for name in _FOLD_PARAMS))
        return func(**kwargs)

    return budget_options(source_options(wrapper))  # type: ignore[return-value]


_FOLD_PARAMS = (
    "budget_pairs", "budget_file", "vendor_map", "prices", "action_map", "task_class",
    "dialect",
    "max_line_bytes",
)


def read_prices(path: str | None) -> PriceBook:
    """The price book of ``--prices`` over the pinned price data (that data alone without)."""
    return load_prices(path)





def table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    cells = [[("" if r[c] is None else str(r[c])) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    out = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out.extend("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells)
    return "\n".join(line.rstrip() for line in out)
