"""What a process remembers in the user's cache folder (ledger/config/user_cache.py) for the
next: the default action map's parse (the price library's schedules: test_price_cache.py)."""

from __future__ import annotations

import pytest

from ledger.config import action_map
from ledger.config.action_map import CACHE_NAME, default_action_map


@pytest.fixture
def fresh_default(monkeypatch):
    """default_action_map() read again in this test (and again after it)."""
    default_action_map.cache_clear()
    yield
    default_action_map.cache_clear()


def test_the_default_map_is_parsed_once_then_read_back_without_tomllib(
    tmp_path, monkeypatch, fresh_default
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    parsed = action_map.parse_action_map(action_map._default_data(), "x")
    first = default_action_map()
    assert (tmp_path / "agent-ledger" / CACHE_NAME).exists()
    default_action_map.cache_clear()
    monkeypatch.setattr(action_map, "_default_data", lambda: pytest.fail("parsed again"))
    again = default_action_map()
    assert first.digest == again.digest == parsed.digest
    assert first == again


def test_without_a_cache_folder_the_map_is_parsed(tmp_path, monkeypatch, fresh_default) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    assert default_action_map().digest == action_map.parse_action_map(
        action_map._default_data(), "x").digest
