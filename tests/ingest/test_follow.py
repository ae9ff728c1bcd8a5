"""``ingest --follow``: new lines are ingested as agents append them, until Ctrl-C, which stops
cleanly with everything consumed so far committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.ingest.ingester import follow, ingest
from ledger.ingest.options import Options
from ledger.ingest.summary import Summary
from tests.corpus import write_ledgers
from tests.helpers import ROOT, dump, paused_env, refuse_to_open, rows

INTERVAL = 0.1
#: Seconds a test waits at most for a following ingest to get somewhere, or to end once told
#: to: only a hang gets near it, however slow or loaded the machine (a fresh process here
#: imports and loads the rule set before its first pass: seconds where the CPU is shared).
HANG_S = 120.0


def line(session: str, **fields: object) -> str:
    return json.dumps({"session": session, "type": "round", **fields}) + "\n"


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(text)


def eventually(check: Callable[[], bool], timeout: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def events(db: Path) -> dict[str, int]:
    try:
        return {r["session_id"]: r["events"] for r in rows(db, "select * from sessions")}
    except Exception:  # not created yet
        return {}


def start_follow(db: Path, *args: str, pause: float = 0.0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", str(db), *args, "--follow",
         "--interval", str(INTERVAL), "--no-progress"],
        cwd=ROOT, env=paused_env(pause), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_follow_ingests_appended_lines_until_stopped(tmp_path: Path, sig: int) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    ledger = runs / "agent.jsonl"
    ledger.write_text(line("a", output_tokens=1))
    db = tmp_path / "ledger.db"
    proc = start_follow(db, str(runs))
    try:
        eventually(lambda: events(db) == {"a": 1})
        append(ledger, line("a", output_tokens=2) + line("b"))
        eventually(lambda: events(db) == {"a": 2, "b": 1})
        (runs / "second.jsonl").write_text(line("c"))  # a new file in a followed folder
        append(ledger, line("a") + '{"session": "a", "type": "rou')  # and a partial line
        eventually(lambda: events(db) == {"a": 3, "b": 1, "c": 1})
    finally:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "lines read" in err  # each pass that read something says so
    assert "files followed for" in out and "0 lines put aside" in out
    # Everything consumed is committed; the partial line is not consumed.
    (source,) = rows(db, "select * from sources where path like '%agent.jsonl'")
    assert source["offset"] == ledger.read_bytes().rindex(b"\n") + 1
    append(ledger, 'nd"}\n')
    assert ingest(db, [runs]).steps == 1
    assert events(db) == {"a": 4, "b": 1, "c": 1}


def test_stopping_in_the_middle_of_a_file_keeps_every_committed_batch(tmp_path: Path) -> None:
    """Ctrl-C while a large file is being read: the batch in hand is finished, the process
    exits 0, and a later ingest carries on to exactly what one clean ingest gives.

    The ingest pauses 20 ms after each of its 80 commits, so it is still reading 1.5 s after
    its first commit however fast the machine: the Ctrl-C, sent within about 50 ms of that
    first commit being seen, cannot come after the last."""
    runs = tmp_path / "runs"
    files = write_ledgers(runs, 16_000, files=2, seed=9)
    db = tmp_path / "ledger.db"
    proc = start_follow(db, str(runs), "--batch-size", "200", pause=0.02)
    eventually(lambda: bool(events(db)))
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 0, err
    read = rows(db, "select sum(offset) as n from sources")[0]["n"]
    assert read < sum(f.stat().st_size for f in files), "it read everything before it stopped"
    ingest(db, [runs], Options(batch=200))
    clean = tmp_path / "clean.db"
    ingest(clean, [runs], Options(batch=200))
    assert dump(db) == dump(clean)


def test_follow_with_strict_exits_3_when_lines_were_put_aside(tmp_path: Path) -> None:
    ledger = tmp_path / "agent.jsonl"
    ledger.write_text(line("a") + "not json\n")
    db = tmp_path / "ledger.db"
    proc = start_follow(db, str(ledger), "--strict")
    eventually(lambda: events(db) == {"a": 1})
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 3, err
    assert f"1 lines put aside: see the ingest_errors table in {db}" in out


def follow_scripted(
    db: Path, paths: list[Path], after_pass: list[Callable[[], object]]
) -> tuple[Summary, list[tuple[int, int]]]:
    """Follow ``paths``, doing ``after_pass[n]`` after pass n and stopping after the last;
    returns the summary and (files, lines so far) seen after each pass."""
    stop = threading.Event()
    seen: list[tuple[int, int]] = []

    def on_pass(summary: Summary) -> None:
        seen.append((summary.files, summary.lines))
        after_pass[len(seen) - 1]()
        if len(seen) == len(after_pass):
            stop.set()

    return follow(db, paths, interval=0.01, stop=stop, on_pass=on_pass), seen


def test_follow_passes_until_the_stop_event(tmp_path: Path) -> None:
    """The library call: each pass commits; the summary covers every pass."""
    ledger = tmp_path / "agent.jsonl"
    ledger.write_text(line("a"))
    summary, seen = follow_scripted(tmp_path / "l.db", [ledger], [
        lambda: None,
        lambda: append(ledger, line("a") + line("a")),
        lambda: None,
        lambda: None,
    ])
    assert seen == [(1, 1), (1, 1), (1, 3), (1, 3)]
    assert (summary.passes, summary.lines, summary.steps, summary.files) == (4, 3, 3, 1)
    assert events(tmp_path / "l.db") == {"a": 3}


def test_a_followed_file_that_disappears_is_waited_for(tmp_path: Path) -> None:
    ledger = tmp_path / "agent.jsonl"
    ledger.write_text(line("a"))
    summary, seen = follow_scripted(tmp_path / "l.db", [ledger], [
        lambda: ledger.rename(tmp_path / "agent.jsonl.1"),  # rotated away
        lambda: ledger.write_text(line("b")),  # and a new one in its place
        lambda: None,
    ])
    assert [files for files, _ in seen] == [1, 0, 1]
    assert summary.steps == 2
    assert events(tmp_path / "l.db") == {"b": 1}  # a replaced file replaces its rows
    assert any("replaced" in n for n in summary.notices)


def test_follow_skips_files_it_cannot_read_with_one_note_each_and_reads_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO, a link to nothing and a file the kernel will not open cost no pass anything:
    each is noted once, whatever the number of passes, and the file read once it can be."""
    runs = tmp_path / "runs"
    runs.mkdir()
    ledger, locked = runs / "agent.jsonl", runs / "locked.jsonl"
    ledger.write_text(line("a"))
    locked.write_text(line("locked"))
    os.mkfifo(runs / "pipe.jsonl")
    (runs / "gone.jsonl").symlink_to("nowhere.jsonl")
    readable = refuse_to_open(monkeypatch, locked)
    summary, seen = follow_scripted(tmp_path / "l.db", [runs], [
        lambda: append(ledger, line("a")),
        lambda: None,
        readable,  # from now on
        lambda: None,
    ])
    assert [lines for _, lines in seen] == [1, 2, 2, 3]
    assert summary.notices == [
        f"{runs / 'gone.jsonl'}: a link to nowhere.jsonl, which does not exist; skipped",
        f"{runs / 'pipe.jsonl'}: a named pipe (FIFO), not a regular file; skipped",
        f"{locked}: could not be read (Permission denied); skipped",
    ]
    assert set(summary.skipped) == {str(runs / n) for n in ("gone.jsonl", "pipe.jsonl",
                                                            "locked.jsonl")}
    assert events(tmp_path / "l.db") == {"a": 2, "locked": 1}


def test_follow_with_strict_exits_3_when_a_file_was_skipped(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "agent.jsonl").write_text(line("a"))
    os.mkfifo(runs / "pipe.jsonl")  # never opened to read: that would wait for a writer
    db = tmp_path / "ledger.db"
    proc = start_follow(db, str(runs), "--strict")
    eventually(lambda: events(db) == {"a": 1})
    for n in (2, 3, 4):  # a few passes more (each reads the line appended before it)
        append(runs / "agent.jsonl", line("a"))
        eventually(lambda n=n: events(db) == {"a": n})
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 3, err
    note = f"note: {runs / 'pipe.jsonl'}: a named pipe (FIFO), not a regular file; skipped"
    assert err.splitlines().count(note) == 1
    assert "1 files skipped (see the notes above)" in out
