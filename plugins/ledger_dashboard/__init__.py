"""Datasette plugin for agent-ledger databases."""
