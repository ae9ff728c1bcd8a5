"""Appends: every line whole, whoever else is appending, and nothing half-written left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
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

path, n, events, ready, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
off = Budget(**{k: None for k in Budget.keys()})
recorder = open_session(path, "stress", off, session=f"writer-{n}")
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.001)
for i in range(events):
    if i % 10 == 0:
        recorder.round(tool_calls=1, output_tokens=i, observation=f"{n}:{i}:" + "x" * 9000)
    else:
        recorder.action("read", f"writer {n} event {i}")
recorder.close("task_complete")
"""


def test_many_processes_appending_at_once_never_tear_a_line(tmp_path: Path) -> None:
    writers, events = 8, 500
    path, go = tmp_path / "shared.jsonl", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(n), str(events),
             str(tmp_path / f"ready-{n}"), str(go)],
            cwd=ROOT,
        )
        for n in range(writers)
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{n}").exists() for n in range(writers)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    assert [p.wait(timeout=120) for p in procs] == [0] * writers

    lines = path.read_bytes().split(b"\n")
    assert lines.pop() == b""
    assert len(lines) == writers * (events + 2)
    assert sum(len(line) > PIPE_BUF for line in lines) == writers * events // 10
    # The writers really ran at the same time: one after another would switch writer only
    # writers - 1 times; interleaved writers switch again and again (how often depends on the
    # scheduler, so the bar is low enough for a loaded machine).
    owners = [line.split(b'"session": "', 1)[1][:8] for line in lines]
    assert sum(a != b for a, b in pairwise(owners)) > 2 * writers

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
