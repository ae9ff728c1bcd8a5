"""What an ingest is asked to do (:class:`Options`) and what it did (:class:`Summary`)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.config.action_map import default_action_map
from ledger.config.prices import library_book
from ledger.core.actions import ActionMap
from ledger.core.budget import Budget
from ledger.core.fold import Fold
from ledger.core.pricing import PriceBook
from ledger.core.redact import redact
from ledger.core.task_classes import TaskClasses
from ledger.core.vendors import DEFAULT_VENDOR_MAP
from ledger.ingest.files import DEFAULT_MAX_LINE, sha

#: Bumped when the same file would give other rows: every source is then folded again.
#: 2: agent-log importers, round continuations. 3: the retry-storm key and the stop detail
#: are redacted (rows of 1 and 2 may hold secrets there). 4: money (the cost meter, max_cost).
#: 5: tool calls are action steps (the action map). 6: every token count, the model, record
#: keys (copies of a record folded once), a last line without its newline read. 7: old-format
#: inline sub-agents are sessions of their own, a rejection with feedback is not a cancel, TOOL
#: observations are tool calls, Codex rounds without token counts, plain-text exit codes.
#: 8: task classes from the repository a log names (and [task_classes] in the budget file).
#: 9: OTLP JSON (files put aside before as of no known dialect are read).
FOLD_VERSION = "9"
DEFAULT_BATCH = 20_000
DEFAULT_INTERVAL = 1.0  # seconds between two passes of --follow
#: New files hold at least this much before workers are started for them: under about 2 MB,
#: starting them and handing rows over cost what they save (measured on 2 cores: 1.1 MB
#: 0.09 s either way, 4.5 MB 0.27-0.34 s against 0.31-0.36 s, 237 MB 7.4 s against 12.2 s).
PARALLEL_MIN_BYTES = 4 * 1024 * 1024


def _hostname() -> str:
    """:func:`socket.gethostname`, which on POSIX is the node name ``uname`` gives (read so:
    importing socket costs a hook call some 3 ms)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


@dataclass
class Options:
    budget: Budget = field(default_factory=Budget)
    vendor_map: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_VENDOR_MAP))
    action_map: ActionMap = field(default_factory=default_action_map)
    task_class: str | None = None
    dialect: str | None = None
    max_line: int = DEFAULT_MAX_LINE
    batch: int = DEFAULT_BATCH
    jobs: int = 0  # worker processes folding new files (see ledger.ingest.parallel)
    parallel_min_bytes: int = PARALLEL_MIN_BYTES
    #: Prices rounds that give a model and tokens but no cost (see ledger.core.pricing).
    prices: PriceBook = field(default_factory=library_book)
    #: The budget file's ``[task_classes]``: folder globs to task class names.
    task_classes: TaskClasses = field(default_factory=TaskClasses)
    #: The machine the files are read on, recorded as ``sources.host`` (``--host``); it
    #: names the host partition of an export (see ledger.export) and folds nothing.
    host: str = field(default_factory=_hostname)

    @property
    def fold_digest(self) -> str:
        """Changes whenever the same file would fold differently."""
        settings = {
            "fold": FOLD_VERSION,
            "budget": self.budget.to_dict(),
            "vendor_map": dict(sorted(self.vendor_map.items())),
            "prices": self.prices.digest,
            "action_map": self.action_map.digest,
            "task_classes": self.task_classes.digest,
        }
        return sha(json.dumps(settings, sort_keys=True).encode())[:16]

    def make_fold(self) -> Fold:
        return Fold(
            self.budget, self.vendor_map, redact, self.prices, self.action_map, self.task_classes
        )


@dataclass
class Summary:
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


Progress = Callable[[int], None]


def task_class_for(path: Path, options: Options) -> str:
    """``--task-class`` if given, else the budget file's ``[task_classes]`` name of the ledger
    file's folder, else that folder's name (of its path redacted whole: a secret's context may
    lie outside the name). A log that names its own folder (the agent logs' ``cwd``) has its
    sessions classed by that instead (:meth:`ledger.ingest.source.SourceFold`)."""
    folder = path.resolve().parent
    return (
        options.task_class
        or options.task_classes.name_for(str(folder))
        or Path(redact(str(folder))[0]).name
    )
