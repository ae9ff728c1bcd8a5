"""Tests of ledger.cli."""
