"""The ``agent-ledger`` command line: thin commands over the library, one module per group.

The console script is :func:`ledger.cli.quick.main`, which answers a re-ingest with nothing
to read before click is imported, and otherwise runs :data:`cli`, the command group of
:mod:`ledger.cli.group` (imported here only when asked for, so the quick answer does not pay
for it). The exit codes are listed in :mod:`ledger.cli.options`.
"""



def __getattr__(name: str) -> object:  # (no typing import: it costs the quick answer 10 ms)
    if name == "cli":
        from ledger.cli.group import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
