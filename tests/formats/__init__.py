"""Tests of ledger.formats."""
