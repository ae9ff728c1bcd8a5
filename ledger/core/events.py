"""The one event type every dialect is parsed into, and the hashing of observations.

An event is either a model *round* (seed 000: tool calls, output tokens, an observation, a tool
error, a vendor stop string) or an action *checkpoint* (seed 002: think, read, write or retry),
or a session marker (start, end). Fields a dialect does not carry stay ``None``: the budget
machine only measures what is there.

Real agent logs write one model round over several records (Claude Code writes a line per
content block, and the tool results arrive later in their own lines). An importer emits each
record at once: the first as a round, the later ones with ``same_round`` set. Such an event
*continues* the current round: no new round and no new step, but its tool calls and output
tokens are added and its observation and tool error are checked. Nothing is held back, so a
file read in pieces folds exactly as one read at once.
"""

from __future__ import annotations

import hashlib

import msgspec

ROUND = "round"
ACTIONS = ("think", "read", "write", "retry")
MARKERS = ("start", "end")
KINDS = (ROUND, *ACTIONS, *MARKERS)


class Event(msgspec.Struct, gc=False):
    """One event (a plain mutable record; a msgspec ``Struct`` rather than a dataclass because
    one is made per ledger line, and a ``Struct`` is made in a third of the time)."""

    action: str
    tool_calls: int | None = None  # None: the log does not measure it (counted as 0)
    output_tokens: int | None = None
    observation: str | None = None
    tool_error: bool | None = None
    vendor_stop: str | None = None
    outcome: str | None = None
    tool: str | None = None
    detail: str | None = None
    elapsed_s: float | None = None
    ts: str | None = None
    at: float | None = None  # ts as POSIX seconds, for elapsed time when the log has no elapsed_s
    #: The observation's hash, when only the hash is known (a replay of stored ``steps`` rows,
    #: which keep the hash, never the text). Used in place of hashing ``observation``.
    observation_hash: str | None = None
    #: Meters the log left out although the event holds a value for the machine (seed 000 reads
    #: a missing observation as "" and a missing tool_error as false).
    unmetered: frozenset[str] = frozenset()
    same_round: bool = False  # continues the current round (see the module docstring)
    #: What the model was sent and read, beside ``output_tokens`` (see :data:`TOKEN_METERS`):
    #: input not read from a cache, input written to the cache, input read from it, and the
    #: reasoning part of the output (already inside ``output_tokens``). None: not in the log.
    #: With ``model`` they price a round (see ledger.core.pricing), unless the log gives its
    #: ``cost`` in USD, which wins over a price.
    input_tokens: int | None = None
    cache_creation_tokens: int | None = None
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None
    model: str | None = None  # the model that answered (a round's first event)
    cost: float | None = None
    #: A tool call the action map does not name: counted as a write (fail closed), and listed
    #: as a gap in the write meter (an ``unclassified_tool`` incident).
    unclassified: bool = False
    #: The record's identity wherever it is copied (a Claude Code line's ``uuid``, a Codex
    #: line's place and digest, a Langfuse observation's id, with the event's place in its
    #: record): a session drops an event whose key it has folded already (see
    #: ledger/ingest/source.py).
    key: str | None = None

    @property
    def has_observation(self) -> bool:
        return self.observation is not None or self.observation_hash is not None

    @property
    def is_step(self) -> bool:
        """Seed 002 counts every model call and every tool action as one step."""
        return self.action not in MARKERS and not self.same_round

    @property
    def is_marker(self) -> bool:
        return self.action in MARKERS


#: The meters a log can carry (seed 000 step 4: a cap whose meter is absent cannot be honoured).
METERS = (
    "round_counter", "tool_calls", "output_tokens", "tool_errors", "observations",
    "elapsed_time", "write_classification", "cost",
)


#: The token counts an event may carry besides ``output_tokens``, in the order of their
#: ``steps`` and ``sessions`` columns (no cap reads them: they are stored, not metered).
TOKEN_METERS = ("input_tokens", "cache_creation_tokens", "cache_read_tokens", "reasoning_tokens")


def meters_of(event: Event) -> set[str]:
    """The meters this event carries."""
    found = set()
    if event.action == ROUND:
        found.add("round_counter")
    elif event.action in ACTIONS:
        found.add("write_classification")
    if event.tool_calls is not None:
        found.add("tool_calls")
    if event.output_tokens is not None:
        found.add("output_tokens")
    if event.tool_error is not None:
        found.add("tool_errors")
    if event.has_observation:
        found.add("observations")
    if event.elapsed_s is not None:
        found.add("elapsed_time")
    if event.cost is not None:
        found.add("cost")
    return found - event.unmetered


def observation_hash(text: str) -> str:
    """Seed 000's hash: the first 16 hex digits of sha256 over the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
