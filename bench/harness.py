"""What every stage of the benchmark shares: a stage run in a process of its own, its figures
(every run kept), and the memory it and its children held (sampled proportional set size)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MB = 1_000_000


@dataclass
class Run:
    """One run of a stage: what the stage reported, its process's peak RSS, and the peak of
    the memory it and its child processes (ingest's workers) held together."""

    result: dict[str, Any]
    rss_mb: float
    tree_mb: float


@dataclass
class Figure:
    name: str
    runs: list[Run] = field(default_factory=list)
    events: int | None = None
    bytes: int | None = None
    note: str = ""

    @property
    def seconds(self) -> float:
        return statistics.median(r.result["seconds"] for r in self.runs)

    @property
    def cpu_seconds(self) -> float:
        return statistics.median(r.result.get("cpu_seconds", 0.0) for r in self.runs)

    @property
    def rss_mb(self) -> float:
        return max(r.rss_mb for r in self.runs)

    @property
    def tree_mb(self) -> float:
        return max(r.tree_mb for r in self.runs)

    @property
    def events_per_s(self) -> float | None:
        return self.events / self.seconds if self.events else None

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes / MB / self.seconds if self.bytes else None


SAMPLE_EVERY = 0.1  # seconds between two looks at a stage's memory (each costs 0.6 ms of CPU
# a process: every 20 ms, 9% of a core taken from the 3 processes of an ingest with workers)


def stage(name: str, args: dict[str, Any]) -> Run:
    """Run one stage in a fresh Python process; its result, its peak RSS, and the peak of
    what it and its children held together (sampled, see :func:`tree_kb`). A stage that runs
    a whole command (``child_rss_mb`` in its result) is the command's: its peak RSS, and what
    it and its children held, without the stage's own process."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "stages.py"), name, json.dumps(args)],
            stdout=out, stderr=err,
        )
        tree = below = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            own, children = tree_kb(proc.pid)
            tree, below = max(tree, children), max(below, children - own)
            time.sleep(SAMPLE_EVERY)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise StageFailed(f"{name}: exit {proc.returncode}: {err.read()[-800:].strip()}")
        result = json.loads(out.read().strip().splitlines()[-1])
    if "child_rss_mb" in result:
        rss = result["child_rss_mb"]
        return Run(result, rss, max(below / 1024, rss))
    rss = usage.ru_maxrss / 1024  # KiB on Linux
    return Run(result, rss, max(tree / 1024, rss))


def tree_kb(pid: int) -> tuple[int, int]:
    """The proportional set size (KiB) of a process, and of it and its descendants: memory
    shared between them (a forked worker shares its parent's pages until it writes them)
    counted once, split between the sharers. 0 where /proc cannot tell (the process ended).

    A look during which a process of the tree started or ended is taken again: a fork
    between reading the parent and reading the child counts the pages they share whole in
    the one and half in the other (seen once: a peak 2 MB too high)."""
    for _ in range(5):
        pids = _tree(pid)
        sizes = [_pss_kb(p) for p in pids]
        if _tree(pid) == pids:
            break
    return sizes[0], sum(sizes)


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, ``pid`` first."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return [pid]
    return [pid, *(p for child in children for p in _tree(int(child)))]


def _pss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class StageFailed(RuntimeError):
    pass


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def repeat(name: str, times: int, args: dict[str, Any], before: Any = None) -> list[Run]:
    runs = []
    for n in range(times):
        if before is not None:
            before()
        runs.append(stage(name, args))
        log(f"  {name} run {n + 1}/{times}: {runs[-1].result['seconds']:.2f} s, "
            f"{runs[-1].rss_mb:.0f} MB")
    return runs


def fresh(*paths: Path) -> None:
    for path in paths:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def copy_to_disk(source: Path, target: Path) -> None:
    """Copy a database and wait until the copy is on disk.

    A fresh copy's pages sit in the page cache, dirty; the first checkpoint of an ingest into
    it fsyncs the file, which would write the whole copy then and bill the ingest for it (on
    the 3M database, a 0.55 s incremental ingest was 0.37 s with the copy on disk first).
    """
    shutil.copyfile(source, target)
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
