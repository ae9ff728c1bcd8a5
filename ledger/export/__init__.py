"""The ledger as Parquet, for engines beyond one machine (``agent-ledger export``).

:mod:`ledger.export.contract` is what is written where (pure: tables, partitions, column
types); :mod:`ledger.export.parquet` reads the database and writes the files (it needs the
``export`` extra, pyarrow). docs/export.md is the contract for readers.
"""
