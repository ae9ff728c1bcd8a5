"""Files an ingest has nothing to read in, told by a stat and one query, before any is opened.

A source has been read to its end when its row's ``offset`` is its ``size``, and its file is
taken as untouched since when its size and modification time are still those the row
recorded (as make and rsync judge a file: a rewrite that keeps both, to the resolution of
the file system's clock, is not seen until the file changes again; logs are appended to,
and an append changes the size). Such a file, under the same fold settings, is
one the ingest would only sniff, claim and count as unchanged: this says so without opening
it. Only ``os`` and ``sqlite3`` are used, since the entry point (:mod:`ledger.cli.quick`)
asks this before anything else is imported.
"""

from __future__ import annotations

import os
import sqlite3

#: ``Options().fold_digest``: the fold settings of an ingest given no option, with the pinned
#: price data. The entry point cannot compute it without importing the fold (some 100 ms);
#: ``tests/cli/test_quick.py`` checks it is current (bump it with ``FOLD_VERSION``, the
#: budget's defaults, the vendor or action map, and the pin of genai-prices).
DEFAULT_FOLD_DIGEST = "903f7bf4d320c4d7"

#: A source read to its end, by its path: its size, modification time and fold digest.
Known = dict[str, tuple[int, float, str]]


def read_to_end(conn: sqlite3.Connection) -> Known:
    """Every source read to its end, by path (one query; a path two rows name is left out,
    since which of them a file is takes the full claim to tell)."""
    known: Known = {}
    seen: set[str] = set()
    for path, size, mtime, offset, digest in conn.execute(
        "SELECT path, size, mtime, offset, fold_digest FROM sources"
    ):
        if path in seen:
            known.pop(path, None)
            continue
        seen.add(path)
        if offset == size:
            known[path] = (size, mtime, digest)
    return known


def is_unchanged(known: Known, path: str, stat: os.stat_result, digest: str) -> bool:
    """Whether the file at ``path`` (absolute, as ``sources`` names it) with ``stat`` is a
    source read to its end under the fold settings ``digest``, untouched since."""
    return known.get(path) == (stat.st_size, stat.st_mtime, digest)


def suffix(name: str) -> str:
    """``Path(name).suffix``, without making a path (pathlib costs more to import than the
    quick answer of :mod:`ledger.cli.quick` in all, and a path more to make than this)."""
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""
