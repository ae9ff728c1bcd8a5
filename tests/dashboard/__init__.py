"""Tests of the dashboard plugin (ledger_dashboard) and of serve."""
