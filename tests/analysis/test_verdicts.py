"""Migration verdicts as a specification: session rows in, parity, coverage and verdicts out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.analysis.verdict_report import report_json, report_text
from ledger.analysis.verdicts import (
    LISTED,
    MATCH,
    MISMATCH,
    NO_RECORDED_STOP,
    READY,
    STAY,
    Settings,
    SettingsError,
    compute,
    coverage,
    facts_of,
    group,
    parity,
    rules_in_force,
)
from ledger.core.budget import Budget
from ledger.core.events import METERS

TRACE_METERS = "round_counter,tool_calls,output_tokens,tool_errors,observations"
ALL_METERS = ",".join(METERS)


def session(**fields: Any) -> dict[str, Any]:
    """A sessions row as verdict_store reads it: a trace that completed on its own signal."""
    row: dict[str, Any] = {
        "session_id": "s1", "task_class": "refactor", "dialect": "trace",
        "stop_reason": "task_complete", "stop_at": None, "stop_detail": None,
        "recorded_stop": "task_complete", "vendor_stop": "completed",
        "rounds": 3, "steps": 3, "tool_calls": 6, "meters": TRACE_METERS,
        "budget": Budget().to_json(),
        "stop_rounds": None, "stop_steps": None, "stop_tool_calls": None,
    }
    row.update(fields)
    return row


def groups_of(*sessions: dict[str, Any]) -> list[Any]:
    """One class's sessions as the groups its verdict is computed from."""
    facts = [facts_of(s, parity(s)) for s in sessions]
    return group(sorted(facts, key=lambda f: f[-2]))


def stopped(reason: str, at: int, tools: int, detail: str = "", **fields: Any) -> dict[str, Any]:
    """A session the replay stopped after ``at`` rounds (and steps) with ``tools`` tool calls."""
    counters = {"stop_rounds": at, "stop_steps": at, "stop_tool_calls": tools}
    return session(**{
        "stop_reason": reason, "stop_at": at, "stop_detail": detail or None, **counters, **fields,
    })


# --- parity ------------------------------------------------------------------------------

PARITY_CASES = {
    # name: (session row, tolerance, expected parity, words the detail must contain)
    "complete on both": (session(), 1, MATCH, ["stop reason task_complete on both"]),
    "no recorded stop, ran out": (
        session(recorded_stop=None, vendor_stop=None), 1, NO_RECORDED_STOP,
        ["no stop of its own", "runs to the end (3 rounds)"],
    ),
    "no recorded stop, budget stopped": (
        stopped("max_tool_calls", 4, 28, "tool calls 28 >= 24", recorded_stop=None, rounds=4),
        1, NO_RECORDED_STOP, ["stops with max_tool_calls (tool calls 28 >= 24) after 4 rounds"],
    ),
    "same stop, same round": (
        stopped("max_output_tokens", 5, 10, recorded_stop="max_output_tokens", rounds=5,
                tool_calls=10),
        1, MATCH, ["stop reason max_output_tokens on both", "rounds: 5 in the log, 5 at"],
    ),
    "one round early, within tolerance": (
        stopped("max_rounds", 13, 13, recorded_stop="max_rounds", rounds=14, tool_calls=14),
        1, MATCH, ["rounds: 14 in the log, 13 at the replay's stop", "tool calls: 14 in the log"],
    ),
    "two rounds early": (
        stopped("max_rounds", 12, 12, recorded_stop="max_rounds", rounds=14, tool_calls=14),
        1, MISMATCH,
        ["the log ends after 14, the replay stops after 12 (2 apart; tolerance 1)",
         "tool calls: 14 in the log, 12 at the replay's stop"],
    ),
    "two rounds early, tolerance 2": (
        stopped("max_rounds", 12, 12, recorded_stop="max_rounds", rounds=14, tool_calls=14),
        2, MATCH, ["stop reason max_rounds on both"],
    ),
    "one round early, tolerance 0": (
        stopped("max_rounds", 13, 13, recorded_stop="max_rounds", rounds=14, tool_calls=14),
        0, MISMATCH, ["(1 apart; tolerance 0)"],
    ),
    "the log stopped, the replay runs on": (
        session(recorded_stop="max_rounds", vendor_stop="max_iterations", rounds=14), 1, MISMATCH,
        ["the log stopped with max_rounds, but the replay runs past it", "brake this budget lacks"],
    ),
    "the log completed, the replay cuts it": (
        stopped("max_tool_calls", 3, 6, "tool calls 6 >= 5"), 1, MISMATCH,
        ["the log completed (task_complete), but the replay stops with max_tool_calls "
         "(tool calls 6 >= 5)", "would cut a session the paid runtime finished"],
    ),
    "different caps at the same round": (
        stopped("tool_error_budget", 3, 6, recorded_stop="no_progress"), 1, MISMATCH,
        ["the log stopped with no_progress, the replay with tool_error_budget"],
    ),
    "an unmapped vendor string agrees with nothing": (
        stopped("unknown_vendor", 3, 6, recorded_stop="unknown_vendor",
                vendor_stop="policy_hidden_v3"),
        1, MISMATCH, ["unmapped vendor string 'policy_hidden_v3'", "--vendor-map"],
    ),
    "a cancel the replay runs to": (
        session(recorded_stop="user_cancel", vendor_stop="cancelled"), 1, MATCH,
        ["the log was cancelled (user_cancel); the replay runs to the cancel"],
    ),
    "a cancel the budget pre-empts": (
        stopped("max_rounds", 3, 6, "rounds 3 >= 3", recorded_stop="user_cancel"), 1, MISMATCH,
        ["the replay stops before the cancel with max_rounds (rounds 3 >= 3)"],
    ),
    "a log without rounds is measured in steps": (
        stopped("max_writes", 4, 0, recorded_stop="max_writes", dialect="gate", rounds=0, steps=6,
                meters="elapsed_time,write_classification", stop_rounds=0),
        1, MISMATCH, ["steps: the log ends after 6, the replay stops after 4 (2 apart"],
    ),
}


@pytest.mark.parametrize("name", PARITY_CASES)
def test_parity(name: str) -> None:
    row, tolerance, expected, words = PARITY_CASES[name]
    checked = parity(row, tolerance)
    assert checked["parity"] == expected
    for word in words:
        assert word in checked["parity_detail"]


def test_parity_row_spells_out_the_counts() -> None:
    row = stopped("max_rounds", 12, 12, recorded_stop="max_rounds", vendor_stop="max_iterations",
                  rounds=14, tool_calls=14)
    checked = parity(row)
    assert {k: checked[k] for k in (
        "unit", "recorded_count", "replay_count", "count_diff",
        "recorded_tool_calls", "replay_tool_calls", "tool_call_diff", "tolerance",
        "recorded_stop", "vendor_stop", "replay_stop",
    )} == {
        "unit": "rounds", "recorded_count": 14, "replay_count": 12, "count_diff": 2,
        "recorded_tool_calls": 14, "replay_tool_calls": 12, "tool_call_diff": 2, "tolerance": 1,
        "recorded_stop": "max_rounds", "vendor_stop": "max_iterations", "replay_stop": "max_rounds",
    }


def test_a_match_reports_no_difference_and_a_mismatch_only_differences() -> None:
    same = parity(stopped("max_rounds", 12, 12, recorded_stop="max_rounds", rounds=12,
                          tool_calls=12))["parity_detail"]
    assert "apart" not in same
    differs = parity(stopped("max_rounds", 12, 12, recorded_stop="max_rounds", rounds=14,
                             tool_calls=14))["parity_detail"]
    assert "on both" not in differs  # the agreeing reason is not repeated among differences


@given(
    log=st.integers(0, 30), early=st.integers(0, 30), tolerance=st.integers(0, 5),
    more=st.integers(0, 5),
)
def test_a_larger_tolerance_never_turns_a_match_into_a_mismatch(
    log: int, early: int, tolerance: int, more: int
) -> None:
    at = max(log - early, 0)
    row = stopped("max_rounds", at, at, recorded_stop="max_rounds", rounds=log, tool_calls=log)
    strict, loose = parity(row, tolerance)["parity"], parity(row, tolerance + more)["parity"]
    assert strict != MATCH or loose == MATCH
    assert (strict == MATCH) == (log - at <= tolerance)


# --- meter coverage ----------------------------------------------------------------------


def in_force(**fields: Any) -> list[str]:
    return [r.reason.value for r in rules_in_force(session(**fields))]


def test_each_dialect_is_held_to_its_own_seeds_rules() -> None:
    assert in_force(dialect="trace") == [
        "max_rounds", "max_tool_calls", "max_output_tokens", "tool_error_budget", "no_progress"]
    assert in_force(dialect="gate") == [
        "max_steps", "max_writes", "max_seconds", "retry_near_ceiling"]
    assert len(in_force(dialect="native")) == 9


def test_a_cap_switched_off_is_not_in_force() -> None:
    budget = Budget(max_output_tokens=None, max_steps=None).to_json()
    rules = in_force(dialect="native", budget=budget)
    assert "max_output_tokens" not in rules
    assert "max_steps" not in rules and "retry_near_ceiling" not in rules  # both hang on max_steps


COVERAGE_CASES = {
    # name: (session fields, the rules whose meter is missing)
    "a full trace": ({}, []),
    "a trace without token counts": (
        {"meters": "round_counter,tool_calls,tool_errors,observations"}, ["max_output_tokens"]),
    "a trace without token counts, token cap off": (
        {"meters": "round_counter,tool_calls,tool_errors,observations",
         "budget": Budget(max_output_tokens=None).to_json()}, []),
    "a gate ledger": ({"dialect": "gate", "meters": "elapsed_time,write_classification"}, []),
    "a gate ledger without a clock": (
        {"dialect": "gate", "meters": "write_classification"}, ["max_seconds"]),
    "native rounds with no classified actions": (
        {"dialect": "native", "meters": "round_counter,tool_calls,output_tokens,tool_errors,"
         "observations,elapsed_time"}, ["max_writes", "retry_near_ceiling"]),
    "native actions with no rounds": (
        {"dialect": "native", "meters": "tool_errors,observations,elapsed_time,"
         "write_classification"}, ["max_rounds", "max_tool_calls", "max_output_tokens"]),
    "a native log that carries every meter": ({"dialect": "native", "meters": ALL_METERS}, []),
    "a native log that carries none": (
        {"dialect": "native", "meters": ""},
        ["max_rounds", "max_tool_calls", "max_output_tokens", "tool_error_budget", "no_progress",
         "max_steps", "max_writes", "max_seconds", "retry_near_ceiling"]),
}


@pytest.mark.parametrize("name", COVERAGE_CASES)
def test_coverage(name: str) -> None:
    fields, missing = COVERAGE_CASES[name]
    entries = coverage("refactor", groups_of(session(**fields)))
    assert [c.rule.reason.value for c in entries if c.missing] == missing
    assert all(c.sessions == 1 for c in entries)


def test_coverage_counts_sessions_per_class_and_names_them() -> None:
    rows = [c.row() for c in coverage("refactor", groups_of(
        session(session_id="c", meters="round_counter,tool_calls,tool_errors,observations"),
        session(session_id="b"),
        session(session_id="a", meters="round_counter,tool_calls,tool_errors,observations"),
    ))]
    rows += [c.row() for c in coverage("other", groups_of(
        session(session_id="d", task_class="other", meters="")))]
    tokens = next(r for r in rows if r["task_class"] == "refactor" and r["cap"] ==
                  "max_output_tokens")
    assert (tokens["sessions_in_force"], tokens["sessions_missing"], tokens["honoured"]) == (
        3, 2, 0)
    assert tokens["missing_sessions"] == "a, c"
    assert tokens["fail_closed_if_missing"] == "Usage field is absent or delayed"
    assert "output_tokens" in tokens["instrument"]
    assert {r["honoured"] for r in rows if r["task_class"] == "other"} == {0}


def test_sessions_alike_in_everything_a_verdict_reads_are_one_group() -> None:
    groups = groups_of(*(session(session_id=f"s{i:03d}") for i in range(30, 0, -1)),
                       session(session_id="x", recorded_stop=None))
    assert [(g.count, g.parity, g.recorded_stop) for g in groups] == [
        (30, MATCH, "task_complete"), (1, NO_RECORDED_STOP, None)]
    assert groups[0].ids == [f"s{i:03d}" for i in range(1, LISTED + 1)]  # the first, sorted
    assert groups[0].first_detail.startswith("stop reason task_complete on both")


def test_a_coverage_row_names_the_first_twenty_missing_sessions_and_counts_the_rest() -> None:
    lacking = [session(session_id=f"s{i:02d}", meters="") for i in range(25)]
    (row, *_) = [c.row() for c in coverage("refactor", groups_of(*lacking))]
    assert row["sessions_missing"] == 25
    assert row["missing_sessions"] == ", ".join(f"s{i:02d}" for i in range(20)) + " and 5 more"


# --- verdicts ----------------------------------------------------------------------------


def ready_class(n: int = 3, **fields: Any) -> list[dict[str, Any]]:
    return [session(session_id=f"s{i}", **fields) for i in range(1, n + 1)]


def verdict_of(sessions: list[dict[str, Any]], unknown: list[dict[str, Any]] | None = None,
               **settings: int) -> dict[str, Any]:
    (row,) = compute(sessions, unknown or [], Settings(**settings)).classes
    return row


def test_a_well_instrumented_class_that_matches_is_ready() -> None:
    row = verdict_of(ready_class())
    assert (row["verdict"], row["reason_kinds"], json.loads(row["reasons"])) == (READY, "", [])
    assert (row["sessions"], row["checked_sessions"], row["matches"]) == (3, 3, 3)
    assert json.loads(row["meter_coverage"]) == {
        "round_counter": 3, "tool_calls": 3, "output_tokens": 3, "tool_errors": 3,
        "observations": 3}


REASON_CASES = {
    # name: (sessions, unknown vendor rows, reason kind, words the reason must contain)
    "an unknown vendor stop": (
        ready_class(),
        [{"session_id": "s2", "task_class": "refactor", "key": "policy_hidden_v3"},
         {"session_id": "s3", "task_class": "refactor", "key": "policy_hidden_v3"},
         {"session_id": "s3", "task_class": "refactor", "key": "SAFETY"}],
        # SAFETY is a real Gemini string the map fails closed on purpose; the other, never seen
        "unknown_vendor", ["'SAFETY' x1 (a known Google Gemini finishReason string that fails "
                           "closed on purpose), 'policy_hidden_v3' x2 in 2 sessions (s2, s3)"],
    ),
    "a missing meter": (
        [*ready_class(2), session(session_id="s3", meters="round_counter,tool_calls,tool_errors,"
                                  "observations")],
        [], "missing_meter",
        ["max_output_tokens is in force but its meter, output_tokens, is missing in 1 of 3 "
         "sessions (s3)"],
    ),
    "a replay mismatch": (
        [*ready_class(2), stopped("max_rounds", 12, 12, "rounds 12 >= 12", session_id="s3",
                                  recorded_stop="max_rounds", rounds=14, tool_calls=14)],
        [], "replay_mismatch",
        ["replay mismatches in 1 of 3 sessions with a recorded stop (s3); e.g. s3: rounds: the "
         "log ends after 14, the replay stops after 12"],
    ),
    "a complete with no terminal signal": (
        [*ready_class(3), session(session_id="s4", recorded_stop=None, vendor_stop=None)],
        [], "no_terminal_signal", ["1 session ran out without a stop", "(s4)"],
    ),
    "too few sessions": (
        [*ready_class(2), session(session_id="s3", recorded_stop=None, vendor_stop=None,
                                  stop_reason="max_rounds", stop_at=3, stop_rounds=3,
                                  stop_steps=3, stop_tool_calls=6)],
        [], "too_few_sessions",
        ["too few sessions to judge: 2 of 3 carry a recorded stop", "at least 3 needed"],
    ),
}


@pytest.mark.parametrize("name", REASON_CASES)
def test_each_reason_keeps_the_class_on_the_paid_path(name: str) -> None:
    sessions, unknown, kind, words = REASON_CASES[name]
    row = verdict_of(sessions, unknown)
    assert row["verdict"] == STAY
    assert row["reason_kinds"] == kind
    (reason,) = json.loads(row["reasons"])
    for word in words:
        assert word in reason


def test_every_reason_is_listed_in_order() -> None:
    sessions = [
        session(session_id="s1", meters=""),
        session(session_id="s2", recorded_stop=None, vendor_stop=None),
        stopped("max_rounds", 2, 4, session_id="s3", recorded_stop="task_complete"),
    ]
    unknown = [{"session_id": "s1", "task_class": "refactor", "key": "weird"}]
    row = verdict_of(sessions, unknown)
    assert row["reason_kinds"] == (
        "unknown_vendor,missing_meter,replay_mismatch,no_terminal_signal,too_few_sessions")
    assert len(json.loads(row["reasons"])) == 1 + 5 + 1 + 1 + 1  # five loop rules unmetered
    assert json.loads(row["unmetered_caps"]) == [
        "max_rounds", "max_tool_calls", "max_output_tokens",
        "max_consecutive_tool_errors (tool_error_budget)", "no_progress_rounds (no_progress)"]


def test_an_unclassified_tool_is_a_reason_with_the_line_to_paste() -> None:
    # Claude Code sessions: a session that called an unclassified tool lacks the write meter
    # (the fold drops it), so the write rules are gaps there too.
    agent = {"dialect": "claude-code", "meters": ALL_METERS}
    sessions = [*ready_class(2, **agent),
                session(session_id="s3", **{**agent, "meters": ALL_METERS.replace(
                    ",write_classification", "")})]
    tools = [{"session_id": "s3", "task_class": "refactor", "key": "mcp__foo__bar", "calls": 3},
             {"session_id": "s3", "task_class": "refactor", "key": 'odd "name"', "calls": 1}]
    (row,) = compute(sessions, [], Settings(), tools).classes
    assert row["reason_kinds"] == "unclassified_tool,missing_meter"
    first, *gaps = json.loads(row["reasons"])
    assert first.startswith("unclassified tools: 'mcp__foo__bar' x3, 'odd \"name\"' x1 in 1 "
                            "session (s3): each call counted as a write")
    assert '"mcp__foo__bar" = "write"; "odd \\"name\\"" = "write"' in first
    assert [g.split(" is in force")[0] for g in gaps] == [
        "max_writes", "max_steps (retry_near_ceiling)"]
    assert json.loads(row["unmetered_caps"]) == ["max_writes", "max_steps (retry_near_ceiling)"]


def test_a_cancel_is_a_terminal_signal_not_a_silent_complete() -> None:
    cancelled = session(session_id="s3", recorded_stop="user_cancel", vendor_stop="cancelled")
    row = verdict_of([*ready_class(2), cancelled])
    assert (row["verdict"], row["completes_without_signal"], row["matches"]) == (READY, 0, 3)


def test_the_minimum_is_configurable() -> None:
    assert verdict_of(ready_class(2))["verdict"] == STAY
    assert verdict_of(ready_class(2), min_sessions=2)["verdict"] == READY
    assert verdict_of(ready_class(5), min_sessions=6)["reason_kinds"] == "too_few_sessions"


def test_the_tolerance_is_configurable() -> None:
    late = stopped("max_rounds", 12, 12, session_id="s4", recorded_stop="max_rounds", rounds=14)
    assert verdict_of([*ready_class(), late])["verdict"] == STAY
    row = verdict_of([*ready_class(), late], tolerance=2)
    assert (row["verdict"], row["tolerance"]) == (READY, 2)


def test_classes_are_judged_apart_and_the_ones_that_stay_come_first() -> None:
    sessions = [*ready_class(), *ready_class(1, task_class="bugfix"),
                *ready_class(3, task_class="zeta")]
    found = compute([dict(s, session_id=f"{s['task_class']}-{s['session_id']}") for s in sessions],
                    [])
    assert [(c["task_class"], c["verdict"]) for c in found.classes] == [
        ("bugfix", STAY), ("refactor", READY), ("zeta", READY)]
    assert found.staying == ["bugfix"]


def test_counts_of_stops_are_kept_per_class() -> None:
    sessions = [*ready_class(2), stopped("no_progress", 3, 6, session_id="s3",
                                         recorded_stop="no_progress")]
    row = verdict_of(sessions)
    assert json.loads(row["stop_reasons"]) == {"task_complete": 2, "no_progress": 1}
    assert json.loads(row["recorded_stops"]) == {"task_complete": 2, "no_progress": 1}


@pytest.mark.parametrize(
    "settings",
    [{"tolerance": -1}, {"min_sessions": 0}, {"tolerance": 1.5}, {"min_sessions": True}],
)
def test_settings_refuse_what_cannot_be_used(settings: dict[str, Any]) -> None:
    with pytest.raises(SettingsError):
        Settings(**settings)


# --- reports -----------------------------------------------------------------------------


def test_report_text_gives_each_class_its_verdict_and_reasons() -> None:
    sessions = [*ready_class(), session(session_id="b1", task_class="bugfix", meters="")]
    text = report_text(compute(sessions, []))
    assert text.splitlines()[0].startswith("2 task classes: 1 ready, 1 stay on the paid path")
    assert "\nbugfix: stay_on_paid_path\n  1 session; 1 with a recorded stop" in text
    assert "  - max_rounds is in force but its meter, round_counter, is missing" in text
    assert "\nrefactor: ready\n" in text
    assert text.endswith(
        "In SQL: select task_class from task_classes where verdict = 'stay_on_paid_path'")


def test_report_text_of_nothing_says_nothing_is_ready() -> None:
    assert "nothing can be judged ready" in report_text(compute([], []))


def test_report_json_decodes_the_columns_and_lists_the_mismatches() -> None:
    late = stopped("max_rounds", 12, 12, session_id="s4", recorded_stop="max_rounds", rounds=14)
    data = report_json(compute([*ready_class(), late], []))
    assert data["settings"] == {"tolerance": 1, "min_sessions": 3}
    assert (data["ready"], data[STAY]) == ([], ["refactor"])
    (c,) = data["task_classes"]
    assert c["reason_kinds"] == ["replay_mismatch"]
    assert c["stop_reasons"] == {"task_complete": 3, "max_rounds": 1}
    assert [m["session_id"] for m in c["parity_mismatches"]] == ["s4"]
    json.dumps(data)  # plain JSON all the way down


@pytest.mark.parametrize(
    ("meters", "missing"),
    [(TRACE_METERS, ["max_cost"]), (TRACE_METERS + ",cost", [])],
    ids=["no cost meter: a gap", "priced rounds: honoured"],
)
def test_a_money_cap_without_a_cost_meter_is_a_gap(meters: str, missing: list[str]) -> None:
    """max_cost fails closed where the model has no price or the log has no usage."""
    budget = Budget(max_cost=5.0).to_json()
    entries = coverage("refactor", groups_of(session(meters=meters, budget=budget)))
    money = [c for c in entries if c.rule.cap == "max_cost"]
    assert [c.rule.cap for c in money if c.missing] == missing
    row = money[0].row()
    assert row["fail_closed_if_missing"] == "The model has no price or the log has no usage"
    assert "--prices FILE" in row["instrument"]
