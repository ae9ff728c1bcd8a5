"""agent-ledger: replay coding-agent ledgers through a loop budget into SQLite."""

__version__ = "0.1.0"
