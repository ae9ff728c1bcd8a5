"""What an ingest did (:class:`Summary`): apart from :mod:`ledger.ingest.options`, which the
hook imports for every call, and which this record of twenty fields cost some 4 ms as a
dataclass (a msgspec struct costs a few hundredths of that to make)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from msgspec import Struct, field


class Summary(Struct):
    files: int = 0
    new_files: int = 0
    updated_files: int = 0
    unchanged_files: int = 0
    lines: int = 0
    blank_lines: int = 0
    steps: int = 0
    errors: int = 0
    bytes_read: int = 0
    notices: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why it was not read
    #: Files that end in a line that is not a whole record yet: path, the offset of that line
    #: and its bytes (a file with no complete line yet: offset 0, its size).
    waiting: list[dict[str, Any]] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    stop_reasons: Counter[str] = field(default_factory=Counter)
    redactions: int = 0
    unknown_records: dict[str, Counter[str]] = field(default_factory=dict)  # path -> type -> n
    passes: int = 1
    workers: int = 0  # worker processes that folded new files (the most in any pass)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "new_files": self.new_files,
            "updated_files": self.updated_files,
            "unchanged_files": self.unchanged_files,
            "lines": self.lines,
            "blank_lines": self.blank_lines,
            "sessions": len(self.sessions),
            "steps": self.steps,
            "errors": self.errors,
            "redactions": self.redactions,
            "bytes_read": self.bytes_read,
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
            "notices": self.notices,
            "skipped": [
                {"path": path, "reason": reason} for path, reason in sorted(self.skipped.items())
            ],
            "waiting": self.waiting,
            "unknown_records": {
                path: dict(sorted(counts.items()))
                for path, counts in sorted(self.unknown_records.items())
            },
            "passes": self.passes,
            "workers": self.workers,
        }
