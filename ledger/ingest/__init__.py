"""Ingest: ledger files into the database, incrementally, one committed batch at a time.

Files are found and read (:mod:`.files`), claimed as sources (:mod:`.claims`), their records
routed to sessions and folded (:mod:`.source`), and written batch by batch
(:mod:`.ingester`, :mod:`.transaction`), by workers too (:mod:`.parallel`).
"""
