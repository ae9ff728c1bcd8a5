"""The ``agent-ledger`` command line: thin commands over the library.

Exit codes: 0 success; 1 an error (a missing or unreadable path, a bad budget or vendor map, a
database that cannot be opened); 2 a usage error; 3 ``--strict`` and some lines were put aside.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from . import __version__
from .budget import Budget, BudgetError
from .files import LedgerPathError
from .ingest import DEFAULT_BATCH, DEFAULT_INTERVAL, Options, Summary, follow, ingest
from .vendors import DEFAULT_VENDOR_MAP, VendorMapError, load_vendor_map

EXIT_ERROR = 1
EXIT_STRICT = 3

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agent-ledger")
def cli() -> None:
    """Replay coding-agent ledgers through a loop budget, into SQLite, for Datasette.

    \b
    Typical use:
        agent-ledger ingest ledger.db sample_ledgers/
        agent-ledger serve ledger.db
    """


def budget_options(func: F) -> F:
    """--budget, --budget-file and --vendor-map, shared by every command that folds."""
    func = click.option(
        "--vendor-map",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML file that extends or overrides the vendor stop map.",
    )(func)
    func = click.option(
        "--budget-file",
        type=click.Path(exists=True, dir_okay=False),
        help="TOML file of budget keys (top level or under [budget]).",
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


def source_options(func: F) -> F:
    func = click.option(
        "--dialect",
        type=click.Choice(["native", "gate", "trace"]),
        help="Read every file as this dialect instead of detecting it.",
    )(func)
    func = click.option(
        "--task-class",
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
    task_class: str | None = None,
    dialect: str | None = None,
    max_line_bytes: int = 8 * 1024 * 1024,
) -> Options:
    try:
        budget = Budget()
        if budget_file:
            budget = Budget.from_mapping(read_budget_file(budget_file), budget)
        budget = Budget.from_assignments(budget_pairs, budget)
        mapping = load_vendor_map(vendor_map) if vendor_map else dict(DEFAULT_VENDOR_MAP)
    except (BudgetError, VendorMapError) as exc:
        raise click.ClickException(str(exc)) from None
    return Options(
        budget=budget,
        vendor_map=mapping,
        task_class=task_class,
        dialect=dialect,
        max_line=max_line_bytes,
    )


def read_budget_file(path: str) -> dict[str, Any]:
    import tomllib

    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BudgetError(f"{path}: not a valid TOML budget file: {exc}") from None
    table = data.get("budget", data)
    if not isinstance(table, dict):
        raise BudgetError(f"{path}: [budget] must be a table")
    return table


@cli.command(name="ingest")
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@budget_options
@source_options
@click.option("--strict", is_flag=True, help="Exit with code 3 if any line was put aside.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--progress/--no-progress", default=None, help="Show a progress bar (default: on a terminal)."
)
@click.option(
    "--follow", "-f", is_flag=True,
    help="Keep ingesting lines as they are appended, until Ctrl-C (or SIGTERM).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=DEFAULT_INTERVAL,
    show_default=True,
    help="Seconds between two passes of --follow.",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=DEFAULT_BATCH, hidden=True)
def ingest_command(
    db_path: str,
    paths: tuple[str, ...],
    budget_pairs: tuple[str, ...],
    budget_file: str | None,
    vendor_map: str | None,
    task_class: str | None,
    dialect: str | None,
    max_line_bytes: int,
    strict: bool,
    as_json: bool,
    progress: bool | None,
    follow: bool,
    interval: float,
    batch_size: int,
) -> None:
    """Replay ledger files into the SQLite database DB_PATH.

    PATHS are ledger files, or folders searched recursively for *.jsonl and *.json. Each
    session is replayed through the budget; sessions, steps, incidents, stop reasons and
    put-aside lines are written. Only new bytes are read on later runs. With --follow, new
    lines are read every --interval seconds until Ctrl-C, which stops after the batch in
    hand, with everything read so far committed.

    \b
    Example:
        agent-ledger ingest ledger.db sample_ledgers/
        agent-ledger ingest ledger.db runs/ --budget max_rounds=20 --json
        agent-ledger ingest ledger.db runs/ --follow --interval 0.5
    """
    options = make_options(
        budget_pairs, budget_file, vendor_map, task_class, dialect, max_line_bytes
    )
    options.batch = batch_size
    show_bar = sys.stderr.isatty() if progress is None else progress
    try:
        if follow:
            summary = _follow(db_path, paths, options, interval)
        elif show_bar:
            summary = _ingest_with_bar(db_path, paths, options)
        else:
            summary = ingest(db_path, paths, options)
    except LedgerPathError as exc:
        raise click.ClickException(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None
    for notice in summary.notices:
        click.echo(f"note: {notice}", err=True)
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        click.echo(format_summary(summary, db_path))
    if strict and summary.errors:
        sys.exit(EXIT_STRICT)


def _follow(db_path: str, paths: tuple[str, ...], options: Options, interval: float) -> Summary:
    """``ingest --follow``: SIGINT or SIGTERM ask it to stop after the batch in hand; a second
    Ctrl-C aborts at once (the batch in hand is rolled back, nothing committed is lost)."""
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()

    seen = {"lines": 0, "notices": 0}
    told: set[str] = set()  # a file unreadable for a while is noted once, not every pass

    def report(summary: Summary) -> None:
        for notice in summary.notices[seen["notices"]:]:
            if notice not in told:
                click.echo(f"note: {notice}", err=True)
                told.add(notice)
        if summary.lines > seen["lines"]:
            click.echo(
                f"{time.strftime('%H:%M:%S')} {summary.lines - seen['lines']} lines read "
                f"({summary.lines} in all, {summary.errors} put aside)",
                err=True,
            )
        seen.update(lines=summary.lines, notices=len(summary.notices))

    handlers = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        summary = follow(db_path, paths, options, interval, stop, report)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    summary.notices = summary.notices[seen["notices"]:]
    return summary


def _ingest_with_bar(db_path: str, paths: tuple[str, ...], options: Options) -> Summary:
    from .files import discover

    total = sum(p.stat().st_size for p in discover(paths))
    with click.progressbar(length=total, label="Ingesting", file=sys.stderr) as bar:
        return ingest(db_path, paths, options, progress=bar.update)


def format_summary(summary: Summary, db_path: str) -> str:
    files = (
        f"{summary.files} files ({summary.new_files} new, {summary.updated_files} grown, "
        f"{summary.unchanged_files} unchanged)"
        if summary.passes == 1
        else f"{summary.files} files followed for {summary.passes} passes "
        f"({summary.new_files} new, grown {summary.updated_files} times)"
    )
    lines = [
        f"{files}, {summary.lines} lines read",
        f"{len(summary.sessions)} sessions updated, {summary.steps} steps added",
    ]
    if summary.stop_reasons:
        counted = ", ".join(f"{r} {n}" for r, n in sorted(summary.stop_reasons.items()))
        lines.append(f"stop reasons: {counted}")
    if summary.redactions:
        lines.append(f"{summary.redactions} secrets redacted")
    if summary.waiting:
        lines.append(f"{len(summary.waiting)} files have no complete line yet (left for later)")
    lines.append(
        f"{summary.errors} lines put aside"
        + (f": see the ingest_errors table in {db_path}" if summary.errors else "")
    )
    return "\n".join(lines)


REPLAY_COLUMNS = (
    "session_id", "task_class", "dialect", "stop_reason", "stop_at", "rounds", "steps",
    "tool_calls", "output_tokens", "writes", "recorded_stop", "vendor_stop",
)


@cli.command(name="replay")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@budget_options
@source_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of session objects.")
def replay_command(
    paths: tuple[str, ...],
    budget_pairs: tuple[str, ...],
    budget_file: str | None,
    vendor_map: str | None,
    task_class: str | None,
    dialect: str | None,
    max_line_bytes: int,
    as_json: bool,
) -> None:
    """Replay ledger files through the budget and print each session's stop, storing nothing.

    \b
    Example:
        agent-ledger replay sample_ledgers/seed-trace.json --budget no_progress_rounds=2
        agent-ledger replay runs/ --json | jq '.[] | select(.stop_reason != "task_complete")'
    """
    from .replay import replay

    options = make_options(
        budget_pairs, budget_file, vendor_map, task_class, dialect, max_line_bytes
    )
    sessions: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    try:
        for rows, put_aside in replay(paths, options):
            sessions.extend(rows)
            errors.extend(put_aside)
    except LedgerPathError as exc:
        raise click.ClickException(str(exc)) from None
    for error in errors:
        where = f"{error['path']}:{error['line']}" if error["line"] else error["path"]
        click.echo(f"put aside: {where}: {error['reason']}", err=True)
    if as_json:
        click.echo(json.dumps(sessions, indent=2))
        return
    click.echo(_table(sessions, REPLAY_COLUMNS))


def _table(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    cells = [[("" if r[c] is None else str(r[c])) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    out = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out.extend("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells)
    return "\n".join(line.rstrip() for line in out)


@cli.command(name="serve")
@click.argument("db_path", type=click.Path(exists=True, dir_okay=False))
@click.option("-h", "--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("-p", "--port", default=8001, show_default=True, type=int, help="Port to bind.")
@click.option("--get", "get_path", help="Fetch one path, print it and exit (no server).")
@click.option(
    "extra",
    "--datasette-option",
    multiple=True,
    metavar="OPTION",
    help="Pass an option through to datasette serve, e.g. --datasette-option=--root.",
)
def serve_command(
    db_path: str, host: str, port: int, get_path: str | None, extra: tuple[str, ...]
) -> None:
    """Browse DB_PATH in Datasette, with agent-ledger's plugins and metadata.

    Binds to 127.0.0.1 unless told otherwise; the database is opened for reading.

    \b
    Example:
        agent-ledger serve ledger.db
        agent-ledger serve ledger.db --port 8080
        agent-ledger serve ledger.db --get /ledger/sessions.json
    """
    from .serve import run

    sys.exit(run(db_path, host=host, port=port, get=get_path, extra=extra))


def main() -> None:
    cli()
