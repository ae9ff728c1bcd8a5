"""``agent-ledger hook``: the budget enforced live in Claude Code, through its hooks."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from ledger.cli.options import budget_options, make_options, table
from ledger.live import hook_settings, hook_store

DB_HELP = (
    "Ledger database the decisions are written to; the hook's state is kept beside it "
    f"(default: ${hook_store.DB_ENV}, else {hook_store.DEFAULT_DB})."
)


def _db(value: str | None) -> Path:
    return Path(value).expanduser().resolve() if value else hook_store.default_db()


@click.group(name="hook")
def hook_group() -> None:
    """The loop budget enforced live in Claude Code, through its hooks.

    Claude Code runs `agent-ledger hook claude-code` before every tool call; the hook folds the
    session's transcript through the same machine as `ingest` and denies the call once a cap
    is tripped. See docs/hooks.md.

    \b
    Example:
        agent-ledger hook install --project --budget-file .agent-ledger.toml
        agent-ledger hook status
    """


@hook_group.command(name="claude-code")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), help=DB_HELP)
@click.option(
    "--fail-open", is_flag=True,
    help="Allow the call when the hook cannot check it (default: deny it, fail closed).",
)
@budget_options
def claude_code_command(
    db_path: str | None, fail_open: bool, budget_pairs: tuple[str, ...],
    budget_file: str | None, vendor_map: str | None, prices: str | None,
) -> None:
    """Answer one Claude Code hook call: its JSON on standard input, its answer on standard
    output (nothing when the call is allowed). Always exits 0; a call that cannot be checked
    is denied with the reason, unless --fail-open.

    Without --budget-file, the budget is the session folder's .agent-ledger.toml (or the
    nearest one above it), else the defaults.

    \b
    Example (what Claude Code runs; `hook install` writes it for you):
        agent-ledger hook claude-code --db ~/.agent-ledger/ledger.db < call.json
    """
    from ledger.live.hook_main import options_for
    from ledger.live.hook_run import run

    make = options_for(budget_pairs, vendor_map, prices)
    stdin = sys.stdin.buffer.read()
    text = run(stdin, _db(db_path), make, budget_file, fail_open)
    if text:
        click.echo(text)


@hook_group.command(name="serve")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), help=DB_HELP)
@click.option(
    "--fail-open", is_flag=True,
    help="Allow the call when the hook cannot check it (default: deny it, fail closed).",
)
@click.option(
    "--idle-seconds", type=click.FloatRange(min=0.1), default=30 * 60.0, show_default=True,
    help="Stop after this long without a call (the hook starts it again when needed).",
)
@budget_options
def serve_command(
    db_path: str | None, fail_open: bool, idle_seconds: float, budget_pairs: tuple[str, ...],
    budget_file: str | None, vendor_map: str | None, prices: str | None,
) -> None:
    """Answer hook calls from a resident process, warm: what the installed hook starts by
    itself on its first call. Run it by hand to watch it, or under a service manager.

    A call started as a process loads Python and the fold's modules each time; this server
    loads them once and answers over a Unix socket beside the database, one call at a time,
    for the hook installed with the same --db and budget options. It stops after
    --idle-seconds without a call, or once the installed agent-ledger changes under it; a
    second server for the same socket exits at once (exit code 3).

    \b
    Example:
        agent-ledger hook serve --db ~/.agent-ledger/ledger.db
    """
    from ledger.live.hook_main import Arguments, serve

    args = Arguments(str(_db(db_path)), budget_file, vendor_map, prices, fail_open,
                     list(budget_pairs))
    code = serve(args, idle_seconds, announce=True)
    if code:
        sys.exit(code)


def _scope_options(func: Any) -> Any:
    func = click.option(
        "--project", "scope", flag_value="project", default=True,
        help="The project's .claude/settings.json (the default).",
    )(func)
    func = click.option(
        "--local", "scope", flag_value="local",
        help="The project's .claude/settings.local.json (not checked in).",
    )(func)
    func = click.option(
        "--user", "scope", flag_value="user", help="Your ~/.claude/settings.json (every project).",
    )(func)
    return click.option(
        "--dir", "project_dir", type=click.Path(file_okay=False), default=".",
        show_default=True, help="The project folder (for --project and --local).",
    )(func)


def _target(scope: str, project_dir: str) -> Path:
    return hook_settings.settings_path(scope, Path(project_dir).resolve(), Path.home())


def _hook_executable() -> str:
    """How Claude Code should run the plain hook: the light ``agent-ledger-hook`` script (it
    imports only what a call needs, docs/hooks.md), else this Python on its module."""
    found = shutil.which("agent-ledger-hook")
    if found:
        return shlex.quote(str(Path(found).resolve()))
    return f"{shlex.quote(sys.executable)} -P -m ledger.live.hook_main"  # -P: see hook_client


def hook_command(
    db: Path, budget_file: str | None, fail_open: bool, resident: bool,
    idle_seconds: float | None = None,
) -> str:
    """The command ``hook install`` writes: the self-starting client of the resident server
    (``python -S hook_client.py SOCKET ARGS``), or with ``resident`` off the plain hook."""
    from ledger.live.hook_main import hook_args

    args = hook_args(db, budget_file, fail_open=fail_open)
    if not resident:
        return " ".join([_hook_executable(), "claude-code", *map(shlex.quote, args)])
    from ledger.live import hook_client
    from ledger.live.hook_server import socket_path

    client = str(Path(hook_client.__file__).resolve())
    idle = [] if idle_seconds is None else [f"--idle-seconds={idle_seconds:g}"]
    parts = [sys.executable, "-S", "-P", client, str(socket_path(db, args)), *args, *idle]
    return " ".join(map(shlex.quote, parts))


def _apply(path: Path, after: dict[str, Any], before: dict[str, Any], dry_run: bool) -> None:
    if after == before:
        click.echo(f"{path}: already up to date, nothing changed.")
        return
    click.echo(hook_settings.diff(path, before, after), nl=False)
    if dry_run:
        click.echo("(dry run: nothing written)")
        return
    try:
        backup = hook_settings.write(path, after)
    except OSError as exc:  # a read-only folder: the file is as it was
        raise click.ClickException(f"{path}: cannot be written ({exc.strerror or exc})") from None
    click.echo(f"Wrote {path}" + (f" (backup: {backup})" if backup else ""))


def _changed(
    path: Path, change: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings of ``path`` before and after ``change``; an error names the file."""
    try:
        before = hook_settings.read(path)
    except hook_settings.SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        return before, change(before)
    except hook_settings.SettingsError as exc:
        raise click.ClickException(f"{path}: {exc}") from None


@hook_group.command(name="install")
@_scope_options
@click.option(
    "--budget-file", type=click.Path(exists=True, dir_okay=False),
    help="Budget file the hook uses (default: the session folder's .agent-ledger.toml).",
)
@click.option("--db", "db_path", type=click.Path(dir_okay=False), help=DB_HELP)
@click.option("--fail-open", is_flag=True, help="Install the hook with --fail-open.")
@click.option(
    "--resident/--plain", default=True,
    help="--resident (the default): the client of a resident server, which it starts on the "
    "first call and which stops when idle; --plain: a process per call, nothing resident.",
)
@click.option(
    "--idle-seconds", type=click.FloatRange(min=0.1),
    help="How long the resident server waits for a call before it stops (default: 1800).",
)
@click.option("--dry-run", is_flag=True, help="Show the change without writing it.")
def install_command(
    scope: str, project_dir: str, budget_file: str | None, db_path: str | None,
    fail_open: bool, resident: bool, idle_seconds: float | None, dry_run: bool,
) -> None:
    """Add the hook to Claude Code's settings.json: merged with what is there (your other
    hooks are kept), the change shown as a diff, the old file kept as a backup. Running it
    again changes nothing.

    \b
    Example:
        agent-ledger hook install --project --budget-file .agent-ledger.toml
        agent-ledger hook install --user --dry-run
        agent-ledger hook install --plain
    """
    if idle_seconds is not None and not resident:
        raise click.UsageError("--idle-seconds is the resident server's: not with --plain")
    command = hook_command(_db(db_path), budget_file, fail_open, resident, idle_seconds)
    path = _target(scope, project_dir)
    before, after = _changed(path, lambda settings: hook_settings.installed(settings, command))
    _apply(path, after, before, dry_run)


@hook_group.command(name="uninstall")
@_scope_options
@click.option("--dry-run", is_flag=True, help="Show the change without writing it.")
def uninstall_command(scope: str, project_dir: str, dry_run: bool) -> None:
    """Take the hook out of Claude Code's settings.json (only its entries; a backup is kept),
    and stop the resident server its client started, if one runs.

    \b
    Example:
        agent-ledger hook uninstall --project
    """
    from ledger.live.hook_server import stop_servers

    path = _target(scope, project_dir)
    before, after = _changed(path, hook_settings.uninstalled)
    _apply(path, after, before, dry_run)
    if dry_run:
        return
    for sock, db in hook_settings.client_sockets(before):
        for info in stop_servers(Path(db), [sock]):
            click.echo(f"Stopped the resident server (pid {info.pid}) on {sock}.")


@hook_group.command(name="status")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), help=DB_HELP)
@click.option(
    "--budget-file", type=click.Path(exists=True, dir_okay=False),
    help="Budget file to show (default: .agent-ledger.toml of --dir or above it).",
)
@click.option(
    "--dir", "project_dir", type=click.Path(file_okay=False), default=".", show_default=True,
    help="The project folder whose budget file is shown.",
)
@click.option("--session", "session_id", help="Claude Code session id (default: the latest).")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status_command(
    db_path: str | None, budget_file: str | None, project_dir: str, session_id: str | None,
    as_json: bool,
) -> None:
    """Show the budget in force and the session's counters, as the hook last saw them.

    \b
    Example:
        agent-ledger hook status --session 8463c716-a2ea-4c14-9efa-87158ebd9f20
    """
    from ledger.live.hook_run import find_budget_file
    from ledger.live.hook_server import running

    db = _db(db_path)
    found = budget_file or find_budget_file(str(Path(project_dir).resolve()))
    options = make_options((), str(found) if found else None, None)
    try:
        sessions, family = hook_store.session_status(db, session_id)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    budget = options.budget.to_dict()
    servers = [asdict(info) for info in running(db)]
    if as_json:
        click.echo(json.dumps({
            "budget_file": str(found) if found else None, "budget": budget,
            "subagents_count_in_parent": options.subagents_count_in_parent,
            "sessions": sessions, "family": family, "servers": servers,
        }, indent=2))
        return
    click.echo(f"Budget ({found or 'defaults: no .agent-ledger.toml found'}):")
    click.echo(table([{"key": k, "cap": "off" if v is None else v} for k, v in budget.items()],
                     ("key", "cap")))
    if options.subagents_count_in_parent:
        click.echo("subagents_count_in_parent: on (a session and its sub-agents count together)")
    if not sessions:
        click.echo("\nNo session seen by the hook yet.")
    else:
        click.echo("\nSessions:")
        click.echo(table(sessions, tuple(sessions[0])))
    if family is not None:
        click.echo("\nThe family, counted together:")
        click.echo(table([family], tuple(family)))
    if not servers:
        click.echo(f"\nNo resident server running for {db}.")
        return
    click.echo(f"\nResident servers for {db}:")
    click.echo(table(servers, ("pid", "started", "calls", "last_call", "socket")))
