"""Tests of ledger.live."""
