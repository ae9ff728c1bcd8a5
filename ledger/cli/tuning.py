"""``agent-ledger what-if`` and ``agent-ledger propose-budget``: other budgets, stored sessions."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from ledger.analysis.whatif import Retune
from ledger.cli.options import (
    EXIT_NO_VERIFIED,
    F,
    budget_options,
    read_prices,
    read_vendor_map,
    table,
    utf8_text,
)
from ledger.config.budget_file import read_budget_file
from ledger.config.prices import PricesError
from ledger.core.budget import Budget, BudgetError
from ledger.core.pricing import PriceBook
from ledger.core.vendors import VendorMapError


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


def _prices(path: str | None) -> PriceBook:
    try:
        return read_prices(path)
    except PricesError as exc:
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


@click.command(name="what-if")
@click.argument("db_path", type=click.Path(exists=True, dir_okay=False))
@budget_options
@click.option(
    "--task-class", callback=utf8_text, help="Replay only the sessions of this task class."
)
@limit_option("changed sessions")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def what_if_command(
    db_path: str,
    budget_pairs: tuple[str, ...],
    budget_file: str | None,
    vendor_map: str | None,
    prices: str | None,
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
    from ledger.analysis.whatif import Replayer, saved_line, what_if
    from ledger.db.stored import stored_sessions

    retune = make_retune(budget_pairs, budget_file)
    replayer = Replayer(retune, _vendor_map(vendor_map), _prices(prices))
    with _reading(db_path) as conn:
        report = what_if(stored_sessions(conn, task_class), replayer)
    if not report.sessions:
        click.echo(f"note: no stored sessions{_of_class(task_class)} in {db_path}", err=True)
    if report.unpriced:
        click.echo(
            f"note: max_cost is on, but {report.unpriced} of {report.sessions} sessions have "
            "no round with a cost (none stored, none priced: the cost meter is missing), so "
            "they cannot stop for it",
            err=True,
        )
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
    if report.cost_usd:
        click.echo(saved_line(report))
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
        click.echo("\n" + table(rows, WHAT_IF_COLUMNS))
    if len(shown) < len(report.changes):
        click.echo(f"... and {len(report.changes) - len(shown)} more (--limit 0 lists all)")
    if report.sessions:
        click.echo("\n" + table(report.class_rows(), COUNT_COLUMNS))



@click.command(name="propose-budget")
@click.argument("db_path", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--task-class",
    callback=utf8_text,
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
        try:
            paths = _proposal_paths(output_dir, proposals)
        except OSError as exc:
            raise click.ClickException(f"{output_dir}: cannot be made ({exc.strerror})") from None
        for proposal, path in zip(proposals, paths, strict=True):
            try:
                path.write_text(to_toml(proposal, limit or None), encoding="utf-8")
            except OSError as exc:  # the proposals written so far are named above
                raise click.ClickException(f"{path}: cannot be written ({exc.strerror})") from None
            click.echo(
                f"{path}: {proposal.verified} verified sessions; stops {len(proposal.stopped)} "
                f"of {proposal.trial.sessions} stored sessions"
            )
    else:
        click.echo("\n".join(to_toml(p, limit or None) for p in proposals), nl=False)
        if len(proposals) > 1:  # (each a [budget] table: together no one budget file)
            names = ", ".join(repr(p.task_class) for p in proposals)
            click.echo(
                f"note: {len(proposals)} proposals, one per task class ({names}); a "
                "--budget-file holds one: keep one with --task-class CLASS, or write each "
                "to a file of its own with --output-dir DIR",
                err=True,
            )


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
        said = str(exc)  # named once: some of the messages begin with the path already
        raise click.ClickException(
            said if said.startswith(f"{db_path}: ") else f"{db_path}: {said}"
        ) from None


def _of_class(task_class: str | None) -> str:
    return f" of task class {task_class!r}" if task_class is not None else ""


def _at(reason: str, at: int | None) -> str:
    return reason if at is None else f"{reason} at {at}"
