"""The price book: the pinned pricing library's rates, and the user's ``--prices`` TOML file.

The library is `genai-prices` (Pydantic's, MIT): its data ships inside the wheel and is read
from there, never fetched (agent-ledger never starts its ``UpdatePrices`` thread), so a price
depends only on the installed version, which is stored with what it priced. It is imported
on first use, so commands that price nothing never load its data. Its rates are turned into
:class:`~ledger.core.pricing.Rates`, so the library's prices and the user's go through one
piece of arithmetic (:mod:`ledger.core.pricing`).

A prices file adds models or overrides rates, in USD per million tokens::

    [models."acme-coder-2"]              # a model the library does not know
    input = 1.0
    output = 4.0
    cache_creation = 1.25                # optional: else charged at the input rate
    cache_read = 0.1                     # optional: else charged at the input rate
    tiers = [{above = 200_000, input = 2.0, output = 8.0}]

    [models."claude-opus-4-*"]           # a prefix: every model name it starts
    input = 4.0                          # all of input and output: replaces the library's
    output = 20.0

    [models."gpt-5.5"]                   # some rates only: laid over the library's
    cache_read = 0.25
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path
from typing import Any

from ledger.core.pricing import PriceBook, Rates, Tier

LIBRARY = "genai-prices"
#: genai-prices' price keys, by the name of the Rates field they fill.
_LIBRARY_KEYS = {
    "input": "input_mtok",
    "output": "output_mtok",
    "cache_creation": "cache_write_mtok",
    "cache_read": "cache_read_mtok",
}
_RATE_KEYS = tuple(_LIBRARY_KEYS)
_MODEL_KEYS = (*_RATE_KEYS, "tiers")


class PricesError(ValueError):
    """A prices file that cannot be used; the message names the file and the key."""


def library_book() -> PriceBook:
    """The library's prices alone, answered from what earlier processes learnt of them
    where they can be (:mod:`ledger.config.price_cache`: the same rates, without importing
    the library's data)."""
    from ledger.config.price_cache import RememberedRates, cache_file

    version = library_version()
    return PriceBook(LIBRARY, version, RememberedRates(cache_file(version)))


def load_prices(path: str | Path | None = None) -> PriceBook:
    """The library's prices with ``path``'s over them (or the library's alone, if no path)."""
    book = library_book()
    if path is None:
        return book
    path = Path(path)
    data = _read(path)
    unknown = [key for key in data if key != "models"]
    if unknown:
        raise PricesError(f"{path}: unknown top-level key {unknown[0]!r}; expected [models.NAME]")
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise PricesError(f"{path}: 'models' must be a table of [models.NAME] tables")
    full: dict[str, Rates] = {}
    partial: dict[str, dict[str, Decimal]] = {}
    for name, entry in models.items():
        where = f"{path}: [models.{name!r}]"
        if not isinstance(entry, dict):
            raise PricesError(f"{where} must be a table")
        if not name.rstrip("*"):
            raise PricesError(f"{where}: a model name cannot be empty")
        if "*" in name.rstrip("*") or name.count("*") > 1:
            raise PricesError(f"{where}: '*' may only end a name (a prefix)")
        extra = [key for key in entry if key not in _MODEL_KEYS]
        if extra:
            raise PricesError(
                f"{where}: unknown key {extra[0]!r}; expected {', '.join(_MODEL_KEYS)}"
            )
        if "input" in entry and "output" in entry:
            full[name] = Rates(
                **{k: _rate(where, k, entry[k]) for k in _RATE_KEYS if k in entry},
                tiers=_tiers(where, entry.get("tiers", [])),
            )
        elif "tiers" in entry:
            raise PricesError(f"{where}: tiers need the model's input and output rates too")
        elif not entry:
            raise PricesError(f"{where}: no rates given")
        elif name.endswith("*") or library_rates(name, None) is None:
            raise PricesError(
                f"{where}: {LIBRARY} {library_version()} has no price for this model, so it "
                "needs both 'input' and 'output'"
            )
        else:
            partial[name] = {k: _rate(where, k, v) for k, v in entry.items()}
    return PriceBook(
        book.source, book.version, book.lookup, full, partial,
        overrides_by=f"{path.name}#{_digest(path)}",
    )


def _read(path: Path) -> dict[str, Any]:
    import tomllib  # here: only a --prices file is TOML; the hook's calls read none

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PricesError(f"{path}: not a valid TOML prices file: {exc}") from None
    except OSError as exc:
        raise PricesError(f"{path}: cannot read the prices file: {exc.strerror}") from None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _rate(where: str, key: str, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PricesError(f"{where}: {key} must be a number (USD per million tokens)")
    try:
        rate = Decimal(str(value))
    except InvalidOperation:
        raise PricesError(f"{where}: {key} must be a number, not {value!r}") from None
    if not rate.is_finite() or rate < 0:
        raise PricesError(f"{where}: {key} must be 0 or more, not {value!r}")
    return rate


def _tiers(where: str, value: Any) -> tuple[Tier, ...]:
    if not isinstance(value, list):
        raise PricesError(f"{where}: tiers must be an array of tables")
    tiers = []
    for index, tier in enumerate(value):
        here = f"{where} tiers[{index}]"
        if not isinstance(tier, dict):
            raise PricesError(f"{here} must be a table")
        above = tier.get("above")
        if isinstance(above, bool) or not isinstance(above, int) or above < 0:
            raise PricesError(f"{here}: 'above' must be a whole number of prompt tokens")
        extra = [key for key in tier if key not in ("above", *_RATE_KEYS)]
        if extra:
            raise PricesError(f"{here}: unknown key {extra[0]!r}")
        tiers.append(Tier(above, **{k: _rate(here, k, tier[k]) for k in _RATE_KEYS if k in tier}))
    return tuple(tiers)


# --- the library ------------------------------------------------------------------------------


def library_version() -> str:
    """The installed version of the library (from its ``.dist-info`` folder's name where it
    can be told so: importing :mod:`importlib.metadata` costs a process some 40 ms)."""
    from ledger.core.installed import installed_version

    found = installed_version("genai_prices", LIBRARY)
    if found is not None:
        return found
    from importlib.metadata import version

    return version(LIBRARY)


def library_rates(model: str, at: float | None) -> Rates | None:
    """genai-prices' rates for ``model`` at POSIX time ``at`` (its latest if None), or None."""
    info = _model_info(model)
    if info is None:
        return None
    if at is None or not _by_time_of_day(model):
        # Prices change by UTC date (or not at all): one look-up a model and day.
        return _rates_on(model, None if at is None else int(at // DAY))
    return _rates(_prices_at(info, at))


DAY = 86_400


@lru_cache(maxsize=4096)
def _rates_on(model: str, day: int | None) -> Rates | None:
    info = _model_info(model)
    return _rates(_prices_at(info, None if day is None else day * DAY))


@lru_cache(maxsize=512)
def _by_time_of_day(model: str) -> bool:
    """Whether the model's price depends on the time of day (off-peak prices)."""
    from genai_prices.types import TimeOfDateConstraint

    prices = _model_info(model).prices
    return isinstance(prices, list) and any(
        isinstance(p.constraint, TimeOfDateConstraint) for p in prices
    )


@lru_cache(maxsize=512)
def _model_info(model: str) -> Any:
    from genai_prices import data_snapshot

    try:
        return data_snapshot.get_snapshot().find_provider_model(model, None, None, None)[1]
    except LookupError:
        return None


def _prices_at(info: Any, at: float | None) -> Any:
    """The library's price for a request at ``at``; for None, its latest dated price."""
    from genai_prices.types import ConditionalPrice, StartDateConstraint

    prices = info.prices
    if not isinstance(prices, list):
        return prices
    if at is not None:
        return info.get_prices(datetime.fromtimestamp(at, UTC))
    dated = [
        p for p in prices
        if isinstance(p, ConditionalPrice)
        and (p.constraint is None or isinstance(p.constraint, StartDateConstraint))
    ]
    return (dated or prices)[-1].prices


#: The library's price objects live as long as its data, so their ids are stable keys (they
#: define ``__eq__`` without ``__hash__``, so ``lru_cache`` cannot key on them).
_CONVERTED: dict[int, Rates | None] = {}


def _rates(price: Any) -> Rates | None:
    key = id(price)
    if key not in _CONVERTED:
        _CONVERTED[key] = _convert(price)
    return _CONVERTED[key]


def _convert(price: Any) -> Rates | None:
    values: dict[str, Any] = {k: getattr(price, key, None) for k, key in _LIBRARY_KEYS.items()}
    if values["input"] is None and values["output"] is None:
        return None  # priced per request or per image, not per token
    bases = {k: _base(v) for k, v in values.items()}
    bases["input"] = bases["input"] or Decimal(0)
    bases["output"] = bases["output"] or Decimal(0)
    return Rates(**bases, tiers=_library_tiers(values))


def _base(value: Any) -> Decimal | None:
    return getattr(value, "base", value)


def _library_tiers(values: Mapping[str, Any]) -> tuple[Tier, ...]:
    """The library's per-price tiers as tiers of all prices: at each threshold, every price
    tiered at or below it takes its tier's rate."""
    tiered = {k: v.tiers for k, v in values.items() if hasattr(v, "tiers")}
    starts = sorted({t.start for tiers in tiered.values() for t in tiers})
    out = []
    for start in starts:
        rates = {}
        for key, tiers in tiered.items():
            passed = [t for t in tiers if t.start <= start]
            if passed:
                rates[key] = max(passed, key=lambda t: t.start).price
        out.append(Tier(start, **rates))
    return tuple(out)


__all__ = ["LIBRARY", "PricesError", "library_book", "library_rates", "library_version",
           "load_prices"]
