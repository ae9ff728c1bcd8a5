"""Which log format a file is in: the dialect names, and detection across seeds and importers.

The seed dialects (``trace``, ``gate``, ``native``) are recognised by
:func:`ledger.formats.seed_dialects.detect`; the real agent logs by each importer's
``looks_like``. :func:`line_reader` gives the importer that reads a JSONL dialect line by line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ledger.core.actions import ActionMap
from ledger.formats import claude_code, codex, langfuse, otlp
from ledger.formats.seed_dialects import TRACE, detect

CLAUDE_CODE = "claude-code"
CODEX = "codex"
LANGFUSE = "langfuse"
OTLP = "otlp"
#: One OTLP export request spread over several lines (pretty-printed), read whole.
OTLP_DOCUMENT = "otlp-document"
IMPORTED = (CLAUDE_CODE, CODEX, LANGFUSE, OTLP, OTLP_DOCUMENT)

#: Dialects whose file is one JSON document rather than JSON lines.
DOCUMENTS = frozenset({TRACE, LANGFUSE, OTLP_DOCUMENT})

#: (parsed record, reader state, fallback session id, action map) -> records.
LineReader = Callable[[Any, dict[str, Any], str, ActionMap], list[Any]]

_LINE_READERS: dict[str, LineReader] = {
    CLAUDE_CODE: claude_code.read, CODEX: codex.read, OTLP: otlp.read,
}
_IMPORTERS = ((CLAUDE_CODE, claude_code), (CODEX, codex), (LANGFUSE, langfuse), (OTLP, otlp))


def line_reader(dialect: str) -> LineReader | None:
    """The line reader of an imported dialect (None for the others)."""
    return _LINE_READERS.get(dialect)


def document_dialect(found: str | None, data: bytes) -> str | None:
    """The dialect of a file that is one JSON value, ``data``, detected as ``found``: an OTLP
    request written over several lines is a document (its lines are no records); on one line
    it stays a JSONL file, which an exporter may go on appending to."""
    if found == OTLP and b"\n" in data.strip():
        return OTLP_DOCUMENT
    return found


def detect_any(first: Any) -> str | None:
    """The dialect of a file whose first usable record parsed as ``first``, importers included."""
    found = detect(first)
    if found is not None or not isinstance(first, dict):
        return found
    for name, module in _IMPORTERS:
        if module.looks_like(first):
            return name
    return None
