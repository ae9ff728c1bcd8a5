"""The pure core: events, stop reasons, the budget machine, vendor strings, the fold, redaction.

No I/O, no clock, no database: everything here is a function of its arguments, tested
exhaustively; the shells around it (ingest, db, live, views, cli) do the reading and writing.
"""
