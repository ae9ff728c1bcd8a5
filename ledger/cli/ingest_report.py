"""What ``agent-ledger ingest`` does once its options are read, and what it prints: without
click, so that the console script (:mod:`ledger.cli.quick`) runs a plain ingest, ``ingest DB
PATHS`` with no option but ``--strict``, ``--json`` and ``--[no-]progress``, without loading
the command line (some 30 ms of a run that reads a few new lines). The command
(:mod:`ledger.cli.ingest`) runs the same code.

What is printed goes out as ``click.echo`` writes it (:func:`echo`); what click does with an
error, an interrupt or a closed pipe is left to click itself (:func:`reported_by_click`).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

from ledger.cli.quick import FILES_LINE, SESSIONS_LINE
from ledger.core.budget import Budget
from ledger.ingest.files import LedgerPathError
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.ingest.summary import Summary

#: The errors an ingest says in a line (and exits 1 with), as the command says them.
INGEST_ERRORS = (LedgerPathError, sqlite3.DatabaseError)


def plain_ingest(
    db_path: str, paths: tuple[str, ...], strict: bool, as_json: bool, progress: bool | None
) -> int:
    """``agent-ledger ingest DB_PATH PATHS`` with ``--strict``, ``--json`` or
    ``--[no-]progress`` as the command runs it (its options' defaults, its bar, by default on
    a terminal, its errors): the exit code."""
    try:
        from ledger.cli.exit_codes import EXIT_STRICT
        from ledger.config.fold_options import OPTION_ERRORS, options_of
        from ledger.ingest.options import DEFAULT_BATCH, default_jobs, hostname

        jobs, host = default_jobs(), hostname()  # click reads the defaults first
        try:
            options = options_of((), None, None)
        except OPTION_ERRORS as exc:
            reported_by_click(str(exc))
        options.batch, options.jobs, options.host = DEFAULT_BATCH, jobs, host
        try:
            show_bar = sys.stderr.isatty() if progress is None else progress
            summary = ingest_once(db_path, paths, options, show_bar)
        except INGEST_ERRORS as exc:
            reported_by_click(error_message(exc, db_path))
        report(summary, db_path, options, as_json)
    except (KeyboardInterrupt, EOFError, OSError) as exc:
        reported_by_click(exc)
    return EXIT_STRICT if strict and strict_fails(summary) else 0


def error_message(exc: Exception, db_path: str) -> str:
    """What the command says of an error of :data:`INGEST_ERRORS` (``Error: `` before it)."""
    return f"{db_path}: {exc}" if isinstance(exc, sqlite3.DatabaseError) else str(exc)


def ingest_once(
    db_path: str, paths: tuple[str, ...], options: Options, show_bar: bool
) -> Summary:
    """One ingest of ``paths`` into ``db_path``, with a progress bar once it has run a while
    if ``show_bar``."""
    if not show_bar:
        return ingest(db_path, paths, options)
    bar = LateBar(lambda: _size(paths))
    try:
        return ingest(db_path, paths, options, progress=bar.update)
    finally:
        bar.close()


def _size(paths: tuple[str, ...]) -> int:
    from ledger.ingest.files import discover

    return sum(p.stat().st_size for p in discover(paths))


#: Seconds an ingest runs before its progress bar is drawn: a re-run with little or nothing
#: to read is over sooner, and prints what it prints anywhere, bar or not (its quick answer,
#: ledger.cli.quick, draws none).
BAR_AFTER = 0.5


class LateBar:
    """A progress bar of ``total()`` bytes drawn once the work has run :data:`BAR_AFTER`
    seconds, from what was done by then (the files are sized, and click loaded, only then)."""

    def __init__(self, total: Callable[[], int]) -> None:
        self.total, self.done = total, 0
        self.started = time.monotonic()
        self.bar: Any = None

    def update(self, size: int) -> None:
        if self.bar is None:
            self.done += size
            if time.monotonic() - self.started < BAR_AFTER:
                return
            import click

            self.bar = click.progressbar(length=self.total(), label="Ingesting", file=sys.stderr)
            self.bar.__enter__()
            size = self.done
        self.bar.update(size)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def report(summary: Summary, db_path: str, options: Options, as_json: bool) -> None:
    """The notes (to stderr) and the summary of an ingest, readable or as JSON."""
    for notice in summary.notices:
        echo(f"note: {notice}", err=True)
    if as_json:
        from ledger.analysis.budget_in_force import of_budget  # (as in format_summary)

        budget = {"budget": of_budget(options.budget).to_dict()}
        echo(json.dumps({**summary.to_dict(), **budget}, indent=2))
    else:
        echo(format_summary(summary, db_path, options.budget))


def strict_fails(summary: Summary) -> bool:
    """Whether ``--strict`` exits with ``EXIT_STRICT`` after ``summary``."""
    return bool(summary.errors or summary.skipped)


def format_summary(summary: Summary, db_path: str, budget: Budget) -> str:
    """The readable summary; the budget in force is named wherever stops are counted (under
    the seeds' placeholder, a stop says little: see ledger.analysis.budget_in_force)."""
    files = (
        FILES_LINE.format(
            files=summary.files, new=summary.new_files, grown=summary.updated_files,
            unchanged=summary.unchanged_files, lines=summary.lines,
        )
        if summary.passes == 1
        else f"{summary.files} files followed for {summary.passes} passes "
        f"({summary.new_files} new, grown {summary.updated_files} times), "
        f"{summary.lines} lines read"
    )
    lines = [files, SESSIONS_LINE.format(sessions=len(summary.sessions), steps=summary.steps)]
    if summary.stop_reasons:
        counted = ", ".join(f"{r} {n}" for r, n in sorted(summary.stop_reasons.items()))
        lines.append(f"stop reasons: {counted}")
        # Here: only a summary that counts stops names the budget in force.
        from ledger.analysis.budget_in_force import budget_lines, of_budget

        lines.extend(budget_lines([of_budget(budget)], db_path))
    if summary.redactions:
        lines.append(f"{summary.redactions} secrets redacted")
    if summary.waiting:
        lines.append(f"{len(summary.waiting)} files end in an unfinished line (left for later):")
        lines.extend(f"  {w['path']}: {w['bytes']} bytes from byte {w['offset']}"
                     for w in summary.waiting)
    if summary.skipped:
        lines.append(f"{len(summary.skipped)} files skipped (see the notes above)")
    if summary.unknown_records:
        skipped = sum(sum(c.values()) for c in summary.unknown_records.values())
        lines.append(
            f"{skipped} records of unknown types skipped in {len(summary.unknown_records)} "
            "files (see sources.unknown_records)"
        )
    lines.append(
        f"{summary.errors} lines put aside"
        + (f": see the ingest_errors table in {db_path}" if summary.errors else "")
    )
    return "\n".join(lines)


def echo(text: str, err: bool = False) -> None:
    """``click.echo(text, err=err)``: written as it is to a UTF-8 stream when it holds no
    escape sequence; else (click strips them off a stream that is not a terminal, and mends
    a stream misconfigured as ASCII) by click itself."""
    stream = sys.stderr if err else sys.stdout
    if "\x1b" in text or (getattr(stream, "encoding", None) or "").lower() not in UTF8:
        import click

        click.echo(text, err=err)
        return
    stream.write(text + "\n")
    stream.flush()


UTF8 = ("utf-8", "utf8")


def reported_by_click(exc: BaseException | str) -> NoReturn:
    """Ends the process as a click command raising ``exc`` would (an error's message, which
    a text is, an interrupt's ``Aborted!``, a closed pipe's silence, and their exit codes): a
    command made for it raises it, in click's own main loop."""
    import click

    if isinstance(exc, str):
        exc = click.ClickException(exc)

    def reraise() -> NoReturn:
        raise exc

    click.Command("ingest", callback=reraise).main([], prog_name="agent-ledger")
    raise AssertionError("click's main exits")  # pragma: no cover
