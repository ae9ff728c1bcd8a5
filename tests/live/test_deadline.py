"""Tools under a deadline: when time runs out the tool and everything it started are gone."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ledger.live.deadline import ToolRun, run_with_deadline


def gone(pid: int) -> bool:
    """No such process, or only its zombie (the container's init may be slow to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_gone(pid: int, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# A shell (the tool) that starts a grandchild and prints both pids, then waits for it.
FAMILY = 'sleep 300 & echo "$$ $!"; wait'
#: Deadlines to try, shortest first. The shell must get as far as printing its pids (past
#: its trap, its grandchild started) before its deadline: a few ms on an idle machine, more on
#: a loaded one. A run where it did not proves nothing, so it is run again with the next
#: deadline instead of failing the test.
DEADLINES = (0.3, 2.0, 10.0)
#: Seconds a killed tool may take beyond its deadline and grace, however loaded the machine:
#: well under the grandchild's 300 s sleep, which a tool that was not killed would wait for.
SLACK = 10.0


def run_family(script: str, grace: float) -> tuple[float, float, ToolRun, list[int]]:
    """``script`` under the first of DEADLINES it gets ready within: the deadline, the
    seconds the run took, the run and the pids the shell printed (its own, its grandchild's)."""
    for timeout in DEADLINES:
        started = time.monotonic()
        result = run_with_deadline(["sh", "-c", script], timeout, grace=grace,
                                   capture_output=True, text=True)
        took = time.monotonic() - started
        pids = [int(pid) for pid in result.stdout.split()]
        if len(pids) == 2:
            return timeout, took, result, pids
    pytest.fail(f"the shell did not print its pids within {DEADLINES[-1]} s")


def test_a_quick_tool_runs_to_its_end() -> None:
    result = run_with_deadline(["sh", "-c", "echo hi; exit 3"], 10, capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.timed_out, result.ok) == (3, "hi\n", False,
                                                                               False)
    assert result.outcome == "exit 3"


def test_no_deadline_means_no_timeout() -> None:
    assert run_with_deadline(["true"], None).ok


def test_past_the_deadline_the_tool_and_its_children_are_killed() -> None:
    timeout, took, result, (shell, grandchild) = run_family(FAMILY, grace=1.0)
    assert result.timed_out and not result.ok
    assert result.returncode is not None and result.returncode < 0  # killed by a signal
    assert timeout <= took < timeout + 1.0 + SLACK
    assert result.outcome == f"killed after {result.seconds:.1f}s (wall-clock budget)"
    assert timeout <= result.seconds <= took
    assert wait_gone(shell) and wait_gone(grandchild)


def test_a_group_that_ignores_sigterm_gets_sigkill_after_the_grace() -> None:
    script = "trap '' TERM; " + FAMILY
    timeout, took, result, (shell, grandchild) = run_family(script, grace=0.3)
    assert result.timed_out and result.returncode == -9
    assert timeout + 0.3 <= took < timeout + 0.3 + SLACK
    assert wait_gone(shell) and wait_gone(grandchild)


@pytest.mark.parametrize("timeout", [0, -1.5])
def test_no_time_left_does_not_start_the_tool(tmp_path: Path, timeout: float) -> None:
    marker = tmp_path / "ran"
    result = run_with_deadline(["touch", str(marker)], timeout)
    assert result == ToolRun(["touch", str(marker)], None, None, None, 0.0)
    assert not marker.exists()
    assert result.outcome == "not started: no wall-clock budget left"


def test_an_interrupted_wait_kills_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    pids: list[int] = []
    real = subprocess.Popen.communicate

    def interrupted(self: subprocess.Popen, *args: object, **kwargs: object) -> object:
        if not pids:
            pids.append(self.pid)
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_with_deadline(["sleep", "30"], 10, grace=0.2)
    assert wait_gone(pids[0])
