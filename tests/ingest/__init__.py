"""Tests of ledger.ingest."""
