"""Datasette over a ledger database: ``agent-ledger serve``, with the packaged metadata."""
