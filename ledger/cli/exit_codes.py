"""The command line's exit codes (apart, so the console script's quick paths have them
without click).

0 success; 1 an error (a path that does not exist, a bad budget, vendor map, action map or
prices file, a database that cannot be opened; for ``merge``, no database could be merged);
2 a usage error; 3 ``--strict`` and some lines were put aside (or, for ``ingest``, some files
skipped), and ``merge`` when some databases were not merged (the others were); 4 ``paid-path
--fail-on-stay`` and some task class must stay on the paid path; 5 ``record``: the session's
budget is exceeded; 6 ``propose-budget``: nothing to propose from.
"""

EXIT_ERROR = 1
EXIT_STRICT = 3
EXIT_STAY = 4
EXIT_BUDGET = 5
EXIT_NO_VERIFIED = 6
