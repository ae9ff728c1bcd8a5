"""Tests of ledger.compat: the seeds' own tests, and parity with the seeds' code."""
