"""Money: what a round's tokens cost, from a price book. Pure: no I/O, no clock.

The one function the rest calls is :meth:`PriceBook.cost`, ``cost(model, tokens) -> Priced``
(amount, currency, priced_by), or None when the model has no price (a meter gap, never a
guess). The book holds the rates of a price *source* (the pinned pricing library, read by
:mod:`ledger.config.prices`) and the user's overrides (a ``--prices`` TOML file), which win.

Token semantics are the Anthropic API's, which every importer maps onto:

* ``input``: prompt tokens not read from or written to a cache (OpenAI's ``input_tokens``
  minus its ``cached_tokens``);
* ``cache_creation``: prompt tokens written to a cache, ``cache_read``: read from one;
* ``output``: completion tokens, reasoning included (both vendors bill reasoning as output);
* ``reasoning``: the part of ``output`` spent reasoning, kept for the record, not priced again.

Rates are US dollars per million tokens. A tier is a "cliff": once a request's prompt (input
plus both cache counts) is above the tier's threshold, every token of it is priced at the
tier's rates (Anthropic's and Google's long-context prices, OpenAI's above 272k).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

import msgspec
from msgspec import Struct, field
from msgspec.structs import replace

from ledger.core.events import ROUND, Event

if TYPE_CHECKING:
    from ledger.core.budget import State

USD = "USD"


class Tokens(NamedTuple):
    """One round's token usage (see the module docstring for what each count holds; a tuple,
    made once per priced round, in a fifth of a frozen dataclass's time)."""

    input: int = 0
    output: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    reasoning: int = 0

    @property
    def prompt(self) -> int:
        """Every prompt token, cached or not: what a tier's threshold is measured on."""
        return self.input + self.cache_creation + self.cache_read


class Tier(Struct, frozen=True):
    """Rates for a request whose prompt is above ``above`` tokens; None keeps the base rate."""

    above: int
    input: Decimal | None = None
    output: Decimal | None = None
    cache_creation: Decimal | None = None
    cache_read: Decimal | None = None


class Rates(Struct, frozen=True, dict=True):  # (dict: room for the cached bands)
    """A model's prices in USD per million tokens (exact, as the source gives them).

    A missing cache price (None) charges those tokens at the input rate: never less than the
    vendor could have billed, which is the safe side for a budget.
    """

    input: Decimal
    output: Decimal
    cache_creation: Decimal | None = None
    cache_read: Decimal | None = None
    tiers: tuple[Tier, ...] = ()

    def at(self, prompt: int) -> Rates:
        """The rates in force for a request of ``prompt`` tokens (the highest tier it passes)."""
        for tier in sorted(self.tiers, key=lambda t: t.above, reverse=True):
            if prompt > tier.above:
                changed = {
                    name: getattr(tier, name)
                    for name in _PRICED
                    if getattr(tier, name) is not None
                }
                return replace(self, tiers=(), **changed)
        return self

    def amount(self, tokens: Tokens) -> float:
        """What ``tokens`` cost at these rates, in USD.

        In floats, which a budget sums anyway: about a tenth of the time of Decimals on a path
        taken once per round, and within 1e-15 of the exact amount.
        """
        prompt = tokens.prompt
        for above, (input, output, cache_creation, cache_read) in self._bands:
            if prompt > above:
                return (
                    tokens.input * input
                    + tokens.output * output
                    + tokens.cache_creation * cache_creation
                    + tokens.cache_read * cache_read
                ) / 1_000_000
        raise AssertionError("the base band takes every prompt")  # pragma: no cover

    @cached_property
    def _bands(self) -> tuple[tuple[int, tuple[float, float, float, float]], ...]:
        """Each tier's threshold and float rates (missing cache rates filled in), highest
        first, then the base rates for any prompt (``above`` -1)."""
        bands = []
        for above in [*sorted((t.above for t in self.tiers), reverse=True), -1]:
            rates = self.at(above + 1) if above >= 0 else self
            input = float(rates.input)
            bands.append((above, (
                input,
                float(rates.output),
                input if rates.cache_creation is None else float(rates.cache_creation),
                input if rates.cache_read is None else float(rates.cache_read),
            )))
        return tuple(bands)

    def to_dict(self) -> dict[str, object]:
        """As JSON holds it: each Decimal as its text, the tiers as a list of dicts."""
        return msgspec.json.decode(msgspec.json.encode(self))


_PRICED = tuple(name for name in Tier.__struct_fields__ if name != "above")


class Priced(NamedTuple):
    """What a round cost and who said so (``priced_by``: the source and its version)."""

    amount: float
    currency: str
    priced_by: str


#: A price source: the model's rates (at POSIX time ``at``, or its latest if None), or None.
Lookup = Callable[[str, float | None], Rates | None]


def _no_source(model: str, at: float | None) -> Rates | None:
    return None


class PriceBook(Struct, frozen=True, dict=True):  # (dict: room for priced_by_source)
    """A price source and the user's overrides; ``cost`` is the only way a price is read.

    ``overrides`` maps a model name to its rates: an exact name, or a prefix ending in ``*``
    (the longest matching prefix wins). ``partial`` holds overrides of some rates only
    (``cache_read = 0.1``), laid over the source's rates for that model.
    """

    source: str = "none"
    version: str = ""
    lookup: Lookup = _no_source
    overrides: Mapping[str, Rates] = field(default_factory=dict)
    partial: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    overrides_by: str = ""  # the override file's name and digest, for priced_by

    @cached_property
    def priced_by_source(self) -> str:
        return f"{self.source} {self.version}".strip()

    def rates(self, model: str, at: float | None = None) -> tuple[Rates, str] | None:
        """The rates for ``model`` and who gave them, or None if nobody prices it."""
        key = _match(model, self.overrides)
        if key is not None:
            return self.overrides[key], self.overrides_by
        found = self.lookup(model, at)
        if found is None:
            return None
        key = _match(model, self.partial)
        if key is not None:
            by = f"{self.priced_by_source}+{self.overrides_by}"
            return replace(found, **self.partial[key]), by
        return found, self.priced_by_source

    def cost(self, model: str | None, tokens: Tokens, at: float | None = None) -> Priced | None:
        """What ``tokens`` of ``model`` cost (at POSIX time ``at``), or None if unpriced."""
        if not model:
            return None
        found = self.rates(model, at)
        if found is None:
            return None
        rates, by = found
        return Priced(rates.amount(tokens), USD, by)

    @property
    def digest(self) -> str:
        """Changes whenever a round could be priced differently (source, version, overrides)."""
        settings = {
            "source": self.source,
            "version": self.version,
            "overrides": {k: v.to_dict() for k, v in sorted(self.overrides.items())},
            "partial": {k: {n: str(r) for n, r in sorted(v.items())}
                        for k, v in sorted(self.partial.items())},
        }
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _match(model: str, table: Mapping[str, object]) -> str | None:
    """The key of ``table`` naming ``model``: itself, else the longest ``prefix*`` matching."""
    if model in table:
        return model
    best = None
    for key in table:
        if key.endswith("*") and model.startswith(key[:-1]) and (
            best is None or len(key) > len(best)
        ):
            best = key
    return best


def tokens_of(event: Event) -> Tokens | None:
    """A round's usage, or None unless the log gives both its input and its output tokens
    (a price of half the usage would under-count: the cost meter is then missing)."""
    if event.input_tokens is None or event.output_tokens is None:
        return None
    return Tokens(
        event.input_tokens,
        event.output_tokens,
        event.cache_creation_tokens or 0,
        event.cache_read_tokens or 0,
        event.reasoning_tokens or 0,
    )


#: The price source of a cost the log itself gives (a vendor's cost per round).
LOGGED = "log"


def price_event(event: Event, book: PriceBook, state: State | None = None) -> Priced | None:
    """Price a round that gives its model and usage but no cost: set ``event.cost`` (in place,
    before the fold reads its meters) and return the price; None leaves the event as it was
    (the cost meter is then missing, unless the log gave the cost). Who priced the session's
    rounds (the log, or a source and version) is noted in ``state.price_source``."""
    if event.action != ROUND:
        return None
    if event.cost is not None:
        if state is not None:
            note_source(state, LOGGED)
        return None
    tokens = tokens_of(event)
    if tokens is None:
        return None
    priced = book.cost(event.model, tokens, event.at)
    if priced is not None:
        event.cost = priced.amount
        if state is not None:
            note_source(state, priced.priced_by)
    return priced


def note_source(state: State, source: str) -> None:
    """Add ``source`` to the session's price sources (sorted, comma-separated: a session may
    mix the log's costs, the price data's and a prices file's)."""
    known = state.price_source
    if known is None:
        state.price_source = source
    elif known != source and source not in known.split(", "):
        state.price_source = ", ".join(sorted([*known.split(", "), source]))
