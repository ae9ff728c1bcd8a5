"""A session's counters against its caps: which counters hold it, and what each shows."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from ledger.core.budget import Budget
from ledger_dashboard.timeline import SHORT, gauges, meter, repeats, run_length, step_meters

ALL_METERS = (
    "round_counter,tool_calls,output_tokens,tool_errors,observations,elapsed_time,"
    "write_classification"
)


def session(dialect: str, meters: str = ALL_METERS, **caps: Any) -> dict[str, Any]:
    budget = Budget.from_mapping(caps) if caps else Budget()
    return {"dialect": dialect, "meters": meters, "budget": budget.to_json()}


@pytest.mark.parametrize(
    ("dialect", "names"),
    [
        ("trace", ["rounds", "tool_calls", "output_tokens", "tool_errors", "no_progress",
                   "cost"]),
        ("gate", ["steps", "writes", "seconds"]),
        ("native", ["rounds", "tool_calls", "output_tokens", "tool_errors", "no_progress",
                    "cost", "steps", "writes", "seconds"]),
    ],
)
def test_each_dialect_is_held_to_its_own_seeds_caps(dialect: str, names: list[str]) -> None:
    assert [g.name for g in gauges(session(dialect))] == names


def test_the_spend_so_far_is_drawn_against_max_cost() -> None:
    held = {g.name: g for g in gauges(session("native", meters="cost", max_cost=2.0))}
    assert held["cost"].measured and held["cost"].cap == 2.0
    shown = step_meters({"total_cost_usd": 0.5}, 0, [held["cost"]])[0]
    assert (shown.percent, shown.text) == (25.0, "$0.50 / $2.00")
    unpriced = {g.name: g for g in gauges(session("native", max_cost=2.0))}["cost"]
    assert meter(unpriced, None).text == "not measured"  # no cost: the cap cannot be honoured


def test_a_counter_without_its_meter_is_not_measured() -> None:
    held = {g.name: g for g in gauges(session("native", meters="write_classification"))}
    assert held["steps"].measured and held["writes"].measured
    assert not held["rounds"].measured and not held["seconds"].measured
    shown = meter(held["rounds"], 5)
    assert (shown.text, shown.percent, shown.value) == ("not measured", None, None)


@pytest.mark.parametrize(
    ("name", "value", "text", "percent"),
    [
        ("rounds", 7, "7 / 12", 7 / 12 * 100),
        ("writes", 3, "3 / 2", 150.0),
        ("output_tokens", 9800, "9.8k / 32k", 9800 / 32000 * 100),
        ("seconds", 40.0, "40s / 45s", 40 / 45 * 100),
        ("no_progress", 2, "2 / 2", 100.0),
    ],
)
def test_meters_draw_value_against_cap(
    name: str, value: float, text: str, percent: float
) -> None:
    held = {g.name: g for g in gauges(session("native"))}
    shown = meter(held[name], value)
    assert shown.text == text
    assert shown.percent == pytest.approx(percent)


def test_a_cap_switched_off_shows_the_value_alone() -> None:
    held = {g.name: g for g in gauges(session("trace", max_rounds="off"))}
    shown = meter(held["rounds"], 30)
    assert (shown.text, shown.percent, shown.cap) == ("30", None, None)


def test_a_zero_cap_is_full() -> None:
    held = {g.name: g for g in gauges(session("gate", max_writes=0))}
    assert meter(held["writes"], 0).percent == 100.0


@pytest.mark.parametrize(
    ("hashes", "before", "expected"),
    [
        (["a", "a", "b", "b", "b"], [], [1, 2, 1, 2, 3]),
        (["a", None, "a"], [], [1, 1, 2]),  # a step without an observation changes nothing
        (["a", "a"], ["a", "a", "c"], [3, 4]),  # the run started on the page before
        (["b"], ["a", "a"], [1]),
        ([None, None], [], [0, 0]),
    ],
)
def test_repeats_count_like_the_machine(
    hashes: list[str | None], before: list[str], expected: list[int]
) -> None:
    steps = [{"observation_hash": h} for h in hashes]
    assert repeats(steps, before) == expected


@pytest.mark.parametrize(
    ("latest_first", "n"), [([], 0), (["a"], 1), (["a", "a", "b", "a"], 2)]
)
def test_run_length(latest_first: list[str], n: int) -> None:
    assert run_length(latest_first) == n


def test_step_meters_read_the_steps_columns() -> None:
    step = {"total_steps": 7, "total_writes": 2, "elapsed_s": 40.0}
    found = step_meters(step, 0, gauges(session("gate")))
    assert [m.text for m in found] == ["7 / 8", "2 / 2", "40s / 45s"]
    assert json.dumps([m.to_dict() for m in found])  # plain data for the JSON twin


@pytest.mark.parametrize("dialect", ["native", "trace", "gate"])
def test_a_meters_dict_is_every_field_and_its_short_label(dialect: str) -> None:
    """Meter.to_dict is written out by hand (asdict deep-copies, and a page makes thousands):
    it must still hold every field, so a field added later cannot be left out of the page."""
    step = {"total_rounds": 3, "total_tool_calls": 9, "total_steps": 7, "elapsed_s": 40.0}
    for m in step_meters(step, 2, gauges(session(dialect))):
        assert m.to_dict() == {**dataclasses.asdict(m), "short": SHORT.get(m.name, m.label)}
