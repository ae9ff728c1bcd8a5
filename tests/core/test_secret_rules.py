"""The rule set is loaded once a process, whichever thread asks first (secret_rules.py)."""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ledger.core import secret_rules

#: Seconds anything here waits for another thread at most: only a hang (a lock never let go)
#: gets near it, however slow or loaded the machine.
HANG_S = 120


@pytest.fixture
def counted_builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[int], threading.Event]]:
    """The rule set's build faked (counted, and held until the event is set), with nothing
    loaded yet."""
    builds: list[int] = []
    release = threading.Event()

    def build() -> Any:
        builds.append(threading.get_ident())
        assert release.wait(HANG_S), "the build was never let go"
        return object()

    monkeypatch.setattr(secret_rules, "_built", functools.cache(build))  # as the real one
    secret_rules._scanner.cache_clear()
    yield builds, release
    release.set()
    secret_rules._scanner.cache_clear()  # the real one again (its build is still cached)


def _asking(thread: threading.Thread) -> bool:
    """Whether ``thread`` is inside ``secret_rules._scanner`` (loading, or waiting for the
    thread that loads)."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        if frame.f_code is secret_rules._scanner.__wrapped__.__code__:
            return True
        frame = frame.f_back
    return False


def test_threads_that_ask_while_it_loads_wait_for_the_one_load(
    counted_builds: tuple[list[int], threading.Event],
) -> None:
    """Every thread asks while the first one's build is held (seen in their stacks, not
    assumed after a sleep): one build, the same rule set for all."""
    builds, release = counted_builds
    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(secret_rules._scanner()))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + HANG_S
    while not (builds and all(_asking(thread) for thread in threads)):
        assert time.monotonic() < deadline, "the threads never all asked"
        time.sleep(0.01)
    assert not secret_rules.loaded()  # not while it loads
    release.set()
    for thread in threads:
        thread.join(HANG_S)
    assert len(builds) == 1
    assert len(got) == 4 and all(scanner is got[0] for scanner in got)
    assert secret_rules.loaded()
