"""The ``agent-ledger`` command group: thin commands over the library, one module per group.

A command's module is imported only when that command runs (or its help is shown), so a
command starts with no more than it needs: :class:`LazyGroup` maps each name to
``module:function``. The exit codes are listed in :mod:`ledger.cli.options`.
"""

from __future__ import annotations

import importlib

import click

from ledger import __version__

COMMANDS = {
    "ingest": "ledger.cli.ingest:ingest_command",
    "replay": "ledger.cli.ingest:replay_command",
    "serve": "ledger.cli.serve:serve_command",
    "verdicts": "ledger.cli.verdicts:verdicts_command",
    "paid-path": "ledger.cli.verdicts:paid_path_command",
    "what-if": "ledger.cli.tuning:what_if_command",
    "propose-budget": "ledger.cli.tuning:propose_budget_command",
    "leftovers": "ledger.cli.leftovers:leftovers_command",
    "record": "ledger.cli.record:record_command",
    "hook": "ledger.cli.hook:hook_group",
    "export": "ledger.cli.export:export_command",
    "merge": "ledger.cli.merge:merge_command",
}


class LazyGroup(click.Group):
    """A group whose commands are imported by name when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            module, _, attr = COMMANDS[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="agent-ledger")
def cli() -> None:
    """Replay coding-agent ledgers through a loop budget, into SQLite, for Datasette.

    \b
    Example:
        agent-ledger ingest ledger.db sample_ledgers/
        agent-ledger serve ledger.db
    """
