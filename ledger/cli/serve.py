"""``agent-ledger serve``: the database in Datasette, with the dashboard."""

from __future__ import annotations

import sys
from pathlib import Path

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

    _check_database(db_path)
    if get_path is None:
        _check_port(host, port)
    try:
        code = run(
            db_path, host=host, port=port, get=get_path, extra=extra,
            metadata_files=metadata_files, allow_hosts=allow_hosts,
        )
    except MetadataError as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)


def _check_database(db_path: str) -> None:
    """A database Datasette cannot open is one line naming it, not its traceback."""
    from ledger.db.merge import Refused, read_only
    from ledger.ingest.files import shown, storable

    if not storable(db_path):
        raise click.ClickException(
            f"{shown(Path(db_path))}: the path is not valid UTF-8, which Datasette cannot serve "
            "(rename the file)"
        ) from None
    try:
        read_only(db_path).close()
    except Refused as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None


def _check_port(host: str, port: int) -> None:
    """A port in use (or an address that is not this machine's) is exit 1 and one line, not
    uvicorn's exit 3 (``--strict``'s code) after its start-up log."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        ) from None
