"""``agent-ledger serve``: the database in Datasette, with the dashboard."""

from __future__ import annotations

import sys

import click


@click.command(name="serve")
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
    "allow_hosts",
    "--allow-host",
    multiple=True,
    metavar="NAME",
    help="Also answer requests for this Host name (a reverse proxy's); on a loopback bind "
    "only 127.0.0.1, localhost and [::1] are answered otherwise. Repeatable.",
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
    allow_hosts: tuple[str, ...],
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
        agent-ledger serve ledger.db --allow-host ledger.example.com
    """
    from ledger.views.serve import MetadataError, run

    try:
        code = run(
            db_path, host=host, port=port, get=get_path, extra=extra,
            metadata_files=metadata_files, allow_hosts=allow_hosts,
        )
    except MetadataError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)
