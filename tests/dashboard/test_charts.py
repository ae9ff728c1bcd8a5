"""Chart specs: plain data Chart.js draws as given, with links only to our own pages."""

from __future__ import annotations

import json

from ledger.core.budget import Budget
from ledger_dashboard import charts
from ledger_dashboard.cells import REASON_COLOURS
from ledger_dashboard.timeline import gauges, step_meters

BY_CLASS = [
    {"task_class": "docs", "stop_reason": "max_steps", "sessions": 2},
    {"task_class": "bugfix", "stop_reason": "task_complete", "sessions": 3},
    {"task_class": "docs", "stop_reason": "task_complete", "sessions": 1},
]


def test_stop_reasons_by_class_stacks_one_segment_per_reason() -> None:
    spec = charts.stop_reasons_by_class(BY_CLASS, lambda c, r: f"/db/sessions?{c}&{r}")
    assert spec["data"]["labels"] == ["bugfix", "docs"]
    datasets = {d["label"]: d for d in spec["data"]["datasets"]}
    assert list(datasets) == ["task_complete", "max_steps"]  # the enum's order
    assert datasets["task_complete"]["data"] == [3, 1]
    assert datasets["max_steps"]["data"] == [0, 2]
    assert datasets["max_steps"]["backgroundColor"] == REASON_COLOURS["max_steps"][0]
    assert spec["links"][1] == ["/db/sessions?bugfix&max_steps", "/db/sessions?docs&max_steps"]
    assert spec["options"]["indexAxis"] == "y"
    json.dumps(spec)


def test_many_days_become_months() -> None:
    rows = [{"day": f"2026-{m:02d}-{d:02d}", "stop_reason": "max_rounds", "sessions": 1}
            for m in range(1, 7) for d in range(1, 29)]
    unit, periods = charts.by_period(rows)
    assert unit == "month"
    assert [(p["period"], p["sessions"]) for p in periods][:2] == [("2026-01", 28), ("2026-02", 28)]
    assert charts.by_period(rows[:20])[0] == "day"


def test_sessions_without_a_day_are_not_drawn() -> None:
    spec = charts.sessions_over_time([
        {"day": "", "stop_reason": "max_steps", "sessions": 5},
        {"day": "2026-11-29", "stop_reason": "max_rounds", "sessions": 2},
    ])
    assert spec["data"]["labels"] == ["2026-11-29"]
    assert [d["label"] for d in spec["data"]["datasets"]] == ["max_rounds"]


def test_budget_chart_has_a_bar_per_counter_and_a_segment_per_bucket() -> None:
    spec = charts.budget_at_stop([
        {"counter": "writes", "bucket": 3, "sessions": 2},
        {"counter": "rounds", "bucket": 0, "sessions": 1},
    ])
    assert spec["data"]["labels"] == ["rounds", "writes"]
    assert [d["data"] for d in spec["data"]["datasets"]] == [[1, 0], [0, 0], [0, 0], [0, 2]]


def test_budget_by_step_marks_the_stop_and_skips_unmeasured_counters() -> None:
    budget = Budget().to_json()
    held = gauges({"dialect": "gate", "meters": "write_classification", "budget": budget})
    steps = [{"total_steps": n, "total_writes": 0, "elapsed_s": None} for n in (1, 2, 3)]
    spec = charts.budget_by_step([1, 2, 3], [step_meters(s, 0, held) for s in steps], 2)
    assert spec["stopIndex"] == 1
    assert [d["label"] for d in spec["data"]["datasets"]] == ["steps", "writes"]
    assert spec["data"]["datasets"][0]["data"] == [12.5, 25.0, 37.5]
