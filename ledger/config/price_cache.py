"""The price library's answers, remembered on disk from one process to the next.

Importing genai-prices' data costs a process about 0.2 s of CPU and 19 MB (a model object
for every price of every provider), more than an ingest of a few new lines costs in all.
What is asked of it is a model's rates on a UTC day (:func:`ledger.config.prices.
library_rates`), and its answer depends on nothing but its version, the model's name and
the day; the day only through the start dates of the model's prices. So the first time a
process asks for a model, the model's whole schedule (each of its prices, with the day it
starts) is written to ``genai-prices-VERSION-fFORMAT.json`` in the user's cache folder
(``$XDG_CACHE_HOME/agent-ledger``, else ``~/.cache/agent-ledger``), and later processes
answer every day from there without importing the library: the same rates, so the same
costs. A model whose price depends on the time of day is asked of the library every time.
A file that cannot be read or written costs time, never a wrong price; without a home
folder nothing is remembered.
"""

from __future__ import annotations

import json
import os
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from ledger.config import prices
from ledger.config.user_cache import cache_folder
from ledger.core.pricing import Rates, Tier

#: The first day of POSIX time, from which a schedule's start days are counted.
_EPOCH = date(1970, 1, 1).toordinal()


#: The layout of the file's schedules: raised when :func:`_schedule` or the JSON form of the
#: rates changes, so an older agent-ledger's file is never read as this one's.
FORMAT = 1


def cache_file(version: str) -> Path | None:
    """Where the schedules of price data ``version`` are kept (None: no cache folder)."""
    folder = cache_folder()
    name = f"genai-prices-{version}-f{FORMAT}.json"
    return None if folder is None else folder / name


class RememberedRates:
    """A price book's lookup answered from the schedules in ``path``, which it adds to."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._models: dict[str, dict[str, Any]] | None = None
        self._answers: dict[tuple[str, int | None], Rates | None] = {}

    def __call__(self, model: str, at: float | None) -> Rates | None:
        day = None if at is None else int(at // prices.DAY)
        key = (model, day)
        if key in self._answers:
            return self._answers[key]
        models = self._read() if self._models is None else self._models
        schedule = models.get(model)
        if schedule is None:
            schedule = models[model] = _schedule(model)
            self._write()
        if schedule.get("by_time_of_day"):
            return prices.library_rates(model, at)
        try:
            found = _answer(schedule, day)
        except (AttributeError, KeyError, TypeError, ValueError, IndexError, ArithmeticError):
            models[model] = _schedule(model)  # not a schedule this module wrote: asked again
            self._write()
            found = _answer(models[model], day)
        self._answers[key] = found
        return found

    def _read(self) -> dict[str, dict[str, Any]]:
        self._models = _load(self.path)
        return self._models

    def _write(self) -> None:
        """The file written anew with what it holds now and what this process learnt (other
        processes, ingest's workers among them, add to it meanwhile), then renamed over the
        old one."""
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({**_load(self.path), **(self._models or {})}), "utf-8")
            os.replace(tmp, self.path)
        except OSError:
            pass


def _load(path: Path | None) -> dict[str, dict[str, Any]]:
    """The schedules kept in ``path``; none if it cannot be read or is not such a file."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        return data
    return {}


def _answer(schedule: dict[str, Any], day: int | None) -> Rates | None:
    """The rates of a (not time-of-day) schedule on ``day`` (None: the latest)."""
    if schedule.get("unknown"):
        return None
    if day is None:
        return _from_json(schedule["latest"])
    # As the library picks a price: the last one started by then, else its first.
    dated = schedule["dated"]
    return _from_json(next((r for start, r in reversed(dated) if start is None or day >= start),
                           dated[0][1]))


def _schedule(model: str) -> dict[str, Any]:
    """The library's prices for ``model``: its latest, and each with its start day."""
    from genai_prices.types import ConditionalPrice

    info = prices._model_info(model)
    if info is None:
        return {"unknown": True}
    if prices._by_time_of_day(model):
        return {"by_time_of_day": True}
    listed = info.prices if isinstance(info.prices, list) else [
        ConditionalPrice(prices=info.prices)
    ]
    return {
        "latest": _to_json(prices._rates(prices._prices_at(info, None))),
        "dated": [
            [None if c.constraint is None else c.constraint.start_date.toordinal() - _EPOCH,
             _to_json(prices._rates(c.prices))]
            for c in listed
        ],
    }


def _to_json(rates: Rates | None) -> dict[str, Any] | None:
    return None if rates is None else rates.to_dict()


def _from_json(data: dict[str, Any] | None) -> Rates | None:
    if data is None:
        return None

    def rate(value: str | None) -> Decimal | None:
        return None if value is None else Decimal(value)

    tiers = tuple(Tier(t["above"], rate(t["input"]), rate(t["output"]),
                       rate(t["cache_creation"]), rate(t["cache_read"]))
                  for t in data["tiers"])
    return Rates(Decimal(data["input"]), Decimal(data["output"]), rate(data["cache_creation"]),
                 rate(data["cache_read"]), tiers)
