"""The README documents every command and every option, so the docs cannot drift from --help."""

from __future__ import annotations

import click
import pytest

from ledger.cli import cli
from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()
COMMANDS = sorted((n, cli.get_command(None, n)) for n in cli.list_commands(None))


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_command_and_option_is_in_the_readme(name: str, command: click.Command) -> None:
    assert f"agent-ledger {name}" in README
    options = [
        opt for param in command.params if isinstance(param, click.Option) and not param.hidden
        for opt in param.opts + param.secondary_opts if opt.startswith("--")
    ]
    missing = [opt for opt in options if opt not in README]
    assert not missing, f"{name}: {missing}"


def test_every_exit_code_in_the_cli_is_in_the_readme_table() -> None:
    from ledger.cli import options as module

    codes = {value for key, value in vars(module).items() if key.startswith("EXIT_")}
    for code in codes:
        assert f"\n| {code} |" in README, code
