"""``agent-ledger verdicts`` and ``agent-ledger paid-path``: which task classes may leave."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from typing import Any

import click

from ledger.analysis.budget_in_force import BudgetInForce, in_force
from ledger.analysis.verdict_report import report_json, report_text
from ledger.analysis.verdicts import MATCH, MISMATCH, NO_RECORDED_STOP, SettingsError, Verdicts
from ledger.cli.options import (
    EXIT_STAY,
    F,
    ledger_database,
)


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
    from msgspec.structs import replace

    from ledger.db import connection, verdict_tables

    ledger_database(db_path)
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


def _budgets(db_path: str) -> list[BudgetInForce]:
    """The budgets DB_PATH's sessions were folded under (read-only)."""
    from ledger.db.stored import budgets, open_readonly

    try:
        conn = open_readonly(db_path)
        try:
            return in_force(budgets(conn))
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None


def _spend(db_path: str) -> dict[str, Any]:
    """Each task class's spend, for the paid-path report (read only)."""
    from ledger.db.stored import open_readonly, spend_by_class

    conn = open_readonly(db_path)
    try:
        return spend_by_class(conn)
    finally:
        conn.close()


@click.command(name="verdicts")
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


@click.command(name="paid-path")
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
    budgets, spend = _budgets(db_path), _spend(db_path)
    if as_json:
        click.echo(json.dumps(report_json(found, budgets, spend), indent=2))
    else:
        click.echo(report_text(found, budgets, db_path, spend))
    if fail_on_stay and (found.staying or not found.classes):
        sys.exit(EXIT_STAY)


#: Which event types each ``record`` option belongs to.
