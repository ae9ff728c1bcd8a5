"""A session is its session id wherever its lines are, and a record counts once.

Claude Code copies a transcript's history into other files: a checkpoint snapshot (Entire's),
the new file of a resumed or forked session (the copied lines keep their first ``sessionId``).
Whichever files are ingested, and in whatever order, the session must be the transcript's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.ingest.ingester import ingest
from tests.helpers import REAL_LOGS, rows, scratch_dir

TRANSCRIPTS = [
    "01_claude_code_main_session_short_v2.1.38.jsonl",
    "02_claude_code_subagent_sidechain_v2.1.39.jsonl",
    "03_claude_code_main_session_tail_lines1781-1863_v2.1.39.jsonl",
    "04_codex_rollout_v0.77.0_codex_exec_full.jsonl",
]
#: What tells where a row came from, not what the session is.
WHERE = {"source_id", "source_path", "source_line", "source_offset"}


def sessions_and_steps(db: Path) -> dict[str, Any]:
    sessions = rows(db, "select * from sessions order by session_id")
    steps = rows(db, "select * from steps order by session_id, idx")
    return {
        "sessions": [{k: v for k, v in r.items() if k not in WHERE} for r in sessions],
        "steps": [{k: v for k, v in r.items() if k not in WHERE} for r in steps],
        "errors": rows(db, "select count(*) as n from ingest_errors")[0]["n"],
    }


def write_copies(folder: Path, lines: list[bytes], cuts: list[int]) -> list[Path]:
    """The transcript and one snapshot of its first ``cut`` lines per cut."""
    paths = []
    for n, cut in enumerate([len(lines), *cuts]):
        path = folder / f"copy-{n}" / "session.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(b"".join(lines[:cut]))
        paths.append(path)
    return paths


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_any_copies_of_a_transcript_in_any_order_give_the_transcript_alone(
    data: st.DataObject,
) -> None:
    name = data.draw(st.sampled_from(TRANSCRIPTS))
    lines = (REAL_LOGS / name).read_bytes().splitlines(keepends=True)
    cuts = data.draw(st.lists(st.integers(1, len(lines)), max_size=4))
    together = data.draw(st.booleans())  # in one ingest, or one ingest a file
    with scratch_dir() as tmp:
        folder = Path(tmp)
        paths = write_copies(folder, lines, cuts)
        ingest(folder / "alone.db", paths[:1])
        order = data.draw(st.permutations(paths))
        if together:
            summary = ingest(folder / "copies.db", order)
            assert summary.errors == 0
        else:
            for path in order:
                ingest(folder / "copies.db", [path])
        assert sessions_and_steps(folder / "copies.db") == sessions_and_steps(folder / "alone.db")


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_a_transcript_that_grows_after_its_snapshots_were_read_gives_the_transcript_alone(
    data: st.DataObject,
) -> None:
    """Incremental equals one-shot for a session in several files: the transcript joins its
    snapshots' session while it is written, cut at any byte, ingested after each piece."""
    name = data.draw(st.sampled_from(TRANSCRIPTS))
    text = (REAL_LOGS / name).read_bytes()
    lines = text.splitlines(keepends=True)
    cuts = data.draw(st.lists(st.integers(1, len(lines)), min_size=1, max_size=3))
    pieces = sorted(set(data.draw(st.lists(st.integers(1, len(text) - 1), max_size=5))))
    with scratch_dir() as tmp:
        folder = Path(tmp)
        full, *snapshots = write_copies(folder, lines, cuts)
        ingest(folder / "alone.db", [full])
        ingest(folder / "copies.db", snapshots)
        done = 0
        full.write_bytes(b"")
        for cut in [*pieces, len(text)]:
            with full.open("ab") as f:
                f.write(text[done:cut])
            done = cut
            assert ingest(folder / "copies.db", [full]).errors == 0
        assert sessions_and_steps(folder / "copies.db") == sessions_and_steps(folder / "alone.db")


def test_a_snapshot_then_the_full_transcript_puts_nothing_aside_and_counts_once(
    tmp_path: Path,
) -> None:
    lines = (REAL_LOGS / TRANSCRIPTS[2]).read_bytes().splitlines(keepends=True)
    snapshot, full = write_copies(tmp_path, lines, [40])[::-1]
    first = ingest(tmp_path / "l.db", [snapshot])
    second = ingest(tmp_path / "l.db", [full])
    assert (first.errors, second.errors) == (0, 0)
    (session,) = rows(tmp_path / "l.db", "select * from sessions")
    ingest(tmp_path / "alone.db", [full])
    (alone,) = rows(tmp_path / "alone.db", "select * from sessions")
    assert (session["rounds"], session["output_tokens"], session["cache_read_tokens"]) == (
        alone["rounds"], alone["output_tokens"], alone["cache_read_tokens"]) == (10, 1359, 700685)
    assert rows(tmp_path / "l.db", "select count(*) as n from session_sources")[0]["n"] == 1


def test_a_resumed_session_counts_the_history_it_copies_once(tmp_path: Path) -> None:
    """A resumed session's file starts with the old session's lines, under their own
    ``sessionId``; its new lines carry the new id."""
    old = (REAL_LOGS / TRANSCRIPTS[2]).read_bytes()
    new = b"".join(
        line.replace(b"258c7280-ae70-4798-800f-63464d01a85d", b"resumed-session")
        .replace(b'"uuid":"', b'"uuid":"new-').replace(b'"id":"msg_', b'"id":"msg_new')
        for line in old.splitlines(keepends=True)[-20:]
    )
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "old" / "s.jsonl").write_bytes(old)
    (tmp_path / "new" / "s.jsonl").write_bytes(old + new)
    ingest(tmp_path / "l.db", [tmp_path / "new" / "s.jsonl", tmp_path / "old" / "s.jsonl"])
    ingest(tmp_path / "alone.db", [tmp_path / "old" / "s.jsonl"])
    by_id = {r["session_id"]: r for r in rows(tmp_path / "l.db", "select * from sessions")}
    (alone,) = rows(tmp_path / "alone.db", "select * from sessions")
    assert by_id["258c7280-ae70-4798-800f-63464d01a85d"]["output_tokens"] == alone["output_tokens"]
    assert by_id["resumed-session"]["rounds"] > 0


def test_the_same_line_twice_in_one_file_counts_once(tmp_path: Path) -> None:
    lines = (REAL_LOGS / TRANSCRIPTS[0]).read_bytes().splitlines(keepends=True)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "s.jsonl").write_bytes(b"".join(lines))
    (tmp_path / "b" / "s.jsonl").write_bytes(b"".join(lines[:12] + lines[4:]))  # 8 again
    ingest(tmp_path / "a.db", [tmp_path / "a" / "s.jsonl"])
    ingest(tmp_path / "b.db", [tmp_path / "b" / "s.jsonl"])
    assert sessions_and_steps(tmp_path / "b.db") == sessions_and_steps(tmp_path / "a.db")


def test_a_finished_file_without_its_last_newline_loses_no_record(tmp_path: Path) -> None:
    """Entire's checkpoint transcripts end without a newline: the last record is read, and
    once the newline (and more) comes, the file reads as if it had been whole."""
    text = (REAL_LOGS / TRANSCRIPTS[2]).read_bytes()
    for name, data in (("ended", text), ("unended", text.rstrip(b"\n"))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "s.jsonl").write_bytes(data)
        summary = ingest(tmp_path / f"{name}.db", [tmp_path / name / "s.jsonl"])
        assert (summary.errors, summary.waiting) == (0, [])
    assert sessions_and_steps(tmp_path / "unended.db") == sessions_and_steps(tmp_path / "ended.db")
    with (tmp_path / "unended" / "s.jsonl").open("ab") as f:
        f.write(b"\n")
    assert ingest(tmp_path / "unended.db", [tmp_path / "unended" / "s.jsonl"]).waiting == []
    assert sessions_and_steps(tmp_path / "unended.db") == sessions_and_steps(tmp_path / "ended.db")


def test_a_cut_last_line_is_reported_with_its_file_and_bytes(tmp_path: Path) -> None:
    text = (REAL_LOGS / TRANSCRIPTS[2]).read_bytes()
    cut = text[: len(text) - 100]
    path = tmp_path / "s.jsonl"
    path.write_bytes(cut)
    summary = ingest(tmp_path / "l.db", [path])
    start = cut.rindex(b"\n") + 1
    assert summary.waiting == [{"path": str(path), "offset": start, "bytes": len(cut) - start}]
    assert summary.to_dict()["waiting"] == summary.waiting  # what --json prints
