"""The rule set is loaded once a process, whichever thread asks first (secret_rules.py)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ledger.core import secret_rules


@pytest.fixture
def counted_builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The rule set's build faked (slow, counted), with nothing loaded yet."""
    builds: list[int] = []

    def build() -> Any:
        time.sleep(0.5)  # long enough for every thread to ask meanwhile
        builds.append(threading.get_ident())
        return object()

    monkeypatch.setattr(secret_rules, "_built", functools.cache(build))  # as the real one
    secret_rules._scanner.cache_clear()
    yield builds
    secret_rules._scanner.cache_clear()  # the real one again (its build is still cached)


def test_threads_that_ask_while_it_loads_wait_for_the_one_load(
    counted_builds: list[int],
) -> None:
    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(secret_rules._scanner()))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    assert not secret_rules.loaded()  # not while it loads
    for thread in threads:
        thread.join()
    assert len(counted_builds) == 1
    assert len(got) == 4 and all(scanner is got[0] for scanner in got)
    assert secret_rules.loaded()
