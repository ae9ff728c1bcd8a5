"""Running a tool's subprocess under a deadline, and killing all of it when the deadline passes.

Seed 002 warns that a wall-clock cap "fights hung subprocesses, not all of them: you still need
OS-level timeouts around shell tools". A timeout on the child alone is not enough: a shell tool
starts grandchildren (``make`` runs compilers, ``npm test`` runs node), and killing the shell
leaves them running and holding its output pipes open. So the tool runs in a process group of
its own, and when time runs out the whole group gets SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_GRACE = 2.0


@dataclass(frozen=True)
class ToolRun:
    """What happened to one tool run."""

    args: Sequence[str] | str
    returncode: int | None  # None: not started (no time left)
    stdout: Any
    stderr: Any
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def outcome(self) -> str:
        """A short description for the ledger: ``exit 0``, ``killed after 3.0s``, ..."""
        if self.returncode is None:
            return "not started: no wall-clock budget left"
        if self.timed_out:
            return f"killed after {self.seconds:.1f}s (wall-clock budget)"
        return f"exit {self.returncode}"


def run_with_deadline(
    args: Sequence[str] | str,
    timeout: float | None,
    grace: float = DEFAULT_GRACE,
    **popen: Any,
) -> ToolRun:
    """Run ``args`` in a new process group; past ``timeout`` seconds, kill the whole group.

    ``popen`` goes to :class:`subprocess.Popen` (``capture_output=True`` and ``text=True`` are
    accepted, as with :func:`subprocess.run`). ``timeout`` None means no deadline; a timeout
    of 0 or less does not start the tool.
    """
    if timeout is not None and timeout <= 0:
        return ToolRun(args, None, None, None, 0.0)
    if popen.pop("capture_output", False):
        popen.setdefault("stdout", subprocess.PIPE)
        popen.setdefault("stderr", subprocess.PIPE)
    started = time.monotonic()
    with subprocess.Popen(args, start_new_session=True, **popen) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            kill_group(proc, grace)
            stdout, stderr = proc.communicate()
            timed_out = True
        except BaseException:  # interrupted: leave nothing running behind
            kill_group(proc, 0)
            raise
    return ToolRun(args, proc.returncode, stdout, stderr, time.monotonic() - started, timed_out)


def kill_group(proc: subprocess.Popen[Any], grace: float) -> None:
    """SIGTERM to the process group of ``proc``, then SIGKILL if it is still there after
    ``grace`` seconds. The group is killed again after the leader has died, for the
    grandchildren that ignored the first signal."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the whole group is gone already
