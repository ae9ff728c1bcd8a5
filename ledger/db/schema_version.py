"""The schema version of a database this agent-ledger made or migrated (``PRAGMA user_version``).

A module of its own, so the entry point (:mod:`ledger.cli.quick`) can tell whether a database
is current without importing the migrations; :mod:`ledger.db.migrations` refuses to load if
this is not the number of its migrations (appending one means raising this).
"""

SCHEMA_VERSION = 15
