from ledger.cli import cli

cli()
