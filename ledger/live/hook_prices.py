"""The price library's rates, remembered beside the hook's state between calls.

Pricing a round asks genai-prices for the model's rates, and importing its data costs a
process about 0.2 s, more than the rest of a hook call. The library prices a model by UTC
day (:func:`ledger.config.prices.library_rates`), so its answer for a model and a day is
kept in ``ledger.db.hook/prices.json`` (with the library's version: another version starts
afresh) and a later call reads it there: the same rates, so the same costs. A model whose
price depends on the time of day is asked every time.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

from ledger.core.pricing import PriceBook, Rates, Tier

FILE = "prices.json"


class RememberedPrices:
    """A price book whose library look-ups are answered from, and added to, ``path``."""

    def __init__(self, book: PriceBook, path: Path) -> None:
        self.path = path
        self.library = book.lookup
        self.version = book.version
        self.models: dict[str, dict[str, Any]] = _read(path, book.version)
        self.changed = False
        self.book = replace(book, lookup=self.lookup)

    def lookup(self, model: str, at: float | None) -> Rates | None:
        from ledger.config import prices

        known = self.models.get(model)
        if known is None:
            timed = prices._model_info(model) is not None and prices._by_time_of_day(model)
            known = self.models[model] = {"by_time_of_day": timed, "days": {}}
            self.changed = True
        if known["by_time_of_day"]:
            return self.library(model, at)
        day = "latest" if at is None else str(int(at // prices.DAY))
        if day not in known["days"]:
            found = self.library(model, at)
            known["days"][day] = None if found is None else _to_json(found)
            self.changed = True
        saved = known["days"][day]
        return None if saved is None else _from_json(saved)

    def save(self) -> None:
        """Written only if a call learned something, whole, then renamed over the old."""
        if not self.changed:
            return
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": self.version, "models": self.models}), "utf-8")
        os.replace(tmp, self.path)


def _read(path: Path, version: str) -> dict[str, dict[str, Any]]:
    """What an earlier call kept, if it was the same library; nothing if it cannot be read
    (the library is asked again: a lost cache costs time, never a wrong price)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != version:
        return {}
    models = data.get("models")
    return models if isinstance(models, dict) else {}


def _to_json(rates: Rates) -> dict[str, Any]:
    return _strings(asdict(rates))


def _strings(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: _strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strings(v) for v in value]
    return value


def _from_json(data: dict[str, Any]) -> Rates:
    def rate(value: str | None) -> Decimal | None:
        return None if value is None else Decimal(value)

    tiers = tuple(
        Tier(t["above"], *(rate(t[k]) for k in ("input", "output", "cache_creation",
                                                 "cache_read")))
        for t in data["tiers"]
    )
    return Rates(
        Decimal(data["input"]), Decimal(data["output"]), rate(data["cache_creation"]),
        rate(data["cache_read"]), tiers,
    )
