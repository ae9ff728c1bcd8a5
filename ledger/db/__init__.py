"""The database: connection settings, ordered migrations, batch writes and what is read back.

The schema is a documented contract (docs/schema.md), changed only by appending a migration.
"""
