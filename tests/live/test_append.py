"""Appends: every line whole, whoever else is appending, and nothing half-written left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from itertools import pairwise
from pathlib import Path

import pytest

from ledger.core.budget import Budget
from ledger.ingest.ingester import ingest
from ledger.live import append
from ledger.live.append import append_line
from ledger.live.recorder import open_session
from tests.helpers import ROOT, rows

PIPE_BUF = 4096
NO_CAPS = Budget(**{key: None for key in Budget.keys()})


def test_append_returns_where_the_line_is(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    assert append_line(path, b'{"a": 1}\n') == (0, 9)
    assert append_line(path, b'{"b": 22}\n', fsync=True) == (9, 19)
    assert path.read_bytes() == b'{"a": 1}\n{"b": 22}\n'


def test_a_line_is_never_glued_to_a_last_line_left_without_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b'{"a": ')  # another writer died mid-line
    assert append_line(path, b'{"b": 2}\n') == (7, 16)
    assert path.read_bytes() == b'{"a": \n{"b": 2}\n'


def test_a_fifo_in_the_files_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    os.mkfifo(path)
    with pytest.raises(OSError, match="a named pipe"):
        append_line(path, b'{"a": 1}\n')


def test_a_line_without_its_newline_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="newline"):
        append_line(tmp_path / "l.jsonl", b'{"a": 1}')
    assert not (tmp_path / "l.jsonl").exists() or (tmp_path / "l.jsonl").read_bytes() == b""


def short_writes(monkeypatch: pytest.MonkeyPatch, script: list[int | Exception]) -> list[int]:
    """Make os.write in ledger.live.append write at most the scripted number of bytes per call."""
    real = os.write
    calls: list[int] = []

    def write(fd: int, data: bytes) -> int:
        step = script.pop(0) if script else len(data)
        if isinstance(step, Exception):
            raise step
        calls.append(step)
        return real(fd, data[:step])

    monkeypatch.setattr(append.os, "write", write)
    return calls


def test_a_short_write_is_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"first\n")
    calls = short_writes(monkeypatch, [3, 4])
    assert append_line(path, b"0123456789\n") == (6, 17)
    assert calls == [3, 4, 4]
    assert path.read_bytes() == b"first\n0123456789\n"


def test_a_failed_write_takes_its_part_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(b"first\n")
    short_writes(monkeypatch, [3, OSError(28, "No space left on device")])
    with pytest.raises(OSError, match="No space"):
        append_line(path, b"0123456789\n")
    assert path.read_bytes() == b"first\n"


WRITER = """
import sys, time
from pathlib import Path
from ledger.live.recorder import open_session
from ledger.core.budget import Budget

path, n, events, writers, rounds, sync = (
    sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
    Path(sys.argv[6]))
off = Budget(**{k: None for k in Budget.keys()})


def meet(r):
    (sync / f"{r}-{n}").touch()  # here, and wait for every other writer to be
    deadline = time.monotonic() + 60
    while len(list(sync.glob(f"{r}-*"))) < writers:
        if time.monotonic() > deadline:
            sys.exit(f"writer {n}: the others never got to round {r}")
        time.sleep(0.001)


recorder = open_session(path, "stress", off, session=f"writer-{n}")
for i in range(events):
    if i % (events // rounds) == 0:
        meet(i // (events // rounds))
    if i % 10 == 0:
        recorder.round(tool_calls=1, output_tokens=i, observation=f"{n}:{i}:" + "x" * 9000)
    else:
        recorder.action("read", f"writer {n} event {i}")
recorder.close("task_complete")
"""


def test_many_processes_appending_at_once_never_tear_a_line(tmp_path: Path) -> None:
    """Eight processes append 500 events each, big lines among them, to one file. They meet
    before each of 25 rounds of 20 events (each leaves a file in sync/ and waits for all the
    others'), so on any machine every round has all of them appending at once: without it a
    fast machine could let one writer append its 500 events in its first time slice, before
    the others had started, and a slow one start them far apart."""
    writers, events, rounds = 8, 500, 25
    path, sync = tmp_path / "shared.jsonl", tmp_path / "sync"
    sync.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(n), str(events), str(writers),
             str(rounds), str(sync)],
            cwd=ROOT,
        )
        for n in range(writers)
    ]
    try:
        assert [p.wait(timeout=300) for p in procs] == [0] * writers
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    lines = path.read_bytes().split(b"\n")
    assert lines.pop() == b""
    assert len(lines) == writers * (events + 2)
    assert sum(len(line) > PIPE_BUF for line in lines) == writers * events // 10
    # The writers really ran at the same time: one after another would switch writer only
    # writers - 1 times; here each round holds lines of every writer, so the file switches
    # writer at least writers - 1 times in each (and more, as the scheduler interleaves them).
    owners = [line.split(b'"session": "', 1)[1][:8] for line in lines]
    assert sum(a != b for a, b in pairwise(owners)) >= (writers - 1) * rounds

    db = tmp_path / "ledger.db"
    ingest(db, [path])
    assert rows(db, "select count(*) as n from ingest_errors") == [{"n": 0}]
    assert rows(db, "select session_id, events, steps, recorded_stop from sessions") == [
        {"session_id": f"writer-{n}", "events": events + 2, "steps": events,
         "recorded_stop": "task_complete"}
        for n in range(writers)
    ]
    per_writer = rows(db, "select session_id, group_concat(idx) as idxs from steps "
                          "group by session_id order by session_id")
    expected = ",".join(str(i) for i in range(1, events + 3))
    assert all(r["idxs"] == expected for r in per_writer)


def test_threads_sharing_a_ledger_never_tear_a_line(tmp_path: Path) -> None:
    path = tmp_path / "threads.jsonl"
    shared = open_session(path, "stress", NO_CAPS, session="shared")

    def work(n: int) -> None:
        own = open_session(path, "stress", NO_CAPS, session=f"thread-{n}")
        for i in range(100):
            own.action("think", f"{n}/{i} " + "y" * 5000)
            shared.round(tool_calls=1, output_tokens=1, observation=f"{n}/{i}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    db = tmp_path / "ledger.db"
    ingest(db, [path])
    assert rows(db, "select count(*) as n from ingest_errors") == [{"n": 0}]
    counts = {r["session_id"]: r["events"] for r in rows(db, "select * from sessions")}
    assert counts == {"shared": 401, **{f"thread-{n}": 101 for n in range(4)}}
    assert shared.state.events == 401
