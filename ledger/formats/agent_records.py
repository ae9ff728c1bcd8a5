"""What the importers of real agent logs share: record checks, timestamps, observations, excerpts.

Each importer (:mod:`ledger.formats.claude_code`, :mod:`~ledger.formats.codex`,
:mod:`~ledger.formats.langfuse`) is a pure translator from parsed records to
:class:`~ledger.formats.seed_dialects.Record` objects; :class:`~ledger.ingest.source.SourceFold`
routes them to sessions like any other dialect, and :mod:`ledger.formats.detect` picks the
importer for a file.

* A *line reader* (``claude-code``, ``codex``) takes one parsed JSONL record and the source's
  reader state (a JSON-serialisable dict kept in the source's cursor, so an ingest can stop
  after any line and carry on later) and returns the records it yields, often none.
* A *document reader* (``langfuse``) takes one whole JSON document.

A record of a type the importer does not know raises :class:`UnknownRecord`: formats drift
between versions, so it is counted per file and skipped, never an error. The mapping of each
format onto rounds and checkpoints is documented in docs/real-agent-logs.md.

Privacy: importers hand the fold only what its tables need. Tool output and prompts never
leave the importer: an observation is a digest of the tool call and its result, and only a
tool error keeps a short excerpt (its first line, redacted, then cut; the fold redacts it again
with every detail).
A tool call's input is read only to class the call (:func:`tool_call`): what leaves is its
action class and, for a shell command, the map entry it matched (``git status``) or its
program's name, never the input.
"""

from __future__ import annotations

import functools
from typing import Any

from ledger.core.actions import RETRY, ActionMap, classify
from ledger.core.events import ROUND, Event, observation_hash
from ledger.core.redact import drop_cut_token, redact
from ledger.core.task_classes import repo_name
from ledger.formats.seed_dialects import Record, RecordError, parse_ts

ERROR_EXCERPT = 200
FAILURES_MAX = 64  # failed calls remembered per session, to tell a retry of one
EXCERPT_WINDOW = ERROR_EXCERPT * 4  # characters of a line redacted for its excerpt


class UnknownRecord(Exception):
    """A record of a type the importer does not know; ``kind`` names the type for the count."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def as_object(value: Any, what: str = "record") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RecordError(f"expected the {what} to be a JSON object")
    return value


def moment(obj: dict[str, Any], key: str = "timestamp") -> tuple[str | None, float | None]:
    """The record's timestamp and its POSIX seconds; a missing or odd timestamp is no time."""
    text = obj.get(key)
    if not isinstance(text, str):
        return None, None
    try:
        return text, parse_ts(text)
    except RecordError:
        return None, None


def stamped(
    events: list[Event], when: tuple[str | None, float | None], session: str,
    task_class: str | None, parent: str | None, folder: str | None = None,
) -> list[Record]:
    """The events one record yields, with its timestamp, its session and its task class (and
    the working folder it was chosen from, for the budget file's ``[task_classes]``)."""
    for event in events:
        event.ts, event.at = when
    return [
        Record(e, session=session, task_class=task_class, parent=parent, folder=folder)
        for e in events
    ]


def keyed(events: list[Event], identity: Any) -> None:
    """Give each event its record's identity (``identity``, then ``identity:1``, ... for a
    record of several events), so a copy of the record in another file or later in the same
    one is recognised; an event whose record has no identity gets none."""
    if isinstance(identity, str) and identity:
        for index, event in enumerate(events):
            event.key = f"{identity}:{index}" if index else identity


def tool_result(
    tool: str | None, call: str, output: Any, failed: bool | None, detail: str | None = None
) -> Event:
    """A tool's result, continuing the round that called it: an observation (a digest of the
    call and its output, never the text) and, when it failed, a short excerpt."""
    if failed and detail is None:
        detail = excerpt(output) if isinstance(output, str) else "tool failed"
    return Event(ROUND, same_round=True, observation=digest(call, output), tool_error=failed,
                 tool=tool, detail=detail if failed else None)


def tool_call(
    name: str | None, tool_input: Any, call: str, failures: dict[str, int], actions: ActionMap
) -> Event:
    """A tool call as seed 002's checkpoint: a step of its action class, taken before the tool
    runs (so ``max_writes`` stops the write it would exceed). A call repeating one that failed
    (the same tool and input: the same ``call`` digest) is a ``retry``; a tool the map does not
    name is a write and ``unclassified``."""
    found = classify(name, tool_input, actions)
    action = RETRY if call in failures else found.action
    return Event(action, tool=name, detail=found.detail, unclassified=not found.known)


def remember_outcome(failures: dict[str, int], call: str, failed: bool | None) -> None:
    """Note how a call ended, for :func:`tool_call`: a failure is remembered until the same call
    succeeds (bounded); an outcome the log does not give changes nothing."""
    if not call or failed is None:
        return
    if failed:
        failures[call] = 0
        bounded(failures, FAILURES_MAX)
    else:
        failures.pop(call, None)


def whole(value: Any) -> int | None:
    """A token count: a non-negative whole number, also as a string (OTLP JSON int64)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def digest(*parts: Any) -> str:
    """An observation: the hash of a tool call and its result, never the text itself."""
    return observation_hash("\x1f".join([p if isinstance(p, str) else repr(p) for p in parts]))


def excerpt(text: str) -> str:
    """The first non-blank line of a tool error, redacted, then cut short.

    Redacted before the cut, never after: a token that the cut crossed would keep a head that
    no rule recognises. Only a window of the line is looked at; a token that the window's end
    cuts is dropped whole first.
    """
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    window = line[:EXCERPT_WINDOW]
    if len(window) < len(line):
        window = drop_cut_token(window)
    return redact(window)[0][:ERROR_EXCERPT]


def text_of(content: Any) -> str:
    """The text of a tool result: a string, or the text parts of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
            else:
                parts.append(repr(block))  # images and other blocks: hashed as they are
        return "\n".join(parts)
    return "" if content is None else repr(content)


def task_class_of(folder: Any, repository_url: Any = None) -> str | None:
    """The default task class of a session: the repository its log names (see
    :func:`ledger.core.task_classes.repo_name`), redacted."""
    url = repository_url if isinstance(repository_url, str) else None
    return _repo(folder if isinstance(folder, str) else None, url)


@functools.lru_cache(maxsize=256)  # every line of a session repeats its cwd
def _repo(folder: str | None, url: str | None) -> str | None:
    # Redacted whole first: a secret in a path (a URL, a connection string) is recognised by
    # its context, which its last part alone no longer has.
    return repo_name(
        None if folder is None else redact(folder)[0], None if url is None else redact(url)[0]
    )


def bounded(mapping: dict[str, Any], limit: int) -> None:
    """Drop the oldest entries of an insertion-ordered dict beyond ``limit``."""
    while len(mapping) > limit:
        del mapping[next(iter(mapping))]
