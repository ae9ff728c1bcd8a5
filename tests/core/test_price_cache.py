"""The price library's answers remembered on disk (ledger/config/price_cache.py): the same
rates as the library's for every model and time, in the process that asked the library and
in a later one that reads the file without asking it; a lost or foreign file costs only time."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.config import prices
from ledger.config.price_cache import RememberedRates, cache_file
from tests.core.test_pricing import FIXTURE_MODELS

#: A model priced from a start date (2026-03-13), one priced by the time of day (off-peak),
#: and one the library does not know, besides the fixtures' models.
MODELS = [*FIXTURE_MODELS, "claude-sonnet-4-6", "deepseek-chat", "acme-coder-9"]
TIMES = [None, *(datetime(*d, tzinfo=UTC).timestamp() for d in [
    (2024, 1, 1), (2026, 3, 12, 23, 59), (2026, 3, 13), (2026, 3, 13, 17, 30), (2027, 6, 1, 3)])]


def asked(path: Path) -> list[tuple[str, float | None]]:
    """Every answer of a fresh RememberedRates on ``path`` for MODELS at TIMES."""
    remembered = RememberedRates(path)
    return [remembered(model, at) for model in MODELS for at in TIMES]


def test_answers_are_the_librarys_then_read_back_without_it(tmp_path, monkeypatch) -> None:
    path = tmp_path / "cache" / "genai-prices-x.json"
    library = [prices.library_rates(model, at) for model in MODELS for at in TIMES]
    assert asked(path) == library
    assert path.exists()

    model_info = prices._model_info

    def no_library(model: str) -> object:  # only the time-of-day model may still ask
        assert model == "deepseek-chat", model
        return model_info(model)

    monkeypatch.setattr(prices, "_model_info", no_library)
    assert asked(path) == library


@pytest.mark.parametrize("content", [
    b"", b"{not json", b"[1, 2]", b'{"gpt-5": 3}', b'{"gpt-5": {"dated": 1}}',
    b'{"gpt-5": {"latest": {"input": "x"}, "dated": [[null, null]]}}',
])
def test_a_file_that_cannot_be_used_costs_time_not_a_price(tmp_path, content) -> None:
    path = tmp_path / "genai-prices-x.json"
    path.write_bytes(content)
    assert asked(path) == [prices.library_rates(m, at) for m in MODELS for at in TIMES]


def test_without_a_cache_folder_nothing_is_remembered(tmp_path) -> None:
    assert asked(None) == [prices.library_rates(m, at) for m in MODELS for at in TIMES]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"XDG_CACHE_HOME": "/c", "HOME": "/h"}, "/c/agent-ledger/genai-prices-1.2-f1.json"),
        ({"HOME": "/h"}, "/h/.cache/agent-ledger/genai-prices-1.2-f1.json"),
        ({}, None),
    ],
)
def test_the_cache_file_is_in_the_users_cache_folder(monkeypatch, env, expected) -> None:
    for name in ("XDG_CACHE_HOME", "HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    found = cache_file("1.2")
    assert (None if found is None else str(found)) == expected


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.floats(min_value=1.6e9, max_value=1.9e9), model=st.sampled_from(MODELS))
def test_any_time_is_the_librarys_answer(tmp_path, at, model) -> None:
    path = tmp_path / "genai-prices-any.json"
    RememberedRates(path)(model, None)  # the schedule written
    assert RememberedRates(path)(model, at) == prices.library_rates(model, at)


def test_the_default_book_remembers(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    book = prices.library_book()
    assert book.rates("gpt-5") == prices.PriceBook(
        prices.LIBRARY, book.version, prices.library_rates).rates("gpt-5")
    assert (tmp_path / "agent-ledger" / f"genai-prices-{book.version}-f1.json").exists()


def test_processes_that_learn_at_once_add_to_the_file(tmp_path, monkeypatch) -> None:
    """A process writes what the file holds now with what it learnt, so that what another
    process (a worker of the same ingest) wrote since it read the file is kept."""
    path = tmp_path / "genai-prices-x.json"
    models = ["gemini-2.5-pro", "gpt-5", "claude-opus-4-6"]
    expected = [prices.library_rates(m, None) for m in models]
    one, two = RememberedRates(path), RememberedRates(path)
    one(models[0], None)  # one reads the file (empty) and writes it
    two(models[1], None)  # two reads it, with the first model, and writes it
    one(models[2], None)  # one, which never saw the second model, writes it again
    monkeypatch.setattr(prices, "_model_info", lambda model: pytest.fail(model))
    later = RememberedRates(path)
    assert [later(m, None) for m in models] == expected
