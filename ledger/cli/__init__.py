"""The ``agent-ledger`` command line: thin commands over the library.

Exit codes: 0 success; 1 an error (a missing or unreadable path, a bad budget or vendor map, a
database that cannot be opened); 2 a usage error; 3 ``--strict`` and some lines were put aside;
4 ``paid-path --fail-on-stay`` and some task class must stay on the paid path;
5 ``record``: the session's budget is exceeded; 6 ``propose-budget``: nothing to propose from.
"""

from __future__ import annotations

import functools
import json
import signal
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from ledger import __version__
from ledger.analysis.verdicts import (
    MATCH,
    MISMATCH,
    NO_RECORDED_STOP,
    SettingsError,
    Verdicts,
    report_json,
    report_text,
)
from ledger.analysis.whatif import Retune
from ledger.core.budget import Budget, BudgetError
from ledger.core.reasons import StopReason
from ledger.core.vendors import DEFAULT_VENDOR_MAP, VendorMapError, load_vendor_map
from ledger.formats.detect import IMPORTED
from ledger.formats.seed_dialects import DIALECTS
from ledger.ingest.files import LedgerPathError, storable
from ledger.ingest.ingester import follow, ingest
from ledger.ingest.options import DEFAULT_BATCH, DEFAULT_INTERVAL, Options, Summary
from ledger.ingest.parallel import default_jobs

EXIT_ERROR = 1
EXIT_STRICT = 3
EXIT_STAY = 4
EXIT_BUDGET = 5
EXIT_NO_VERIFIED = 6

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


def _utf8_text(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A text the database will store (see :func:`ledger.ingest.files.storable`)."""
    if value is not None and not storable(value):
        raise click.BadParameter("not valid UTF-8", param=param)
    return value


def source_options(func: F) -> F:
    func = click.option(
        "--dialect",
        type=click.Choice([*DIALECTS, *IMPORTED]),
        help="Read every file as this dialect instead of detecting it.",
    )(func)
    func = click.option(
        "--task-class",
        callback=_utf8_text,
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
        mapping = read_vendor_map(vendor_map)
    except (BudgetError, VendorMapError) as exc:
        raise click.ClickException(str(exc)) from None
    return Options(
        budget=budget,
        vendor_map=mapping,
        task_class=task_class,
        dialect=dialect,
        max_line=max_line_bytes,
    )


def fold_options(func: F) -> F:
    """Budget and source options, handed to the command as one ready ``options: Options``."""

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> Any:
        kwargs["options"] = make_options(*(kwargs.pop(name) for name in _FOLD_PARAMS))
        return func(**kwargs)

    return budget_options(source_options(wrapper))  # type: ignore[return-value]


_FOLD_PARAMS = (
    "budget_pairs", "budget_file", "vendor_map", "task_class", "dialect", "max_line_bytes",
)


def read_vendor_map(path: str | None) -> dict[str, str]:
    """The vendor map of ``--vendor-map`` (the default map without one)."""
    return load_vendor_map(path) if path else dict(DEFAULT_VENDOR_MAP)


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
@fold_options
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
@click.option(
    "--jobs", "-j",
    type=click.IntRange(min=0),
    default=default_jobs,
    show_default="one per CPU, at most 2; none on one CPU",
    help="Worker processes that fold files never ingested before while this one writes "
    "(0: fold everything in this process).",
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
    batch_size: int,
) -> None:
    """Replay ledger files into the SQLite database DB_PATH.

    PATHS are ledger files, or folders searched recursively for *.jsonl and *.json. Each
    session is replayed through the budget; sessions, steps, incidents, stop reasons and
    put-aside lines are written. Only new bytes are read on later runs. With --follow, new
    lines are read every --interval seconds until Ctrl-C, which stops after the batch in
    hand, with everything read so far committed. Files never ingested before are folded by
    --jobs worker processes while this one writes (when there are 4 MB of them or more);
    the database is the same either way.

    \b
    Example:
        agent-ledger ingest ledger.db sample_ledgers/
        agent-ledger ingest ledger.db runs/ --budget max_rounds=20 --json
        agent-ledger ingest ledger.db runs/ --follow --interval 0.5
        agent-ledger ingest ledger.db runs/ --jobs 0
    """
    options.batch = batch_size
    options.jobs = jobs
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
    from ledger.ingest.files import discover

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


REPLAY_COLUMNS = (
    "session_id", "task_class", "dialect", "stop_reason", "stop_at", "rounds", "steps",
    "tool_calls", "output_tokens", "writes", "recorded_stop", "vendor_stop",
)


@cli.command(name="replay")
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
    "metadata_files",
    "--metadata",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="YAML or JSON metadata merged over agent-ledger's (e.g. a password). Repeatable.",
)
@click.option(
    "extra",
    "--datasette-option",
    multiple=True,
    metavar="OPTION",
    help="Pass an option through to datasette serve, e.g. --datasette-option=--root.",
)
def serve_command(
    db_path: str,
    host: str,
    port: int,
    get_path: str | None,
    metadata_files: tuple[str, ...],
    extra: tuple[str, ...],
) -> None:
    """Browse DB_PATH in Datasette, with agent-ledger's plugins and metadata.

    Binds to 127.0.0.1 unless told otherwise; the database is opened for reading. The
    dashboard starts at /DB/-/overview (DB is the file name without .db).

    \b
    Example:
        agent-ledger serve ledger.db
        agent-ledger serve ledger.db --port 8080
        agent-ledger serve ledger.db --get /ledger/-/retry-storms.json
        agent-ledger serve ledger.db --host 0.0.0.0 --metadata password.yml
    """
    from ledger.views.serve import MetadataError, run

    try:
        code = run(
            db_path, host=host, port=port, get=get_path, extra=extra,
            metadata_files=metadata_files,
        )
    except MetadataError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)

def make_retune(budget_pairs: tuple[str, ...], budget_file: str | None) -> Retune:
    """--budget and --budget-file as a change to a stored budget (keys not named are kept)."""
    try:
        values = read_budget_file(budget_file) if budget_file else {}

        def retune(stored: Budget) -> Budget:
            return Budget.from_assignments(budget_pairs, Budget.from_mapping(values, stored))

        retune(Budget())  # report a bad key or value now, not at the first session
    except BudgetError as exc:
        raise click.ClickException(str(exc)) from None
    return retune


def _vendor_map(path: str | None) -> dict[str, str]:
    try:
        return read_vendor_map(path)
    except VendorMapError as exc:
        raise click.ClickException(str(exc)) from None


def limit_option(what: str) -> Callable[[F], F]:
    return click.option(
        "--limit",
        type=click.IntRange(min=0),
        default=50,
        show_default=True,
        help=f"List at most N {what} (0: all). --json lists all.",
    )


WHAT_IF_COLUMNS = ("session_id", "task_class", "change", "stored", "what_if", "detail")
COUNT_COLUMNS = ("task_class", "sessions", "earlier", "later", "other_reason", "unchanged")


@cli.command(name="what-if")
@click.argument("db_path", type=click.Path(exists=True, dir_okay=False))
@budget_options
@click.option(
    "--task-class", callback=_utf8_text, help="Replay only the sessions of this task class."
)
@limit_option("changed sessions")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def what_if_command(
    db_path: str,
    budget_pairs: tuple[str, ...],
    budget_file: str | None,
    vendor_map: str | None,
    task_class: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Replay the sessions stored in DB_PATH under another budget; show which stop differently.

    Each session is replayed from its stored steps (no ledger file is read) under the budget
    it was ingested with, changed by --budget and --budget-file; caps not named stay as they
    were. A session that would stop at an earlier event (or at all) is "earlier", at a later
    event (or not at all) "later", at the same event for another reason "other_reason".
    Counts are given per task class. Pass the --vendor-map you ingested with.

    \b
    Example:
        agent-ledger what-if ledger.db --budget max_rounds=20
        agent-ledger what-if ledger.db -b max_output_tokens=8000 -b no_progress_rounds=3 --json
        agent-ledger what-if ledger.db --budget-file proposal.toml --task-class bugfix
    """
    from ledger.analysis.whatif import Replayer, what_if
    from ledger.db.stored import stored_sessions

    retune = make_retune(budget_pairs, budget_file)
    replayer = Replayer(retune, _vendor_map(vendor_map))
    with _reading(db_path) as conn:
        report = what_if(stored_sessions(conn, task_class), replayer)
    if not report.sessions:
        click.echo(f"note: no stored sessions{_of_class(task_class)} in {db_path}", err=True)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
        return
    changes = [budget_file, *budget_pairs] if budget_file else list(budget_pairs)
    click.echo(
        f"{report.sessions} sessions replayed from their stored steps under their stored "
        "budgets" + (f" changed by {', '.join(changes)}." if changes else ".")
    )
    totals = report.totals
    click.echo(
        f"{len(report.changes)} would stop differently: {totals['earlier']} earlier, "
        f"{totals['later']} later, {totals['other_reason']} for another reason."
    )
    shown = report.changes if not limit else report.changes[:limit]
    if shown:
        rows = [
            {
                "session_id": v.session_id, "task_class": v.task_class, "change": v.change,
                "stored": _at(v.old.reason, v.old.at), "what_if": _at(v.new.reason, v.new.at),
                "detail": v.new.detail,
            }
            for v in shown
        ]
        click.echo("\n" + _table(rows, WHAT_IF_COLUMNS))
    if len(shown) < len(report.changes):
        click.echo(f"... and {len(report.changes) - len(shown)} more (--limit 0 lists all)")
    if report.sessions:
        click.echo("\n" + _table(report.class_rows(), COUNT_COLUMNS))


@cli.command(name="propose-budget")
@click.argument("db_path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--task-class",
    callback=_utf8_text,
    help="Propose a budget for this task class only (default: one per class).",
)
@click.option(
    "--vendor-map",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML file that extends or overrides the vendor stop map (as at ingest).",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    help="Write one TASK_CLASS.toml per task class into this folder instead of printing.",
)
@limit_option("stopped sessions per proposal")
@click.option("--json", "as_json", is_flag=True, help="Print the proposals as JSON.")
def propose_budget_command(
    db_path: str,
    task_class: str | None,
    vendor_map: str | None,
    output_dir: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Propose a budget from the sessions in DB_PATH that completed with a verified signal.

    Verified: the budget let the session run out and its log said task_complete. Each cap is
    the tightest value under which every verified session of the task class still completes
    (the observed peak + 1 for seed 000's >= caps, the peak for seed 002's > caps); a cap no
    verified session can be measured on is "off", with the reason. The output is a TOML
    budget file (for --budget-file) labelled a PROPOSAL, followed, as comments, by what it
    would have stopped among the stored sessions of the class.

    Exits with code 6 if no session (of the task class) completed with a verified signal.

    \b
    Example:
        agent-ledger propose-budget ledger.db --task-class refactor > refactor.toml
        agent-ledger propose-budget ledger.db --output-dir proposals/
        agent-ledger propose-budget ledger.db --json
    """
    from ledger.analysis.propose import propose, to_toml, trial, usage
    from ledger.db.stored import VERIFIED, stored_sessions, task_classes

    vendors = _vendor_map(vendor_map)
    proposals = []
    unverified = []
    with _reading(db_path) as conn:
        names = [task_class] if task_class is not None else task_classes(conn)
        for name in names:
            usages = [usage(s, events) for s, events in stored_sessions(conn, name, VERIFIED)]
            if not usages:
                unverified.append(name)
                continue
            proposal = propose(name, usages, source=db_path)
            proposals.append(trial(proposal, stored_sessions(conn, name), vendors))
    for name in unverified:
        click.echo(
            f"note: task class {name!r}: no session completed with a verified terminal signal "
            "(stop_reason = recorded_stop = task_complete); nothing to propose from, keep it "
            "on the paid path",
            err=True,
        )
    if not proposals:
        click.echo(
            f"Error: no session{_of_class(task_class)} in {db_path} completed with a verified "
            "terminal signal: no budget can be proposed",
            err=True,
        )
        sys.exit(EXIT_NO_VERIFIED)
    if as_json:
        click.echo(json.dumps(
            {"proposals": [p.to_dict() for p in proposals], "unverified_task_classes": unverified},
            indent=2,
        ))
    elif output_dir:
        for proposal, path in zip(proposals, _proposal_paths(output_dir, proposals), strict=True):
            path.write_text(to_toml(proposal, limit or None), encoding="utf-8")
            click.echo(
                f"{path}: {proposal.verified} verified sessions; stops {len(proposal.stopped)} "
                f"of {proposal.trial.sessions} stored sessions"
            )
    else:
        click.echo("\n".join(to_toml(p, limit or None) for p in proposals), nl=False)


def _proposal_paths(folder: str, proposals: list[Any]) -> list[Path]:
    """TASK_CLASS.toml for each proposal, made safe and unique as a file name."""
    import re

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for proposal in proposals:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", proposal.task_class or "").strip("._") or "class"
        path, n = target / f"{stem}.toml", 1
        while path in paths:
            n += 1
            path = target / f"{stem}-{n}.toml"
        paths.append(path)
    return paths


@contextmanager
def _reading(db_path: str) -> Iterator[sqlite3.Connection]:
    """The database opened read-only; its errors become a clear message (exit code 1)."""
    from ledger.db.stored import StoredError, open_readonly

    try:
        conn = open_readonly(db_path)
        try:
            yield conn
        finally:
            conn.close()
    except (StoredError, sqlite3.DatabaseError) as exc:
        raise click.ClickException(str(exc)) from None


def _of_class(task_class: str | None) -> str:
    return f" of task class {task_class!r}" if task_class is not None else ""


def _at(reason: str, at: int | None) -> str:
    return reason if at is None else f"{reason} at {at}"


@cli.command(name="leftovers")
@click.argument("repo_path", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    help="Also write the findings to the leftovers table of this ledger database.",
)
@click.option(
    "--patterns",
    "patterns_file",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML file that extends or replaces the categories and their patterns.",
)
@click.option(
    "-o",
    "--output",
    help="Where to write the checklist (default: REPO_PATH/leftovers.md; - for standard output).",
)
@click.option(
    "--max-file-bytes",
    type=click.IntRange(min=1),
    default=2 * 1024 * 1024,
    show_default=True,
    help="Larger files are counted, not read.",
)
@click.option("--strict", is_flag=True, help="Exit with code 3 if any leftover was found.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def leftovers_command(
    repo_path: str,
    db_path: str | None,
    patterns_file: str | None,
    output: str | None,
    max_file_bytes: int,
    strict: bool,
    as_json: bool,
) -> None:
    """Find second control planes in the code base REPO_PATH: places that would restart the
    vendor loop without the budget.

    Searches every text file (not .git, node_modules, binary or larger files) for seed 000's
    patterns and its six leftovers: IDE extensions, CI retries, resume webhooks, cached
    continue prompts, file watchers, dashboards on vendor counters. Writes leftovers.md, a
    checklist grouped by category with what to do about each (delete it, or pass the same
    LoopBudget into it), and with --db the leftovers table (this repository's rows replaced).

    \b
    Example:
        agent-ledger leftovers .
        agent-ledger leftovers ../service --db ledger.db --output service-leftovers.md
        agent-ledger leftovers . --patterns leftovers.toml --strict --json
    """
    from ledger.analysis.leftovers import PatternsError, to_markdown
    from ledger.analysis.scan import scan, store_findings

    if as_json and output == "-":
        raise click.UsageError("--json and --output - both write to standard output")
    try:
        patterns = _leftover_patterns(patterns_file)
    except PatternsError as exc:
        raise click.ClickException(str(exc)) from None
    target = None if output == "-" else Path(output or Path(repo_path) / "leftovers.md")
    result = scan(repo_path, patterns, max_file_bytes, exclude=target)
    text = to_markdown(result.repo, result.findings, result.categories, result.tally)
    try:
        if target is None:
            click.echo(text, nl=False)
        else:
            target.write_text(text, encoding="utf-8")
        if db_path:
            store_findings(db_path, result)
    except OSError as exc:
        raise click.ClickException(f"cannot write: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None
    if as_json:
        click.echo(json.dumps({
            "repo": result.repo,
            "searched": result.tally.to_dict(),
            "findings": [f.to_dict() for f in result.findings],
        }, indent=2))
    elif target is not None:
        counts = Counter(f.category for f in result.findings)
        listed = ", ".join(
            f"{c.name} {counts[c.name]}" for c in result.categories if c.name in counts
        )
        click.echo(
            f"{result.tally.files} files searched, {len(result.findings)} leftovers found"
            + (f" ({listed})" if listed else "")
        )
        also = f" and the leftovers table of {db_path}" if db_path else ""
        click.echo(f"wrote {target}{also}")
    if strict and result.findings:
        sys.exit(EXIT_STRICT)


def _leftover_patterns(path: str | None) -> Any:
    import tomllib

    from ledger.analysis.leftovers import Patterns, PatternsError, load_categories

    if path is None:
        return Patterns()
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PatternsError(f"{path}: not a valid TOML patterns file: {exc}") from None
    return load_categories(data, path)


def verdict_options(func: F) -> F:
    """--tolerance and --min-sessions, shared by verdicts and paid-path."""
    func = click.option(
        "--min-sessions",
        type=click.IntRange(min=1),
        help="Sessions with a recorded stop a class needs before it can be ready "
        "(default: as last computed, else 3).",
    )(func)
    func = click.option(
        "--tolerance",
        type=click.IntRange(min=0),
        help="Rounds (or steps) the replay may stop before the log's end and still match "
        "(default: as last computed, else 1).",
    )(func)
    return func


def _verdicts(
    db_path: str, tolerance: int | None, min_sessions: int | None, write: bool
) -> Verdicts:
    from dataclasses import replace

    from ledger.db import connection, verdict_tables

    try:
        db = connection.connect(db_path)
        try:
            settings = verdict_tables.stored_settings(db.conn)
            if tolerance is not None:
                settings = replace(settings, tolerance=tolerance)
            if min_sessions is not None:
                settings = replace(settings, min_sessions=min_sessions)
            if write:
                return verdict_tables.refresh(db, settings)
            return verdict_tables.compute_from(db.conn, settings)
        finally:
            db.conn.close()
    except (sqlite3.DatabaseError, SettingsError) as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None


@cli.command(name="verdicts")
@click.argument("db_path", type=click.Path(exists=True, dir_okay=False))
@verdict_options
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def verdicts_command(
    db_path: str, tolerance: int | None, min_sessions: int | None, as_json: bool
) -> None:
    """Recompute the migration verdict tables of DB_PATH.

    Writes session_parity (each session's replay against its log's own stop), cap_coverage
    (each cap in force and its meter; the view meter_gaps) and task_classes (a verdict per
    class). Ingest does this too; run it to change the tolerance or the minimum, which are
    kept for later ingests.

    \b
    Example:
        agent-ledger verdicts ledger.db
        agent-ledger verdicts ledger.db --tolerance 2 --min-sessions 5
    """
    found = _verdicts(db_path, tolerance, min_sessions, write=True)
    parity = Counter(p["parity"] for p in found.parity)
    counts = {
        "task_classes": len(found.classes),
        "ready": len(found.classes) - len(found.staying),
        "stay_on_paid_path": len(found.staying),
        "sessions": len(found.parity),
        **{kind: parity[kind] for kind in (MATCH, MISMATCH, NO_RECORDED_STOP)},
        "meter_gaps": sum(1 for c in found.coverage if c["sessions_missing"]),
        "tolerance": found.settings.tolerance,
        "min_sessions": found.settings.min_sessions,
    }
    if as_json:
        click.echo(json.dumps(counts, indent=2))
        return
    click.echo(
        f"{counts['task_classes']} task classes: {counts['ready']} ready, "
        f"{counts['stay_on_paid_path']} stay on the paid path\n"
        f"{counts['sessions']} sessions: {counts[MATCH]} match their log's stop, "
        f"{counts[MISMATCH]} mismatch, {counts[NO_RECORDED_STOP]} have no recorded stop "
        f"(tolerance {counts['tolerance']})\n"
        f"{counts['meter_gaps']} caps in force without their meter (see meter_gaps)"
    )


@cli.command(name="paid-path")
@click.argument("db_path", type=click.Path(exists=True, dir_okay=False))
@verdict_options
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
@click.option(
    "--fail-on-stay",
    is_flag=True,
    help="Exit with code 4 if any task class must stay on the paid path, or if there is "
    "nothing to judge (for CI gates).",
)
def paid_path_command(
    db_path: str,
    tolerance: int | None,
    min_sessions: int | None,
    as_json: bool,
    fail_on_stay: bool,
) -> None:
    """Report which task classes of DB_PATH must stay on the paid path, and why.

    Each class is ready only if every session's replay matches its log's own stop, every cap
    in force has its meter, no vendor stop is unmapped, no session completes without a
    terminal signal, and enough sessions carry a recorded stop. Computed afresh from the
    sessions; nothing is written.

    \b
    Example:
        agent-ledger paid-path ledger.db
        agent-ledger paid-path ledger.db --tolerance 2 --json
        agent-ledger paid-path ledger.db --fail-on-stay || echo "keep the paid key"
    """
    found = _verdicts(db_path, tolerance, min_sessions, write=False)
    if as_json:
        click.echo(json.dumps(report_json(found), indent=2))
    else:
        click.echo(report_text(found))
    if fail_on_stay and (found.staying or not found.classes):
        sys.exit(EXIT_STAY)


#: Which event types each ``record`` option belongs to.
RECORD_FIELDS = {
    "action": ("action",),
    "tool_calls": ("round",),
    "output_tokens": ("round",),
    "vendor_stop": ("round",),
    "observation": ("round", "action"),
    "tool_error": ("round", "action"),
    "outcome": ("end",),
}


@cli.command(name="record")
@click.argument("ledger_path", type=click.Path(dir_okay=False))
@click.option("--session", "session_id", required=True, help="Session id (one per agent run).")
@click.option(
    "--type", "kind", type=click.Choice(["start", "round", "action", "end"]),
    help="Event type (default: action, when --action is given).",
)
@click.option("--action", type=click.Choice(["think", "read", "write", "retry"]),
              help="Action class of an action event.")
@click.option("--detail", help="Short detail (secrets are redacted).")
@click.option("--tool", help="Tool name.")
@click.option("--tool-calls", type=click.IntRange(min=0), help="Round: number of tool calls.")
@click.option("--output-tokens", type=click.IntRange(min=0), help="Round: output tokens.")
@click.option("--observation", help="What the tool or model observed (for the no-progress rule).")
@click.option("--observation-file", type=click.File("r", encoding="utf-8"),
              help="Read the observation from a file ('-' for standard input).")
@click.option("--tool-error/--no-tool-error", default=None, help="The tool failed / succeeded.")
@click.option("--vendor-stop", help="Round: the vendor's raw stop string.")
@click.option("--outcome", type=click.Choice([r.value for r in StopReason]),
              help="End: the session's own outcome.")
@click.option(
    "--task-class",
    callback=_utf8_text,
    help="Task class (the first event that names one sets it).",
)
@budget_options
@click.option("--fsync", is_flag=True, help="Flush the event to disk before deciding.")
@click.option("--json", "as_json", is_flag=True, help="Print the session's row as JSON.")
def record_command(
    ledger_path: str,
    session_id: str,
    kind: str | None,
    observation_file: Any,
    task_class: str | None,
    budget_pairs: tuple[str, ...],
    budget_file: str | None,
    vendor_map: str | None,
    fsync: bool,
    as_json: bool,
    **fields: Any,
) -> None:
    """Append one native event to LEDGER_PATH, replay the session so far, gate on the budget.

    The session's events up to this one are replayed through the budget, exactly as ingest
    would; if the session is stopped and this event is a step, the stop reason is printed and
    the exit code is 5. Elapsed time is measured from the session's first timestamp. Give the
    same --budget to every call of a session (and to ingest).

    \b
    Example:
        agent-ledger record run.jsonl --session s1 --action read --detail "open main.py"
        agent-ledger record run.jsonl --session s1 --type round --tool-calls 2 \\
            --output-tokens 350 --observation "$(cat out.txt)" --budget max_rounds=20
        agent-ledger record run.jsonl --session s1 --type end --outcome task_complete
    """
    from ledger.formats.seed_dialects import RecordError
    from ledger.ingest.replay import replay_session
    from ledger.live.append import append_line
    from ledger.live.recorder import iso, native_line, prepare_ledger, utc_now

    options = make_options(budget_pairs, budget_file, vendor_map)
    kind = kind or ("action" if fields["action"] else None)
    if kind is None:
        raise click.UsageError("give --type, or --action for an action event")
    if observation_file is not None:
        if fields["observation"] is not None:
            raise click.UsageError("give --observation or --observation-file, not both")
        fields["observation"] = observation_file.read()
    for name, kinds in RECORD_FIELDS.items():
        if fields[name] is not None and kind not in kinds:
            option = "--" + name.replace("_", "-")
            raise click.UsageError(f"{option} does not go with --type {kind}")
    if kind == "action" and not fields["action"]:
        raise click.UsageError("an action event needs --action")
    event = {
        "ts": iso(utc_now()), "session": session_id, "type": kind, "task_class": task_class,
        **fields,
    }
    path = Path(ledger_path)
    try:
        prepare_ledger(path)
        line, record, _ = native_line(event)
        _, end = append_line(path, line, fsync)
        session = replay_session(path, session_id, options, end)
    except (LedgerPathError, RecordError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    row = session.row() if session is not None else {}
    if as_json:
        click.echo(json.dumps(row, indent=2))
    state = session.state if session is not None else None
    if state is not None and state.stopped and record.event.is_step:
        if not as_json:
            click.echo(state.stop_reason)
        click.echo(
            f"budget exceeded: {state.stop_detail} (session {session_id}, event "
            f"{state.stop_at})",
            err=True,
        )
        sys.exit(EXIT_BUDGET)


def main() -> None:
    cli()
