"""Log formats: the seeds' dialects and the importers of real agent logs, records to events.

Each is a pure translator from parsed JSON to :class:`~ledger.formats.seed_dialects.Record`
objects; :mod:`ledger.formats.detect` tells which one a file is in.
"""
