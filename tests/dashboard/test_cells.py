"""Cells that explain themselves: badges, humanised numbers, short hashes, links; all escaped."""

from __future__ import annotations

from typing import Any

import pytest
from markupsafe import Markup

from ledger.core.reasons import DECISIONS, StopReason
from ledger_dashboard import cells
from tests.dashboard_data import PAYLOADS


def session_url(session_id: str, at: int | None) -> str:
    return f"/db/-/sessions/{session_id}" + (f"?at={at}" if at else "")


def test_every_stop_reason_has_a_colour() -> None:
    assert set(cells.REASON_COLOURS) == {r.value for r in StopReason}


@pytest.mark.parametrize("reason", list(StopReason))
def test_badges_carry_the_decision_table(reason: StopReason) -> None:
    html = cells.badge(reason.value)
    decision = DECISIONS[reason]
    assert f">{reason.value}</span>" in html
    assert cells.REASON_COLOURS[reason.value][0] in html
    assert Markup.escape(decision.safe_action) in html
    assert Markup.escape(decision.fail_closed_if_missing) in html


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, ""), (0, "0"), (950, "950"), (1000, "1k"), (12_340, "12.3k"), (37_000, "37k"),
     (1_500_000, "1.5M"), (2_000_000_000, "2G"), (12.5, "12.5")],
)
def test_tokens(value: float | None, text: str) -> None:
    assert cells.tokens(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, ""), (0, "0s"), (0.25, "0.25s"), (1.5, "1.5s"), (9.999, "10s"), (40, "40s"),
     (59.4, "59s"), (65, "1m 05s"), (3599, "59m 59s"), (3725, "1h 02m")],
)
def test_duration(seconds: float | None, text: str) -> None:
    assert cells.duration(seconds) == text


@pytest.mark.parametrize(
    ("column", "table", "value", "row", "expected"),
    [
        ("stop_reason", "sessions", "max_rounds", None, 'class="ledger-badge"'),
        ("recorded_stop", None, "unknown_vendor", None, 'class="ledger-badge"'),
        ("reason", "stop_reasons", "no_progress", None, 'class="ledger-badge"'),
        ("session_id", "steps", "bf-1", None, 'href="/db/-/sessions/bf-1">bf-1</a>'),
        ("stop_at", "sessions", 12, {"session_id": "s"}, 'href="/db/-/sessions/s?at=12">step 12'),
        ("output_tokens", "sessions", 12_040, None, 'title="12,040">12k</span>'),
        ("tokens_spent", None, 950, None, 'title="950">950</span>'),
        ("elapsed_s", "steps", 65.0, None, 'title="65">1m 05s</span>'),
        ("observation_hash", "steps", "7d99c1bec9b33899", None,
         '<code class="ledger-hash" title="7d99c1bec9b33899">7d99c1be</code>'),
        ("key", "incidents", "7d99c1bec9b33899", {"kind": "no_progress"}, "ledger-hash"),
    ],
)
def test_render(
    column: str, table: str | None, value: Any, row: dict[str, Any] | None, expected: str
) -> None:
    html = cells.render(row, value, column, table, session_url)
    assert html is not None and expected in html


@pytest.mark.parametrize(
    ("column", "table", "value", "row"),
    [
        ("stop_reason", "sessions", "finished", None),  # not a stop reason: the default
        ("reason", "ingest_errors", "max_rounds", None),  # only stop_reasons.reason
        ("key", "incidents", "tool:read", {"kind": "retry_storm"}),
        ("key", "incidents", "x", {}),  # the column was not selected
        ("stop_at", "steps", 3, {"session_id": "s"}),
        ("output_tokens", "sessions", "many", None),
        ("elapsed_s", "steps", True, None),
        ("session_id", "steps", None, None),
        ("detail", "steps", "<b>", None),
    ],
)
def test_render_leaves_other_cells_to_datasette(
    column: str, table: str | None, value: Any, row: dict[str, Any] | None
) -> None:
    assert cells.render(row, value, column, table, session_url) is None


@pytest.mark.parametrize("payload", PAYLOADS)
def test_ledger_text_is_escaped_in_every_cell(payload: str) -> None:
    for html in (
        cells.badge(payload),
        cells.short_hash(payload),
        cells.session_link("/x", payload),
        cells.render(None, payload, "session_id", "steps", session_url),
        cells.render({"kind": "no_progress"}, payload, "key", "incidents", session_url),
    ):
        assert html is not None
        assert "<script" not in html and "<img" not in html and "<svg" not in html
        assert 'href="javascript' not in html
