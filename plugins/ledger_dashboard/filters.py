"""The dashboard's filters: task class, stop reason, date range, source file and host, from the
URL.

Every filter picks sessions, and every page shows what belongs to the sessions picked, so one
query string means the same on every page and each view is a shareable link. Filters become
SQL through fixed fragments with named parameters: a value never becomes SQL text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from datetime import date
from typing import Any
from urllib.parse import urlencode

from ledger.core.reasons import StopReason

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
#: After a day, sorts after every timestamp of that day ("2026-11-30T23:59:59Z" and the like)
#: and before the next day: so ``until`` 9999-12-31 needs no day after it.
_DAY_END = "\U0010ffff"
#: SQLite's integers are 64-bit: a larger number in a URL is an error, not an overflow.
MAX_INTEGER = 2**63 - 1
REASONS = tuple(r.value for r in StopReason)


class FilterError(ValueError):
    """A filter value that cannot be used, with a message for the person who typed it."""


@dataclass(frozen=True)
class Filters:
    task_class: str | None = None
    stop_reason: str | None = None
    since: str | None = None  # first day (YYYY-MM-DD, the UTC date of started_at), inclusive
    until: str | None = None  # last day, inclusive
    source: str | None = None  # a source id or a ledger file's path
    host: str | None = None  # the machine the sources were ingested on (sources.host)

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> Filters:
        """Read the filters from query-string arguments; empty values mean no filter."""
        values = {name: (args.get(name) or "").strip() or None for name in cls.names()}
        filters = cls(**values)
        if filters.stop_reason is not None and filters.stop_reason not in REASONS:
            raise FilterError(
                f"stop_reason: unknown stop reason {filters.stop_reason!r}; "
                f"choose one of {', '.join(REASONS)}"
            )
        for name in ("since", "until"):
            _check_day(name, getattr(filters, name))
        if filters.since and filters.until and filters.since > filters.until:
            raise FilterError(f"since ({filters.since}) is after until ({filters.until})")
        return filters

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return ("task_class", "stop_reason", "since", "until", "source", "host")

    def active(self) -> dict[str, str]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def params(self) -> dict[str, str]:
        """SQL parameters for :meth:`rollup_where` and :meth:`session_where`."""
        params = self.active()
        if self.until:
            params["until_end"] = self.until + _DAY_END
        return params

    def rollup_where(self) -> str:
        """Conditions (each starting with `` and``) on the rollup table's key columns."""
        return self._where(1)

    def session_where(self) -> str:
        """The same conditions on ``sessions`` columns (the table aliased ``s``)."""
        return self._where(2)

    def _where(self, form: int) -> str:
        return "".join(f" and {c[form]}" for c in _CONDITIONS if getattr(self, c[0]) is not None)

    def incident_where(self) -> str:
        """The same conditions on ``incidents`` (aliased ``i``): the incident's session is one
        the filters pick. A subquery, not a join, so SQLite narrows the sessions first."""
        where = self.session_where()
        if not where:
            return ""
        return f" and i.session_id in (select s.session_id from sessions s where 1{where})"

    def query(self, **changes: Any) -> str:
        """The query string of these filters with ``changes`` (None drops a key), or ''."""
        own = {k: v for k, v in changes.items() if k in self.names()}
        extra = {k: v for k, v in changes.items() if k not in self.names()}
        args = {**replace(self, **own).active(), **extra}
        args = {k: v for k, v in args.items() if v is not None}
        return "?" + urlencode(args) if args else ""


_SOURCES = "select source_id from sources where source_id = :source or path = :source"
_HOSTS = "select source_id from sources where host = :host"
#: Each filter as a condition on the rollup table and on ``sessions s``.
_CONDITIONS = (
    ("task_class", "task_class = :task_class", "s.task_class = :task_class"),
    ("stop_reason", "stop_reason = :stop_reason", "s.stop_reason = :stop_reason"),
    ("since", "day >= :since", "s.started_at >= :since"),
    ("until", "day != '' and day <= :until", "s.started_at < :until_end"),
    ("source", f"source_id in ({_SOURCES})", f"s.source_id in ({_SOURCES})"),
    ("host", f"source_id in ({_HOSTS})", f"s.source_id in ({_HOSTS})"),
)


def whole_number(name: str, text: str, minimum: int) -> int:
    """``text`` as an integer from ``minimum`` to SQLite's largest, in ASCII digits only
    (``int`` would also take ``1_000``, `` 7`` and other scripts' digits)."""
    if not (text.isascii() and text.isdigit()) or not minimum <= int(text) <= MAX_INTEGER:
        raise FilterError(
            f"{name}: {text[:40]!r} must be a whole number from {minimum} to {MAX_INTEGER}"
        )
    return int(text)


def _check_day(name: str, value: str | None) -> None:
    if value is None:
        return
    try:
        if not _DAY.fullmatch(value):
            raise ValueError
        date.fromisoformat(value)
    except ValueError:
        raise FilterError(f"{name}: {value!r} is not a date; use YYYY-MM-DD") from None
