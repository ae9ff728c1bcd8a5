"""``agent-ledger export``: the database as Parquet, for DuckDB, ClickHouse, Spark, ..."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import click


@click.command(name="export")
@click.argument("db_path", type=click.Path(exists=True, dir_okay=False))
@click.argument("out", type=click.Path(file_okay=False))
@click.option(
    "--host",
    help="The host partition of sources that name none, and of this database's task classes "
    "(default: the one host its sources name, else this machine's name).",
)
@click.option(
    "--full",
    is_flag=True,
    help="Rewrite every partition, and remove those whose sessions are gone.",
)
def export_command(db_path: str, out: str, host: str | None, full: bool) -> None:
    """Write the sessions, steps, incidents, stop reasons and task-class verdicts of DB_PATH
    as Parquet under OUT, partitioned by day and host (docs/export.md).

    Incremental: only the partitions with a session changed since the last export of OUT are
    rewritten. Each file is replaced atomically. Needs the export extra:
    pip install 'agent-ledger[export]'.

    \b
    Example:
        agent-ledger export ledger.db export/
        duckdb -c "from read_parquet('export/sessions/**/*.parquet')"
    """
    try:
        from ledger.export.parquet import export
    except ImportError as exc:
        raise click.ClickException(
            f"export needs pyarrow ({exc.name} is not installed): "
            "pip install 'agent-ledger[export]'"
        ) from None
    from ledger.cli.options import ledger_database
    from ledger.db import connection
    from ledger.ingest.files import shown, storable

    if not storable(out):
        raise click.ClickException(
            f"{shown(Path(out))}: the path is not valid UTF-8, which the database cannot store "
            "as the export's folder (rename it)"
        )
    ledger_database(db_path)
    try:
        db = connection.connect(db_path)
        try:
            summary = export(db.conn, Path(out), host, full=full)
        finally:
            db.conn.close()
    except (sqlite3.DatabaseError, OSError) as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None
    removed = f", {summary.removed} removed" if summary.removed else ""
    click.echo(
        f"{summary.partitions} partitions written ({summary.sessions} sessions){removed}; "
        f"{summary.sources} sources up to date"
    )
