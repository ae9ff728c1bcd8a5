"""Tests of ledger.db."""
