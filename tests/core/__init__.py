"""Tests of ledger.core."""
