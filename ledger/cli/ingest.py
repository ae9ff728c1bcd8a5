"""``agent-ledger ingest`` and ``agent-ledger replay``: ledger files through the budget."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

import click

from ledger.cli.ingest_report import (
    INGEST_ERRORS,
    error_message,
    ingest_once,
    report,
    strict_fails,
)
from ledger.cli.options import EXIT_STRICT, fold_options, table
from ledger.core.redact import redact_json
from ledger.ingest.files import LedgerPathError
from ledger.ingest.ingester import follow
from ledger.ingest.options import (
    DEFAULT_BATCH,
    DEFAULT_INTERVAL,
    Options,
    default_jobs,
    hostname,
)
from ledger.ingest.summary import Summary


@click.command(name="ingest")
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@fold_options
@click.option(
    "--strict", is_flag=True, help="Exit with code 3 if any line was put aside or any file skipped."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--progress/--no-progress", default=None,
    help="Show a progress bar once an ingest has run half a second (default: on a terminal).",
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
@click.option(
    "--jobs", "-j",
    type=click.IntRange(min=0),
    default=default_jobs,
    show_default="one per CPU, at most 2; none on one CPU",
    help="Worker processes that fold files never ingested before while this one writes "
    "(0: fold everything in this process).",
)
@click.option(
    "--host",
    default=hostname,
    show_default="this machine's name",
    help="The machine name recorded with each new source (sources.host), by which exports "
    "and the dashboard tell hosts apart.",
)
@click.option(
    "--resident", is_flag=True,
    help="Ask a server that stays up for this database (started on the first such call, "
    "ended after 10 idle minutes) to run the ingest, warm: the same output and exit code "
    "without Python's start and imports, and no progress bar. Takes no option but --strict, "
    "--json and --[no-]progress. See docs/resident.md.",
)
@click.option(
    "--stop", is_flag=True,
    help="With --resident and no PATHS: stop this database's resident servers.",
)
@click.option("--batch-size", type=click.IntRange(min=1), default=DEFAULT_BATCH, hidden=True)
def ingest_command(
    db_path: str,
    paths: tuple[str, ...],
    options: Options,
    strict: bool,
    as_json: bool,
    progress: bool | None,
    follow: bool,
    interval: float,
    jobs: int,
    host: str,
    resident: bool,
    stop: bool,
    batch_size: int,
) -> None:
    """Replay ledger files into the SQLite database DB_PATH.

    PATHS are ledger files, or folders searched recursively for *.jsonl and *.json. Each
    session is replayed through the budget; sessions, steps, incidents, stop reasons and
    put-aside lines are written. Only new bytes are read on later runs. With --follow, new
    lines are read every --interval seconds until Ctrl-C, which stops after the batch in
    hand, with everything read so far committed. What is not a readable regular file (a
    FIFO, a device, a link loop) is skipped with a note naming it and why, and the rest is
    ingested. Files never ingested before are folded by --jobs worker processes while this
    one writes (when there are 4 MB of them or more); the database is the same either way.

    \b
    Example:
        agent-ledger ingest ledger.db sample_ledgers/
        agent-ledger ingest ledger.db runs/ --budget max_rounds=20 --json
        agent-ledger ingest ledger.db runs/ --follow --interval 0.5
        agent-ledger ingest ledger.db runs/ --jobs 0
        agent-ledger ingest ledger.db runs/ --resident
    """
    if resident or stop:  # the console script answers those it can (ledger.cli.resident_client)
        raise click.UsageError(
            "--resident takes no option but --strict, --json and --[no-]progress, and "
            "--stop goes with --resident and the database alone"
        )
    options.batch = batch_size
    options.jobs = jobs
    options.host = host
    show_bar = sys.stderr.isatty() if progress is None else progress
    try:
        if follow:
            summary = _follow(db_path, paths, options, interval)
        else:
            summary = ingest_once(db_path, paths, options, show_bar)
    except INGEST_ERRORS as exc:
        raise click.ClickException(error_message(exc, db_path)) from None
    report(summary, db_path, options, as_json)
    if strict and strict_fails(summary):
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


REPLAY_COLUMNS = (
    "session_id", "task_class", "dialect", "stop_reason", "stop_at", "rounds", "steps",
    "tool_calls", "output_tokens", "writes", "recorded_stop", "vendor_stop",
)


@click.command(name="replay")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@fold_options
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of session objects.")
def replay_command(paths: tuple[str, ...], options: Options, as_json: bool) -> None:
    """Replay ledger files through the budget and print each session's stop, storing nothing.

    \b
    Example:
        agent-ledger replay sample_ledgers/seed-trace.json --budget no_progress_rounds=2
        agent-ledger replay runs/ --json | jq '.[] | select(.stop_reason != "task_complete")'
    """
    from ledger.ingest.replay import replay

    sessions: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    try:
        for rows, put_aside in replay(paths, options):
            sessions.extend(rows)
            errors.extend(put_aside)
    except LedgerPathError as exc:
        raise click.ClickException(str(exc)) from None
    # An export, like the database: every text in it redacted (session ids, paths too).
    (sessions, errors), _ = redact_json([sessions, errors])
    for error in errors:
        where = f"{error['path']}:{error['line']}" if error["line"] else error["path"]
        click.echo(f"put aside: {where}: {error['reason']}", err=True)
    if as_json:
        click.echo(json.dumps(sessions, indent=2))
        return
    click.echo(table(sessions, REPLAY_COLUMNS))
