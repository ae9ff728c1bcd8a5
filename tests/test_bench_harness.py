"""The benchmark's memory sampler (bench/harness.py): a process tree's PSS, its own apart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import harness  # noqa: E402

#: A parent that forks two children, each touching 20 MB of its own, then waits.
FORKS = """
import os, sys, time
for _ in range(2):
    if os.fork() == 0:
        block = bytearray(20 * 1024 * 1024)
        os.write(1, b"ready\\n")  # one write: the two children's lines never interleave
        time.sleep(60)
        os._exit(0)
time.sleep(60)
"""


def test_the_tree_holds_the_children_and_the_process_alone_does_not() -> None:
    parent = subprocess.Popen([sys.executable, "-c", FORKS], stdout=subprocess.PIPE, text=True)
    try:
        assert [parent.stdout.readline() for _ in range(2)] == ["ready\n"] * 2
        tree = harness._tree(parent.pid)
        assert tree[0] == parent.pid and len(tree) == 3
        own, whole = harness.tree_kb(parent.pid)
        assert whole - own >= 2 * 20 * 1024  # the children's own 20 MB each
        assert own < 20 * 1024
    finally:
        for pid in harness._tree(parent.pid)[1:]:
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


def test_a_process_that_ended_holds_nothing() -> None:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    assert harness.tree_kb(done.pid) == (0, 0)
