"""The fold: events to rows. Pure, so every rule is checked on hand-made events."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.config.prices import load_prices
from ledger.core.budget import Budget
from ledger.core.events import Event
from ledger.core.fold import (
    DETAIL_MAX,
    EXCERPT_MAX,
    MEMO_CHARS,
    NO_PROGRESS,
    RETRY_STORM,
    STEP_COLUMNS,
    TOOL_MAX,
    UNKNOWN_VENDOR,
    Fold,
    Session,
    families_for,
)
from ledger.core.pricing import Tokens
from ledger.core.redact import redact
from ledger.core.vendors import DEFAULT_VENDOR_MAP


def no_redaction(text: str) -> tuple[str, int]:
    return text, 0


@pytest.fixture
def fold() -> Fold:
    return Fold(Budget(), DEFAULT_VENDOR_MAP, no_redaction)


def session(fold: Fold, dialect: str = "native") -> Session:
    return fold.new_session("s", source_id="src", source_path="p", dialect=dialect,
                            task_class="tc")


def feed(fold: Fold, s: Session, events: list[Event]) -> tuple[list[dict], list[dict]]:
    steps, incidents = [], []
    for n, event in enumerate(events, 1):
        row, closed = fold.step(s, event, n, n * 10)
        steps.append(step_dict(row))
        incidents.extend(closed)
    return steps, incidents + s.open_incidents()


def step_dict(row: tuple) -> dict:
    return dict(zip(STEP_COLUMNS, row, strict=True))


def retry(tool: str = "pytest", detail: str = "tool:pytest") -> Event:
    return Event("retry", tool=tool, detail=detail)


@pytest.mark.parametrize(
    ("dialect", "families"),
    [("trace", {"loop"}), ("gate", {"gate"}), ("native", {"loop", "gate"})],
)
def test_each_dialect_is_held_to_its_own_seed(dialect, families) -> None:
    assert families_for(dialect) == families


def test_a_session_that_runs_out_is_task_complete(fold: Fold) -> None:
    s = session(fold)
    feed(fold, s, [Event("round", observation="a"), Event("round", observation="b")])
    row = s.row()
    assert (row["stop_reason"], row["stop_at"], row["recorded_stop"]) == (
        "task_complete", None, None)


def test_recorded_stop_is_the_mapped_vendor_string(fold: Fold) -> None:
    s = session(fold)
    feed(fold, s, [Event("round", vendor_stop="tool_use"), Event("round", vendor_stop="end_turn")])
    assert (s.recorded_stop, s.vendor_stop) == ("task_complete", "end_turn")


def test_continue_signals_do_not_overwrite_the_recorded_stop(fold: Fold) -> None:
    s = session(fold)
    feed(fold, s, [Event("round", vendor_stop="max_tokens"),
                   Event("round", vendor_stop="tool_use")])
    assert s.recorded_stop == "max_output_tokens"


def test_end_outcome_is_the_recorded_stop(fold: Fold) -> None:
    s = session(fold)
    feed(fold, s, [Event("round"), Event("end", outcome="user_cancel")])
    assert s.recorded_stop == "user_cancel"


def test_steps_rows_carry_counters_and_the_stop_mark(fold: Fold) -> None:
    s = session(fold)
    steps, _ = feed(fold, s, [Event("write")] * 4)
    assert [r["total_writes"] for r in steps] == [1, 2, 3, 4]
    assert [r["stop_reason"] for r in steps] == [None, None, "max_writes", None]
    assert [r["after_stop"] for r in steps] == [0, 0, 0, 1]
    assert [(r["source_line"], r["source_offset"]) for r in steps][:2] == [(1, 10), (2, 20)]
    assert s.row()["events_after_stop"] == 1


def test_elapsed_comes_from_timestamps_when_the_log_has_no_elapsed(fold: Fold) -> None:
    s = session(fold)
    steps, _ = feed(fold, s, [
        Event("start", ts="2026-01-01T00:00:00Z", at=100.0),
        Event("read", ts="2026-01-01T00:00:30Z", at=130.0),
        Event("read", ts="2026-01-01T00:00:50Z", at=150.0),
    ])
    assert [r["elapsed_s"] for r in steps] == [0.0, 30.0, 50.0]
    assert (s.row()["started_at"], s.row()["ended_at"]) == (
        "2026-01-01T00:00:00Z", "2026-01-01T00:00:50Z")
    assert s.state.stop_reason.value == "max_seconds"


def test_a_retry_storm_is_an_incident(fold: Fold) -> None:
    s = session(fold)
    _, incidents = feed(fold, s, [Event("read"), retry(), retry(), retry(), Event("read")])
    (storm,) = [i for i in incidents if i["kind"] == RETRY_STORM]
    assert (storm["start_idx"], storm["end_idx"], storm["length"], storm["key"]) == (
        2, 4, 3, "pytest")
    assert storm["blocked"] == 0


def test_retries_of_different_tools_are_different_runs(fold: Fold) -> None:
    s = session(fold)
    _, incidents = feed(fold, s, [retry("a"), retry("a"), retry("b"), retry("b"), retry("b")])
    assert [(i["key"], i["length"]) for i in incidents if i["kind"] == RETRY_STORM] == [
        ("a", 2), ("b", 3)]


def test_a_single_retry_is_not_an_incident(fold: Fold) -> None:
    _, incidents = feed(fold, session(fold), [retry(), Event("read"), retry()])
    assert incidents == []


def test_a_retry_blocked_near_the_ceiling_marks_its_run(fold: Fold) -> None:
    s = session(fold, "gate")
    _, incidents = feed(fold, s, [Event("read")] * 5 + [retry(), retry()])
    (storm,) = incidents
    assert (storm["length"], storm["blocked"]) == (2, 1)


def test_a_no_progress_run_counts_what_it_cost(fold: Fold) -> None:
    s = session(fold, "trace")
    _, incidents = feed(fold, s, [
        Event("round", tool_calls=1, output_tokens=100, observation="first"),
        Event("round", tool_calls=2, output_tokens=50, observation="same"),
        Event("round", tool_calls=3, output_tokens=70, observation="same"),
        Event("round", tool_calls=4, output_tokens=90, observation="same"),
        Event("round", tool_calls=1, output_tokens=10, observation="other"),
    ])
    (run,) = [i for i in incidents if i["kind"] == NO_PROGRESS]
    assert (run["start_idx"], run["end_idx"], run["length"]) == (2, 4, 3)
    assert (run["output_tokens"], run["tool_calls"], run["detail"]) == (160, 7, "same")


def test_steps_and_incidents_keep_what_they_cost() -> None:
    """Each round's cost, the running total (None until the session has a cost), and each
    run's spend after its first event (the rounds between its events included)."""
    fold = Fold(Budget(), DEFAULT_VENDOR_MAP, no_redaction)
    s = session(fold)
    steps, incidents = feed(fold, s, [
        Event("think", observation="x"),
        Event("round", cost=0.25, observation="x"),
        Event("round", cost=0.5),
        Event("round", cost=1.0, observation="x"),
        Event("round", cost=2.0, observation="y"),
    ])
    assert [(t["cost_usd"], t["total_cost_usd"]) for t in steps] == [
        (None, None), (0.25, 0.25), (0.5, 0.75), (1.0, 1.75), (2.0, 3.75)]
    (run,) = incidents
    assert (run["kind"], run["start_idx"], run["end_idx"], run["cost_usd"]) == (
        NO_PROGRESS, 1, 4, 1.75)


def test_an_incident_of_a_session_without_a_cost_has_none(fold: Fold) -> None:
    _, incidents = feed(fold, session(fold), [retry(), retry()])
    assert [(i["kind"], i["cost_usd"]) for i in incidents] == [(RETRY_STORM, None)]


def test_a_streamed_responses_later_lines_are_priced_at_its_model() -> None:
    """Its first line counts the prompt and part of the output; later lines (the same round)
    add output tokens and name no model: they are priced at the round's."""
    fold = Fold(Budget(), DEFAULT_VENDOR_MAP, no_redaction, prices=load_prices())
    s = session(fold)
    model = "claude-opus-4-6"
    steps, _ = feed(fold, s, [
        Event("round", model=model, input_tokens=1000, output_tokens=10),
        Event("round", same_round=True, input_tokens=0, output_tokens=990),
        Event("round", same_round=True, output_tokens=5),  # no input count: half a usage
    ])
    whole = load_prices().cost(model, Tokens(1000, 1000))
    assert whole is not None
    assert s.row()["cost_usd"] == pytest.approx(whole.amount)
    assert [t["model"] for t in steps] == [model, None, None]  # the rows say what the log says
    assert steps[2]["cost_usd"] is None


def test_events_without_an_observation_do_not_break_a_run(fold: Fold) -> None:
    s = session(fold)
    _, incidents = feed(fold, s, [
        Event("round", observation="x"), Event("think"), Event("round", observation="x")])
    assert [(i["kind"], i["length"]) for i in incidents] == [(NO_PROGRESS, 2)]


def test_an_unknown_vendor_stop_is_an_incident(fold: Fold) -> None:
    s = session(fold)
    _, incidents = feed(fold, s, [Event("round", vendor_stop="policy_hidden_v3",
                                        output_tokens=12)])
    (incident,) = incidents
    assert (incident["kind"], incident["key"], incident["output_tokens"]) == (
        UNKNOWN_VENDOR, "policy_hidden_v3", 12)


def test_stored_text_is_redacted_and_cut(fold: Fold) -> None:
    fold = Fold(Budget(), DEFAULT_VENDOR_MAP, redact)
    s = session(fold)
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    steps, _ = feed(fold, s, [Event("read", detail=f"clone with {secret} " + "x" * 900)])
    detail = steps[0]["detail"]
    assert secret not in detail
    assert "[REDACTED:" in detail
    assert len(detail) == 500 and detail.endswith("…")
    assert s.redactions == 1


def test_remembered_texts_are_never_stored_past_their_limits() -> None:
    """Short plain texts are remembered and given out without cleaning again: only safe
    because every limit the fold cuts them to is at least the length it remembers."""
    assert MEMO_CHARS <= min(DETAIL_MAX, TOOL_MAX, EXCERPT_MAX)


@pytest.mark.parametrize("field", ["tool", "detail"])
def test_a_text_seen_again_is_redacted_and_counted_again(field: str) -> None:
    fold = Fold(Budget(), DEFAULT_VENDOR_MAP, redact)
    s = session(fold)
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    steps, _ = feed(fold, s, [Event("read", **{field: f"push {secret}"}) for _ in range(3)])
    assert all(secret not in step[field] and "[REDACTED:" in step[field] for step in steps)
    assert s.redactions == fold.redactions == 3


@pytest.mark.parametrize(("field", "limit"), [("tool", TOOL_MAX), ("detail", DETAIL_MAX)])
def test_a_long_text_seen_again_is_cut_again(fold: Fold, field: str, limit: int) -> None:
    steps, _ = feed(fold, session(fold), [Event("read", **{field: "x" * 900}) for _ in range(2)])
    assert [len(step[field]) for step in steps] == [limit, limit]


def test_a_plain_text_is_given_out_as_one_copy(fold: Fold) -> None:
    """Rows repeat tool names and details; one copy of each (not a copy per line read) is
    what lets a worker's rows be marshalled with back-references."""
    texts = ["tool:pytest", "".join(["tool:", "pytest"])]  # equal, two objects
    assert texts[0] is not texts[1]
    steps, _ = feed(fold, session(fold), [Event("read", tool=t, detail=t) for t in texts])
    assert steps[0]["tool"] is steps[1]["tool"] is steps[1]["detail"]


def test_observation_hash_is_of_the_original_text(fold: Fold) -> None:
    from ledger.core.events import observation_hash

    fold = Fold(Budget(), DEFAULT_VENDOR_MAP, redact)
    text = "token=hunter2hunter2 failed"
    steps, _ = feed(fold, session(fold), [Event("round", observation=text)])
    assert steps[0]["observation_hash"] == observation_hash(text)


events = st.lists(
    st.one_of(
        st.builds(Event, action=st.just("round"), tool_calls=st.integers(0, 5),
                  output_tokens=st.integers(0, 5000), observation=st.sampled_from(["a", "b"]),
                  tool_error=st.booleans(),
                  vendor_stop=st.sampled_from([None, "tool_use", "end_turn", "weird"])),
        st.builds(Event, action=st.sampled_from(["think", "read", "write", "retry"]),
                  tool=st.sampled_from(["x", "y"]), elapsed_s=st.floats(0, 100)),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(events=events, cut=st.integers(0, 25))
def test_a_saved_and_resumed_session_ends_as_if_folded_in_one_go(events, cut) -> None:
    fold = Fold(Budget(), DEFAULT_VENDOR_MAP, no_redaction)
    whole = session(fold)
    whole_steps, _ = feed(fold, whole, [Event(**_fields(e)) for e in events])
    first = session(fold)
    steps_a, _ = feed(fold, first, [Event(**_fields(e)) for e in events[:cut]])
    resumed = Session.from_resume(json.loads(json.dumps(first.to_resume())))
    steps_b = [step_dict(fold.step(resumed, Event(**_fields(e)), None, None)[0])
               for e in events[cut:]]
    assert resumed.row() == whole.row()
    assert resumed.open_incidents() == whole.open_incidents()
    strip = [{k: v for k, v in r.items() if k not in ("source_line", "source_offset")}
             for r in steps_a + steps_b]
    assert strip == [{k: v for k, v in r.items() if k not in ("source_line", "source_offset")}
                     for r in whole_steps]


def _fields(event: Event) -> dict:
    return {name: getattr(event, name) for name in Event.__slots__}
