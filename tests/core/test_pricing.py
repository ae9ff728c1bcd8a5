"""Prices: every path a round's cost can take (issue 19, item 6).

Known model (the pinned library), unknown model (no price: None, never a guess), an override
file (full, partial, prefix), cache tokens, tiers; and the library's own arithmetic agrees
with ours, so converting its rates loses nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.config.prices import LIBRARY, PricesError, library_book, library_version, load_prices
from ledger.core.events import Event
from ledger.core.pricing import USD, PriceBook, Rates, Tier, Tokens, price_event

M = 1_000_000
BOOK = library_book()
#: Models of the real agent logs in tests/fixtures and shared fixtures, as the logs name them.
FIXTURE_MODELS = [
    "claude-opus-4-6", "claude-opus-4-5-20251101", "claude-opus-4-20250514",
    "claude-sonnet-4-20250514", "claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001",
    "gpt-5", "gpt-5-codex", "gpt-5.1-codex", "gpt-5.3-codex", "gpt-5.5", "gpt-4.1-2025-04-14",
    "gpt-4o-mini", "gemini-2.5-flash", "gemini-2.5-pro",
]


def cost(model: str, tokens: Tokens, book: PriceBook = BOOK) -> float | None:
    priced = book.cost(model, tokens)
    return None if priced is None else priced.amount


# --- known models, by the pinned library --------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tokens", "usd"),
    [
        # Anthropic's list prices, per million: opus 4.6 $5 in, $25 out, $6.25 cache write,
        # $0.50 cache read; haiku 4.5 $1 / $5 / $1.25 / $0.10.
        ("claude-opus-4-6", Tokens(input=M), 5.0),
        ("claude-opus-4-6", Tokens(output=M), 25.0),
        ("claude-opus-4-6", Tokens(cache_creation=M), 6.25),
        ("claude-opus-4-6", Tokens(cache_read=M), 0.5),
        ("claude-haiku-4-5-20251001", Tokens(1000, 2000, 3000, 40_000), 0.001 + 0.01
         + 0.00375 + 0.004),
        # OpenAI: gpt-5 $1.25 in, $10 out, $0.125 cached; reasoning is part of output.
        ("gpt-5", Tokens(input=M, output=M, reasoning=M // 2), 11.25),
        ("gpt-5", Tokens(cache_read=M), 0.125),
    ],
)
def test_a_known_model_is_priced_by_the_library(model, tokens, usd) -> None:
    priced = BOOK.cost(model, tokens)
    assert priced is not None
    assert priced.amount == pytest.approx(usd, rel=1e-12)
    assert (priced.currency, priced.priced_by) == (USD, f"{LIBRARY} {library_version()}")


@pytest.mark.parametrize("model", FIXTURE_MODELS)
def test_every_model_of_the_real_logs_has_a_price(model) -> None:
    assert cost(model, Tokens(1, 1)) > 0


#: LiteLLM's model_prices_and_context_window.json (litellm 1.110.2), whose rates ccusage
#: prices Claude Code logs with: input, output, cache write, cache read per million tokens.
LITELLM_CLAUDE = [
    ("claude-opus-4-6", "5", "25", "6.25", "0.5"),
    ("claude-opus-4-5-20251101", "5", "25", "6.25", "0.5"),
    ("claude-sonnet-4-5-20250929", "3", "15", "3.75", "0.3"),
    ("claude-sonnet-4-6", "3", "15", "3.75", "0.3"),
    ("claude-haiku-4-5-20251001", "1", "5", "1.25", "0.1"),
]


@pytest.mark.parametrize(("model", "input", "output", "write", "read"), LITELLM_CLAUDE)
def test_claude_base_rates_agree_with_litellms(model, input, output, write, read) -> None:
    """So a Claude Code session under 200k prompt tokens a request costs what ccusage says."""
    rates = BOOK.rates(model)[0]
    assert (rates.input, rates.output, rates.cache_creation, rates.cache_read) == tuple(
        Decimal(v) for v in (input, output, write, read)
    )


@pytest.mark.parametrize(
    ("ts", "usd"),
    [(datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC), 0.75),
     (datetime(2027, 1, 1, tzinfo=UTC), 1.5), (None, 1.5)],
)
def test_a_round_is_priced_at_the_price_of_its_day(ts, usd) -> None:
    """genai-prices 0.2.3 lists gemini-3.6-flash at $0.75 per million input tokens, $1.50 from
    2027-01-01; a round without a timestamp takes the newest price listed."""
    at = None if ts is None else ts.timestamp()
    assert BOOK.cost("gemini-3.6-flash", Tokens(input=M), at).amount == usd


# --- unknown models: no price, never a guess -----------------------------------------------


@pytest.mark.parametrize("model", ["acme-coder-2", "<synthetic>", "", None])
def test_an_unknown_model_has_no_price(model) -> None:
    assert BOOK.cost(model, Tokens(100, 100)) is None


def test_a_round_without_its_input_or_output_tokens_is_not_priced() -> None:
    """Half the usage would under-count the spend: the cost meter stays missing."""
    for event in (Event("round", output_tokens=5, model="gpt-5"),
                  Event("round", model="gpt-5", input_tokens=5)):
        assert price_event(event, BOOK) is None
        assert event.cost is None


def test_a_round_is_priced_in_place_and_a_given_cost_wins() -> None:
    event = Event("round", output_tokens=M, model="claude-opus-4-6", input_tokens=0)
    assert price_event(event, BOOK).amount == event.cost == 25.0
    given_cost = Event("round", output_tokens=M, model="claude-opus-4-6", input_tokens=0,
                       cost=1.5)
    assert price_event(given_cost, BOOK) is None
    assert given_cost.cost == 1.5


# --- cache tokens and tiers ----------------------------------------------------------------


def test_a_missing_cache_price_charges_the_input_rate() -> None:
    rates = Rates(Decimal(2), Decimal(8))
    assert rates.amount(Tokens(cache_creation=M, cache_read=M)) == Decimal(4)


@pytest.mark.parametrize(
    ("prompt", "input_rate"),
    [(200_000, Decimal(3)), (200_001, Decimal(6)), (1_000_000, Decimal(6))],
)
def test_a_tier_is_a_cliff_over_the_whole_prompt(prompt, input_rate) -> None:
    """claude-sonnet-4-5: $3 in, $15 out up to 200k prompt tokens; $6 / $22.50 above."""
    tokens = Tokens(input=prompt - 50_000, cache_read=50_000, output=1000)
    rates = BOOK.rates("claude-sonnet-4-5-20250929")[0]
    at = rates.at(tokens.prompt)
    assert at.input == input_rate
    assert at.output == (Decimal("22.5") if prompt > 200_000 else Decimal(15))


def test_library_tiers_agree_with_the_library_above_272k() -> None:
    below, above = Tokens(input=272_000), Tokens(input=272_001)
    assert cost("gpt-5.5", above) / above.input > cost("gpt-5.5", below) / below.input


@settings(max_examples=60, deadline=None)
@given(
    model=st.sampled_from(FIXTURE_MODELS),
    tokens=st.builds(Tokens, *(st.integers(0, 400_000) for _ in range(4))),
)
def test_our_arithmetic_agrees_with_the_library(model, tokens) -> None:
    from genai_prices import Usage, calc_price

    theirs = calc_price(
        Usage(input_tokens=tokens.prompt, output_tokens=tokens.output,
              cache_write_tokens=tokens.cache_creation, cache_read_tokens=tokens.cache_read),
        model,
    ).total_price
    assert cost(model, tokens) == pytest.approx(float(theirs), rel=1e-12, abs=1e-15)


# --- the --prices file ---------------------------------------------------------------------


def prices_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_prices_file_adds_a_model_with_its_tiers(tmp_path) -> None:
    book = load_prices(prices_file(tmp_path, """
[models."acme-coder-2"]
input = 1.0
output = 4.0
cache_read = 0.1
tiers = [{above = 100_000, input = 2.0}]
"""))
    priced = book.cost("acme-coder-2", Tokens(input=M, output=M, cache_read=M))
    assert priced.amount == pytest.approx(2.0 + 4.0 + 0.1)  # the tier: a 2M prompt > 100k
    assert priced.priced_by.startswith("prices.toml#")
    assert book.cost("acme-coder-2", Tokens(input=1000)).amount == pytest.approx(0.001)


def test_a_prices_file_overrides_the_library_fully_by_prefix_or_partly(tmp_path) -> None:
    book = load_prices(prices_file(tmp_path, """
[models."claude-opus-4-*"]
input = 4.0
output = 20.0
[models."claude-opus-4-6"]
input = 3.0
output = 15.0
[models."gpt-5"]
cache_read = 0.1
"""))
    assert cost("claude-opus-4-6", Tokens(input=M), book) == 3.0  # exact name wins
    assert cost("claude-opus-4-5-20251101", Tokens(input=M), book) == 4.0  # the prefix
    partial = book.cost("gpt-5", Tokens(input=M, cache_read=M))
    assert partial.amount == pytest.approx(1.25 + 0.1)  # the library's input, the file's cache
    assert partial.priced_by.startswith(f"{LIBRARY} {library_version()}+prices.toml#")
    assert cost("claude-haiku-4-5", Tokens(input=M), book) == 1.0  # not overridden
    assert book.digest != BOOK.digest


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[models", "not a valid TOML prices file"),
        ("currency = 'EUR'", "unknown top-level key 'currency'"),
        ('[models."m"]\ninput = -1\noutput = 1', "input must be 0 or more"),
        ('[models."m"]\ninput = "cheap"\noutput = 1', "input must be a number"),
        ('[models."m"]\ninput = 1\noutput = 1\nspeed = 3', "unknown key 'speed'"),
        ('[models."acme-coder-2"]\ncache_read = 0.1', "needs both 'input' and 'output'"),
        ('[models."m"]\ninput = 1\noutput = 1\ntiers = [{input = 2}]', "'above' must be"),
        ('[models."m"]\ntiers = []', "tiers need the model's input and output"),
        ('[models."a*b"]\ninput = 1\noutput = 1', "'*' may only end a name"),
        ('[models."m"]', "no rates given"),
    ],
)
def test_a_bad_prices_file_is_a_clear_error(tmp_path, text, message) -> None:
    path = prices_file(tmp_path, text)
    with pytest.raises(PricesError, match=message) as caught:
        load_prices(path)
    assert str(path) in str(caught.value)


def test_a_book_without_a_source_prices_only_its_overrides() -> None:
    book = PriceBook(overrides={"m": Rates(Decimal(1), Decimal(2), tiers=(Tier(10, output=None),))})
    assert cost("m", Tokens(output=M), book) == 2.0
    assert cost("gpt-5", Tokens(output=M), book) is None


def test_a_books_digest_and_its_rates_as_json_stay_what_they_were() -> None:
    """The digest is stored with every session (a fold digest's part): these values are the
    ones the book gave when its records were dataclasses (b295648)."""
    tiered = Rates(Decimal("3"), Decimal("15.00"), None, Decimal("0.30"), (
        Tier(200_000, Decimal("6"), Decimal("22.5")), Tier(1_000_000, cache_read=Decimal("1E-7"))))
    book = PriceBook("lib", "1.2", overrides={"claude-x-*": tiered,
                                              "gpt-y": Rates(Decimal("1.25"), Decimal("10"))},
                     partial={"gpt-5": {"cache_read": Decimal("0.1")}}, overrides_by="p.toml#abc")
    tiered.amount(Tokens(input=M))  # (its cached bands are no field)
    assert tiered.to_dict() == {
        "input": "3", "output": "15.00", "cache_creation": None, "cache_read": "0.30",
        "tiers": [
            {"above": 200_000, "input": "6", "output": "22.5", "cache_creation": None,
             "cache_read": None},
            {"above": 1_000_000, "input": None, "output": None, "cache_creation": None,
             "cache_read": "1E-7"},
        ],
    }
    assert book.digest == "57cd059ea6af"
