"""Cells that explain themselves: stop-reason badges, humanised numbers, short hashes, links.

Pure functions from values to ``Markup``. Every piece of ledger text goes through
``Markup.format`` (which escapes it); URLs are built by the caller from our own paths, never
taken from the ledger, so a ``javascript:`` string can only ever be shown, not followed.

Direction controls (U+202E and its kin) are written out as ``<U+202E>`` in everything any page
prints (``visible_output``, Jinja's finalize), never applied: an override in a tool name would
otherwise show the rest of its line reversed, and an isolate hide what follows it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from markupsafe import Markup

from ledger.core.money import usd
from ledger.core.reasons import DECISIONS, StopReason

#: (background, text) colour of each stop reason, shared by badges and charts.
REASON_COLOURS: dict[str, tuple[str, str]] = {
    "task_complete": ("#2e7d32", "#ffffff"),
    "max_rounds": ("#ef6c00", "#ffffff"),
    "max_tool_calls": ("#f9a825", "#1f1f1f"),
    "max_output_tokens": ("#bf360c", "#ffffff"),
    "user_cancel": ("#757575", "#ffffff"),
    "tool_error_budget": ("#c62828", "#ffffff"),
    "no_progress": ("#6a1b9a", "#ffffff"),
    "unknown_vendor": ("#ad1457", "#ffffff"),
    "max_steps": ("#1565c0", "#ffffff"),
    "max_writes": ("#00838f", "#ffffff"),
    "max_seconds": ("#283593", "#ffffff"),
    "retry_near_ceiling": ("#5d4037", "#ffffff"),
    "max_cost": ("#37474f", "#ffffff"),
}

#: Columns drawn as stop-reason badges (``reason`` only in the stop_reasons table).
REASON_COLUMNS = frozenset({"stop_reason", "recorded_stop"})
TOKEN_COLUMNS = frozenset({"output_tokens", "total_output_tokens", "tokens_spent"})
DURATION_COLUMNS = frozenset({"elapsed_s"})
HASH_COLUMNS = frozenset({"observation_hash"})
SESSION_COLUMNS = frozenset({"session_id"})

SessionUrl = Callable[[str, int | None], str]

#: Unicode's explicit direction controls: embeddings, overrides, isolates and marks.
DIRECTION_CONTROLS = (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
_SHOWN = {c: f"<U+{c:04X}>" for c in DIRECTION_CONTROLS}
_SHOWN_HTML = {c: f"&lt;U+{c:04X}&gt;" for c in DIRECTION_CONTROLS}


def visible(text: str) -> str:
    """``text`` with each direction control written out (``<U+202E>``), so it is seen."""
    return text.translate(_SHOWN)


def visible_output(value: Any) -> Any:
    """Jinja's ``finalize``, for every value any template prints: text made ``visible``, and
    the same in HTML our code or Datasette built (a control is never part of HTML syntax, so
    it can only stand in text or an attribute, where its written-out form is just as safe)."""
    if isinstance(value, Markup):
        return Markup(str.translate(value, _SHOWN_HTML))
    if isinstance(value, str):
        return visible(value)
    return value


def visible_data(value: Any) -> Any:
    """Every string in nested lists and dicts made ``visible``: chart labels are drawn on a
    canvas, which would apply the controls."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, list):
        return [visible_data(v) for v in value]
    if isinstance(value, dict):
        return {k: visible_data(v) for k, v in value.items()}
    return value


def reason_title(reason: str) -> str:
    """The decision table's text for a stop reason, for a tooltip."""
    decision = DECISIONS.get(StopReason(reason))
    if decision is None:  # pragma: no cover - every reason has a decision
        return reason
    return (
        f"{decision.description} Safe action: {decision.safe_action}. "
        f"Must observe: {decision.must_observe}. "
        f"Fail closed if missing: {decision.fail_closed_if_missing}."
    )


def is_reason(value: Any) -> bool:
    return isinstance(value, str) and value in REASON_COLOURS


def badge(reason: str) -> Markup:
    """A coloured stop-reason badge whose tooltip is the decision table's row."""
    if not is_reason(reason):
        return Markup('<span class="ledger-badge ledger-badge-other">{}</span>').format(reason)
    background, text = REASON_COLOURS[reason]
    return Markup(
        '<span class="ledger-badge" style="--ledger-bg: {}; --ledger-fg: {}" title="{}">{}</span>'
    ).format(background, text, reason_title(reason), reason)


def tokens(value: int | float | None) -> str:
    """12_345 -> '12.3k', 1_500_000 -> '1.5M'; small numbers as they are."""
    if value is None:
        return ""
    n = float(value)
    for size, suffix in ((1_000_000_000, "G"), (1_000_000, "M"), (1_000, "k")):
        if abs(n) >= size:
            scaled = f"{n / size:.1f}".removesuffix(".0")
            return f"{scaled}{suffix}"
    return f"{int(n)}" if n.is_integer() else f"{n:.1f}"


def duration(seconds: int | float | None) -> str:
    """0.25 -> '0.25s', 40 -> '40s', 65 -> '1m 05s', 3725 -> '1h 02m'."""
    if seconds is None:
        return ""
    s = float(seconds)
    if s < 10:
        return f"{s:.2f}".rstrip("0").rstrip(".") + "s"
    if s < 60:
        return f"{s:.0f}s"
    minutes, secs = divmod(int(round(s)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def exact(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}".rstrip("0").rstrip(".")


def money(value: int | float | None) -> Markup:
    """US dollars rounded for reading (``$1,234.57``, ``$0.0123``), the exact amount in the
    title; nothing where there is no cost."""
    if value is None:
        return Markup("")
    return Markup('<span class="ledger-money" title="{} USD">{}</span>').format(
        repr(float(value)), usd(value))


def share(value: float | None) -> str:
    """A fraction as a percentage for reading: 0.1234 -> '12.3%'."""
    return "" if value is None else f"{100 * value:.1f}%"


def humanised(text: str, value: int | float) -> Markup:
    return Markup('<span class="ledger-num" title="{}">{}</span>').format(exact(value), text)


def short_hash(value: str, length: int = 8) -> Markup:
    return Markup('<code class="ledger-hash" title="{}">{}</code>').format(value, value[:length])


def session_link(url: str, session_id: str) -> Markup:
    return Markup('<a class="ledger-session" href="{}">{}</a>').format(url, session_id)


def render(
    row: Mapping[str, Any] | None,
    value: Any,
    column: str,
    table: str | None,
    session_url: SessionUrl,
) -> Markup | None:
    """The display of one Datasette cell of a ledger database, or None for the default."""
    if value is None or value == "":
        return None
    if column in REASON_COLUMNS or (table == "stop_reasons" and column == "reason"):
        return badge(value) if is_reason(value) else None
    if column in SESSION_COLUMNS and isinstance(value, str):
        return session_link(session_url(value, None), value)
    if table == "sessions" and column == "stop_at" and isinstance(value, int) and row:
        session_id = _get(row, "session_id")
        if isinstance(session_id, str):
            url = session_url(session_id, value)
            return Markup('<a href="{}">step {}</a>').format(url, value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if column in TOKEN_COLUMNS and isinstance(value, (int, float)):
        return humanised(tokens(value), value)
    if column in DURATION_COLUMNS and isinstance(value, (int, float)):
        return humanised(duration(value), value)
    if isinstance(value, str) and (
        column in HASH_COLUMNS
        or (table == "incidents" and column == "key" and _get(row, "kind") == "no_progress")
    ):
        return short_hash(value)
    return None


def _get(row: Mapping[str, Any] | None, key: str) -> Any:
    """A value of a Datasette row (a ``sqlite3.Row`` or a dict) that may not hold ``key``."""
    if row is None:
        return None
    try:
        return row[key]
    except (KeyError, IndexError):
        return None
