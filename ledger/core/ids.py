"""Session ids and task classes of a bounded length.

A ledger names its sessions and their task classes; every step row repeats the session id, so
one id of a megabyte made a 23 MB database of three events. An id over :data:`ID_MAX`
characters is cut, keeping its head (what a reader recognises) and ending in a hash of the
whole id, so two long ids that share their head stay two sessions, and the same long id is
cut the same way in every file and every ingest.
"""

from __future__ import annotations

import hashlib

ID_MAX = 256  # characters of a session id or task class kept (docs/bad-input.md)
HASH_DIGITS = 16  # hex digits of the whole id's hash that end a cut id
CUT_MARK = "…"


def bounded(text: str) -> str:
    """``text`` if it has at most :data:`ID_MAX` characters, else its head, ``…`` and a hash
    of all of it, :data:`ID_MAX` characters in all."""
    if len(text) <= ID_MAX:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]
    return f"{text[:ID_MAX - HASH_DIGITS - len(CUT_MARK)]}{CUT_MARK}{digest}"
