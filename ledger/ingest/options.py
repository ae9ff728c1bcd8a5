"""What an ingest is asked to do (:class:`Options`). What it did,
:class:`ledger.ingest.summary.Summary`, is kept apart: the hook imports this module for every
call and needs only this half."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from msgspec import Struct, field

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
#: 10: a vendor stop for an invalid tool call is also a tool error; a Codex line's record key
#: is its digest alone; pieces of a transcript in several files are folded as one.
#: 11: a private key block holding a run of one character (every OpenSSH key) or a word of
#: the placeholders' allow-list is redacted, and so is a long token that holds such a word
#: inside it (rows of 1 to 10 may hold them whole).
FOLD_VERSION = "11"
DEFAULT_BATCH = 20_000
DEFAULT_INTERVAL = 1.0  # seconds between two passes of --follow
#: New files hold at least this much before workers are started for them: under about 2 MB,
#: starting them and handing rows over cost what they save (measured on 2 cores: 1.1 MB
#: 0.09 s either way, 4.5 MB 0.27-0.34 s against 0.31-0.36 s, 237 MB 7.4 s against 12.2 s).
PARALLEL_MIN_BYTES = 4 * 1024 * 1024
#: Workers at most (ledger.ingest.parallel): the writer writes a step in about 5.5 us and a
#: worker folds one in about 8, so two workers keep it busy, and more would only take memory.
MAX_JOBS = 2
#: Lines folded at a time, then cleaned as the writer stores them: a worker's part of a batch
#: (ledger.ingest.parallel, which says how it was chosen), and the ingest's own
#: (ledger.ingest.ingester). Here, not there: an ingest that starts no worker never imports it.
PART_LINES = 2_000


def default_jobs() -> int:
    """Workers by default: one per core, at most :data:`MAX_JOBS`; none on one core."""
    cores = os.cpu_count() or 1
    return 0 if cores < 2 else min(cores, MAX_JOBS)


def hostname() -> str:
    """:func:`socket.gethostname`, which on POSIX is the node name ``uname`` gives (read so:
    importing socket costs a hook call some 3 ms)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


class Options(Struct):
    """(A msgspec struct, not a dataclass: an ingest's start makes it for a fiftieth of the
    cost, see ledger.ingest.summary.)"""

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
    host: str = field(default_factory=hostname)
    #: The budget file's ``subagents_count_in_parent``: a parent and its sub-agents are also
    #: held to the caps together (ledger.core.family). It folds nothing differently: the
    #: family stops are worked out from the stored steps after each pass.
    subagents_count_in_parent: bool = False

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
