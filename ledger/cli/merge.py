"""``agent-ledger merge``: other hosts' ledger databases combined into one."""

from __future__ import annotations

import json
import sqlite3
import sys
from contextlib import nullcontext
from typing import Any

import click

from ledger.cli.options import EXIT_ERROR, EXIT_STRICT


@click.command(name="merge")
@click.argument("db_path", metavar="DB", type=click.Path(dir_okay=False))
@click.argument(
    "sources", metavar="SOURCE_DB...", nargs=-1, required=True,
    type=click.Path(exists=True, dir_okay=False),
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option(
    "--progress/--no-progress", default=None, help="Show a progress bar (default: on a terminal)."
)
def merge_command(
    db_path: str, sources: tuple[str, ...], as_json: bool, progress: bool | None
) -> None:
    """Merge other hosts' ledger databases (SOURCE_DB...) into DB, created if needed: their
    sources, sessions, steps, incidents, lines put aside, hook decisions and leftovers, so one
    dashboard, one export and one set of verdicts cover every host (docs/merge.md).

    Keyed by host (sources.host, else the SOURCE_DB's file name): a session id DB already
    holds for another host is kept apart as ID@HOST. Merging a database again writes only
    what changed in it since, and nothing if nothing did. A SOURCE_DB is only read; one made
    by an older agent-ledger is read through a migrated copy. A SOURCE_DB that is no ledger
    (or is from a newer agent-ledger) is reported and skipped, the others are merged, and the
    exit code is 3. The verdict tables are recomputed at the end.

    \b
    Example:
        agent-ledger merge team.db laptop-1.db laptop-2.db ci.db
        agent-ledger merge team.db laptop-*.db --json | jq '.merged[].sessions'
        agent-ledger serve team.db
    """
    from ledger.db import connection, merge

    show_bar = sys.stderr.isatty() if progress is None else progress
    merged: list[dict[str, Any]] = []
    refused: list[dict[str, str]] = []
    try:
        db = connection.connect(db_path)
    except (sqlite3.DatabaseError, OSError) as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None
    try:
        total = sum(merge.sessions_in(path) for path in sources)
        bar = (click.progressbar(length=total, label="Merging", file=sys.stderr)
               if show_bar else nullcontext(None))
        with bar as shown:
            for path in sources:
                try:
                    with merge.open_source(path, db_path) as source:
                        done = merge.merge(db, source, shown.update if shown else _no_progress)
                    merged.append(done.to_dict())
                except merge.Refused as exc:
                    refused.append({"path": path, "reason": str(exc)})
                    click.echo(f"{path}: {exc}; not merged", err=True)
        merge.finish(db, changed=any(m["sessions"] for m in merged))
        (held,) = db.conn.execute("SELECT count(*) FROM sessions").fetchone()
    except sqlite3.DatabaseError as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None
    finally:
        db.conn.close()
    if as_json:
        summary = {"database": db_path, "sessions": held, "merged": merged, "refused": refused}
        click.echo(json.dumps(summary, indent=2))
    else:
        click.echo(_text(merged, refused, held))
    if refused:
        sys.exit(EXIT_STRICT if merged else EXIT_ERROR)


def _no_progress(_n: int) -> None:
    pass


def _text(merged: list[dict[str, Any]], refused: list[dict[str, str]], held: int) -> str:
    lines = []
    for m in merged:
        apart = m["renamed_sessions"]
        renamed = f", {apart} kept apart as ID@HOST" if apart else ""
        migrated = (f" (a copy migrated from schema {m['migrated_from']})"
                    if m["migrated_from"] is not None else "")
        lines.append(
            f"{m['path']}{migrated}: hosts {', '.join(m['hosts']) or '-'}; "
            f"{m['sources']} sources written, {m['unchanged_sources']} unchanged; "
            f"{m['sessions']} sessions, {m['steps']} steps, {m['incidents']} incidents{renamed}"
        )
    if refused:
        lines.append(f"{len(refused)} databases not merged (see above)")
    lines.append(f"{held} sessions in the merged database")
    return "\n".join(lines)
