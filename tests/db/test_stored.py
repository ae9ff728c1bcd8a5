"""Stored sessions read back: the rows rebuild the events the machine saw at ingest."""

from __future__ import annotations

import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core.budget import Budget, Machine, State
from ledger.core.events import Event, meters_of, observation_hash
from ledger.core.vendors import DEFAULT_VENDOR_MAP
from ledger.db.stored import VERIFIED, StoredError, open_readonly, stored_sessions, task_classes
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import REAL_LOGS, rows
from tests.strategies import budgets, ledger, write_ledger


def replay_stored(conn: sqlite3.Connection) -> dict[str, tuple[str, int | None, str | None]]:
    """Each session's stop when its stored events go through its stored budget again."""
    from ledger.core.fold import families_for

    found = {}
    for session, events in stored_sessions(conn):
        machine = Machine(session.budget, families_for(session.dialect), DEFAULT_VENDOR_MAP)
        state = State()
        for event in events:
            machine.advance(state, event)
        reason = state.stop_reason.value if state.stop_reason else "task_complete"
        found[session.session_id] = (reason, state.stop_at, state.stop_detail)
    return found


def stored_stops(db: Path) -> dict[str, tuple[str, int | None, str | None]]:
    return {
        r["session_id"]: (r["stop_reason"], r["stop_at"], r["stop_detail"])
        for r in rows(db, "select * from sessions")
    }


def test_the_sample_sessions_replay_to_their_stored_stops(sample_db: Path) -> None:
    with closing(open_readonly(str(sample_db))) as conn:
        assert replay_stored(conn) == stored_stops(sample_db)


@pytest.mark.parametrize(
    "budget",
    [Budget(), Budget(max_rounds=5, max_steps=None, max_seconds=None),
     Budget(max_tool_calls=4, max_steps=None, max_seconds=None),
     Budget(max_output_tokens=100, max_steps=None, max_seconds=None)],
)
def test_real_agent_logs_replay_to_their_stored_stops(tmp_path: Path, budget: Budget) -> None:
    # Rounds that span several rows (same_round) must stay one round when read back.
    db = tmp_path / "ledger.db"
    ingest(db, [REAL_LOGS], Options(budget=budget))
    with closing(open_readonly(str(db))) as conn:
        assert replay_stored(conn) == stored_stops(db)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions=ledger(), budget=budgets)
def test_random_ledgers_replay_to_their_stored_stops(sessions, budget: Budget) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        ingest(db, [write_ledger(Path(tmp) / "runs", sessions)], Options(budget=budget))
        with closing(open_readonly(str(db))) as conn:
            assert replay_stored(conn) == stored_stops(db)


@given(text=st.text(max_size=20), tool_error=st.booleans())
def test_a_precomputed_hash_counts_as_the_observation_it_hashes(text: str, tool_error) -> None:
    by_text = [Event("round", observation=text, tool_error=tool_error)] * 3
    by_hash = [Event("round", observation_hash=observation_hash(text), tool_error=tool_error)] * 3
    machine = Machine(Budget(no_progress_rounds=3))
    states = State(), State()
    for events, state in zip((by_text, by_hash), states, strict=True):
        for event in events:
            machine.advance(state, event)
    assert states[0] == states[1]
    assert states[0].stop_reason is not None
    assert meters_of(by_hash[0]) == meters_of(by_text[0])


def test_events_are_rebuilt_in_order_with_every_measured_field(sample_db: Path) -> None:
    with closing(open_readonly(str(sample_db))) as conn:
        sessions = {s.session_id: (s, list(events)) for s, events in stored_sessions(conn)}
    session, events = sessions["bf-0001"]
    assert (session.task_class, session.dialect, session.stop_reason, session.stop_at) == (
        "bugfix", "native", "tool_error_budget", 4
    )
    assert [e.action for e in events] == ["start", "round", "round", "round", "end"]
    first = events[1]
    assert (first.tool_calls, first.output_tokens, first.tool_error) == (1, 420, True)
    assert first.observation is None
    assert first.observation_hash == observation_hash("1 failed: test_login_timeout (timeout 5s)")
    assert events[-1].outcome == "tool_error_budget"
    assert len(sessions) == rows(sample_db, "select count(*) as n from sessions")[0]["n"]


def test_a_reader_may_leave_a_session_early(sample_db: Path) -> None:
    with closing(open_readonly(str(sample_db))) as conn:
        seen = []
        for session, events in stored_sessions(conn):
            next(iter(events))  # read one event, skip the rest
            seen.append(session.session_id)
    assert seen == sorted(r["session_id"] for r in rows(sample_db, "select * from sessions"))


def test_filters_by_task_class_and_fixed_condition(sample_db: Path) -> None:
    with closing(open_readonly(str(sample_db))) as conn:
        refactor = [s.session_id for s, _ in stored_sessions(conn, "refactor")]
        verified = [s.session_id for s, _ in stored_sessions(conn, where=VERIFIED)]
        assert task_classes(conn) == ["bugfix", "docs", "refactor"]
        assert task_classes(conn, VERIFIED) == ["bugfix", "refactor"]
    assert refactor == sorted(
        r["session_id"] for r in rows(sample_db, "select * from sessions "
                                      "where task_class = 'refactor'")
    )
    assert verified == ["6f0ca1ba01fc", "bf-0002"]


@pytest.mark.parametrize("content", [b"", b"not a database at all, just text" * 40])
def test_a_file_that_is_not_a_ledger_database_is_a_clear_error(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "other.db"
    path.write_bytes(content)
    with pytest.raises(StoredError, match="database"):
        conn = open_readonly(str(path))
        list(stored_sessions(conn))
