"""Pieces of one transcript in several files, folded as the transcript alone.

A session's lines may be in several files: a snapshot of the transcript, the history a
resumed or forked Claude Code session copies into its new file, pieces cut from anywhere.
A file that continues a session exactly is folded on as it is read (see
:mod:`ledger.ingest.source`). Any other piece (a middle or a suffix read before what comes
before it, a prefix read after a later piece, overlapping pieces) would fold the records out
of their order, and the importers read a line in the light of the lines before it (the
response a line continues, the call a result answers, the call that failed before a retry),
so the session is folded again from all its files at once:

* every file that holds it (and, as for a file read again, every file sharing a session with
  those) is forgotten and read whole;
* their lines are merged into the transcript's order (:func:`merge`): a line is known by its
  identity (a Claude Code line's ``uuid``, else a digest of the line); each file gives its
  distinct lines in its order, and the merge is the order all files agree on (each line
  after the lines it follows in some file, and a Claude Code line after its ``parentUuid``);
  where that leaves a choice (pieces that do not overlap yet, or files that disagree), the
  earlier timestamp first, then the line first seen;
* the merged lines are folded once (a line held by several files once), and each file gets
  the cursor it would have after reading itself (:func:`cursors`), so it grows on from there.

Overlapping pieces fix the order entirely, so any set of them, in any order, in one ingest or
many, gives the transcript's sessions.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.db import writes
from ledger.ingest.files import BOM, Line, open_file, read_lines, tail_hash
from ledger.ingest.source import Folded, SourceFold

READ_BATCH = 10_000


@dataclass
class Piece:
    """A file read whole for a merged fold: its (new) ``sources`` row and its lines."""

    source: dict[str, Any]
    lines: list[Line]
    end: int  # the offset after its last line read
    check_hash: str | None


def read_whole(path: Path, source: dict[str, Any], max_line: int) -> Piece:
    """Every line of ``path`` that :func:`~ledger.ingest.files.read_lines` gives."""
    lines: list[Line] = []
    with open_file(path) as f:
        offset = 0
        while True:
            more, end = read_lines(f, offset, READ_BATCH, max_line)
            if end == offset:
                break
            lines += more
            offset = end
        return Piece(source, lines, offset, tail_hash(f, offset))


def identity(raw: bytes) -> tuple[str, str | None, str | None]:
    """A line's identity (its ``uuid``, else a digest of its bytes), its timestamp and the
    identity of the line it follows (its ``parentUuid``)."""
    raw = raw.removeprefix(BOM).strip()
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    obj = value if isinstance(value, dict) else {}
    found, uuid, parent = obj.get("timestamp"), obj.get("uuid"), obj.get("parentUuid")
    name = f"u:{uuid}" if isinstance(uuid, str) and uuid else (
        "d:" + hashlib.sha256(raw).hexdigest()
    )
    return (name, found if isinstance(found, str) else None,
            f"u:{parent}" if isinstance(parent, str) and parent else None)


def merge(files: list[list[Line]]) -> list[tuple[int, int]]:
    """The distinct lines of ``files`` in the transcript's order, as (file, line) indexes
    (see the module doc). Blank lines are left out; a line too long to hold is its own."""
    where: list[tuple[int, int]] = []  # per node: its first (file, line)
    order_key: list[tuple[str, int]] = []  # per node: (timestamp, first seen)
    node_of: dict[str, int] = {}
    after: list[set[int]] = []  # per node: the nodes that follow it in some file
    waiting: list[int] = []  # per node: how many nodes it follows are not placed yet
    parents: list[tuple[str, int]] = []

    def follows(before: int, node: int) -> None:
        if node != before and node not in after[before]:
            after[before].add(node)
            waiting[node] += 1

    for f, lines in enumerate(files):
        previous, here, stamp = None, set(), ""
        for i, line in enumerate(lines):
            if line.oversize:
                name, found, parent = f"o:{f}:{line.offset}", None, None
            elif not line.raw.strip():
                continue
            else:
                name, found, parent = identity(line.raw)
            stamp = found or stamp  # a line without a time keeps the last one
            if name in here:
                continue  # a line repeated in one file
            here.add(name)
            node = node_of.get(name)
            if node is None:
                node = node_of[name] = len(where)
                where.append((f, i))
                order_key.append((stamp, node))
                after.append(set())
                waiting.append(0)
                if parent is not None:
                    parents.append((parent, node))
            if previous is not None:
                follows(previous, node)
            previous = node
    for parent, node in parents:
        if parent in node_of:
            follows(node_of[parent], node)
    ready = [order_key[n] for n in range(len(where)) if not waiting[n]]
    heapq.heapify(ready)
    placed: list[int] = []
    done = [False] * len(where)
    while len(placed) < len(where):
        if not ready:  # the files disagree on the order (a cycle): the earliest line left
            ready.append(min(order_key[n] for n in range(len(where)) if not done[n]))
        node = heapq.heappop(ready)[1]
        if done[node]:
            continue
        done[node] = True
        placed.append(node)
        for nxt in after[node]:
            waiting[nxt] -= 1
            if not waiting[nxt] and not done[nxt]:
                heapq.heappush(ready, order_key[nxt])
    return [where[n] for n in placed]


def fold_merged(
    pieces: list[Piece], merged: SourceFold, max_line: int,
    dry: Callable[[dict[str, Any]], SourceFold],
) -> tuple[Folded, list[dict[str, Any]]]:
    """Fold the lines of ``pieces`` merged (into ``merged``, a fold of the first piece's
    source); the rows to write, and each piece's ``sources`` row read to its end."""
    merged.canonical = True
    for f, i in merge([piece.lines for piece in pieces]):
        source = pieces[f].source
        merged.source_id, merged.path = source["source_id"], source["path"]
        merged.task_class = source["task_class"]
        merged.cursor.line = i  # (the line's number in its file, less one)
        merged.feed_lines([pieces[f].lines[i]], max_line)
    rows = cursors(pieces, merged, max_line, dry)
    return merged.take_folded(), rows


def cursors(
    pieces: list[Piece], merged: SourceFold, max_line: int,
    dry: Callable[[dict[str, Any]], SourceFold],
) -> list[dict[str, Any]]:
    """Each piece's ``sources`` row as if it had been read alone to its end (its reader's
    state, where it stands in each session); each session lists every piece holding it."""
    rows = []
    for piece in pieces:
        alone = dry(piece.source)
        alone.feed_lines(piece.lines, max_line)
        cursor = alone.cursor.to_dict()
        for session_id in cursor["ends"]:
            session = merged.sessions.get(session_id)
            if session is not None and piece.source["source_id"] not in session.sources:
                session.sources.append(piece.source["source_id"])
        unknown = cursor["unknown"]
        rows.append({
            **piece.source,
            "offset": piece.end,
            "check_hash": piece.check_hash,
            "cursor": json.dumps(cursor),
            "lines": cursor["line"],
            "blank_lines": cursor["blank_lines"],
            "unknown_records": json.dumps(unknown, sort_keys=True) if unknown else None,
            "ingested_at": writes.now(),
        })
    return rows
