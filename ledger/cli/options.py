"""What the commands share: budget, source and fold options, the exit codes (listed in
:mod:`ledger.cli.exit_codes`), a plain table."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ledger.cli.exit_codes import (  # noqa: F401 - the commands take them from here
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_NO_VERIFIED,
    EXIT_STAY,
    EXIT_STRICT,
)
from ledger.config.fold_options import (
    OPTION_ERRORS,
    options_of,
    read_vendor_map,  # noqa: F401 - the commands read it here
)
from ledger.config.prices import load_prices
from ledger.core.pricing import PriceBook
from ledger.formats.detect import IMPORTED
from ledger.formats.seed_dialects import DIALECTS
from ledger.ingest.files import DEFAULT_MAX_LINE, storable
from ledger.ingest.options import Options

F = TypeVar("F", bound=Callable[..., Any])



def ledger_database(db_path: str, new_ok: bool = False) -> None:
    """Exit 1 naming ``db_path`` unless it is an agent-ledger database (see
    :func:`ledger.db.merge.check_ledger`): a foreign SQLite file is left as it is."""
    from ledger.db.merge import Refused, check_ledger

    try:
        check_ledger(db_path, new_ok)
    except Refused as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None


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
        default=DEFAULT_MAX_LINE,
        show_default=True,
        help="Longer lines are put aside, never held in memory.",
    )(func)
    return func


def make_options(*args: Any, **kwargs: Any) -> Options:
    """:func:`ledger.config.fold_options.options_of`, a bad file said as click says an error."""
    try:
        return options_of(*args, **kwargs)
    except OPTION_ERRORS as exc:
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
