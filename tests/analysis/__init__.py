"""Tests of ledger.analysis."""
