"""Replay ledger files through the budget without a database: sessions out, nothing stored."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ledger.core.fold import Fold, Session
from ledger.formats.detect import DOCUMENTS
from ledger.formats.seed_dialects import NATIVE, RecordError, parse_json
from ledger.ingest.files import BOM, discover, open_file, read_lines, sniff, why
from ledger.ingest.options import Options, task_class_for
from ledger.ingest.source import SourceFold


def replay(
    paths: Iterable[str | Path], options: Options | None = None
) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """For each file: its sessions' rows and the records it put aside, as ingest would store.
    A file that cannot be read is one record put aside, saying why it was skipped."""
    options = options or Options()
    fold = options.make_fold()
    skipped: list[tuple[Path, str]] = []
    files = discover(paths, skip=lambda path, reason: skipped.append((path, reason)))
    for path, reason in skipped:
        yield [], [{"path": str(path), "line": None, "reason": f"{reason}; skipped"}]
    for path in files:
        try:
            yield _replay_file(path, options, fold)
        except OSError as exc:
            yield [], [{"path": str(path), "line": None, "reason": f"{why(exc)}; skipped"}]


def _replay_file(
    path: Path, options: Options, fold: Fold
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    info = sniff(path, options.max_line, options.dialect)
    source_id = (info.fingerprint or "")[:12]
    source = SourceFold(
        fold, source_id, str(path), info.dialect or "unknown", task_class_for(path, options)
    )
    errors: list[dict[str, Any]] = []
    if info.fingerprint is None:
        pass  # nothing complete to read yet
    elif info.dialect is None:
        source.error(1, 0, info.problem or "cannot tell the dialect", b"")
    elif info.dialect in DOCUMENTS:
        with open_file(path) as f:
            source.feed_document(f.read())
    else:
        with open_file(path) as f:
            offset = 0
            while True:
                lines, offset = read_lines(f, offset, 10_000, options.max_line)
                if not lines:
                    break
                source.feed_lines(lines, options.max_line)
                errors.extend(source.take()[0].errors)
    errors.extend(source.take()[0].errors)
    return [s.row() for s in source.sessions.values()], errors


def replay_session(
    path: str | Path, session_id: str, options: Options | None = None, end: int | None = None
) -> Session | None:
    """One native session of ``path``, replayed as ingest would, from the lines before byte
    ``end`` (all complete lines if None). Lines of other sessions are skipped unread by the
    fold; a line of this session that the reader refuses is put aside, as ingest does."""
    options = options or Options()
    path = Path(path)
    source = SourceFold(
        options.make_fold(), "", str(path), NATIVE, task_class_for(path, options)
    )
    with path.open("rb") as f:
        offset = 0
        while end is None or offset < end:
            lines, offset = read_lines(f, offset, 10_000, options.max_line)
            if not lines:
                break
            for line in lines:
                if end is not None and line.offset >= end:
                    break
                if not line.oversize and _session_of(line.raw) == session_id:
                    source.feed_line(line.raw, line.offset)
    return source.sessions.get(session_id)


def _session_of(raw: bytes) -> Any:
    try:
        value = parse_json(raw.removeprefix(BOM).rstrip(b"\r"))
    except RecordError:
        return None
    return value.get("session") if isinstance(value, dict) else None
