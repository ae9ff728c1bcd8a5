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


def wait_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# A shell (the tool) that starts a grandchild and prints both pids, then waits for it.
FAMILY = 'sleep 30 & echo "$$ $!"; wait'


def test_a_quick_tool_runs_to_its_end() -> None:
    result = run_with_deadline(["sh", "-c", "echo hi; exit 3"], 10, capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.timed_out, result.ok) == (3, "hi\n", False,
                                                                               False)
    assert result.outcome == "exit 3"


def test_no_deadline_means_no_timeout() -> None:
    assert run_with_deadline(["true"], None).ok


def test_past_the_deadline_the_tool_and_its_children_are_killed() -> None:
    started = time.monotonic()
    result = run_with_deadline(["sh", "-c", FAMILY], 0.5, grace=1.0, capture_output=True,
                               text=True)
    took = time.monotonic() - started
    shell, grandchild = (int(pid) for pid in result.stdout.split())
    assert result.timed_out and not result.ok
    assert result.returncode is not None and result.returncode < 0  # killed by a signal
    assert 0.5 <= took < 5
    assert result.outcome.startswith("killed after 0.")
    assert wait_gone(shell) and wait_gone(grandchild)


def test_a_group_that_ignores_sigterm_gets_sigkill_after_the_grace() -> None:
    script = "trap '' TERM; " + FAMILY
    started = time.monotonic()
    result = run_with_deadline(["sh", "-c", script], 0.3, grace=0.3, capture_output=True,
                               text=True)
    took = time.monotonic() - started
    shell, grandchild = (int(pid) for pid in result.stdout.split())
    assert result.timed_out and result.returncode == -9
    assert 0.6 <= took < 5
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
