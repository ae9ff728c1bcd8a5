"""One file's records routed to sessions: what it hands the store (the fold itself is
tests/core/test_fold.py's, the lines and batches tests/ingest/test_ingester.py's)."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.core.budget import Budget
from ledger.core.events import Event
from ledger.core.fold import Fold, Session
from ledger.core.vendors import DEFAULT_VENDOR_MAP
from ledger.ingest.source import Cursor, state_json


def folded_session(task: str) -> Session:
    fold = Fold(Budget(max_rounds=3), DEFAULT_VENDOR_MAP, lambda text: (text, 0))
    session = fold.new_session("s-1", source_id="src", source_path="/logs/été/run.jsonl",
                               dialect="native", task_class="été", task=task)
    for n, event in enumerate([Event("round", tool_calls=2, output_tokens=10, observation="a",
                                     tool="pytest", ts="2026-11-30T10:00:00Z", at=1e9),
                               Event("retry", tool="pytest", elapsed_s=1.5),
                               Event("retry", tool="pytest", elapsed_s=2.25)], 1):
        fold.step(session, event, n, n * 10)
    return session


@pytest.mark.parametrize("task", ["fix the flaky test", "naïve → ünïcode", ""])
def test_state_json_is_the_resumable_state_as_json(task: str) -> None:
    session = folded_session(task)
    text = state_json(session)
    assert json.loads(text) == json.loads(json.dumps(session.to_resume()))
    assert Session.from_resume(json.loads(text)) == session


def test_a_state_msgspec_cannot_write_is_written_by_the_standard_library() -> None:
    """Nothing that reaches a session should hold a lone surrogate; if something did, its
    state is still written (escaped), not lost."""
    session = folded_session("bad \udcff byte")
    text = state_json(session)
    assert "\\udcff" in text
    assert Session.from_resume(json.loads(text)) == session


_JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.just("\udc80"),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=8), _JSON_LIKE, max_size=4), st.integers(min_value=0))
def test_a_cursor_copy_holds_its_fields_as_json_writes_them(reader: dict, line: int) -> None:
    """By a MessagePack round trip, or a deep copy where it cannot write a value (``\\udc80``)."""
    cursor = Cursor(line=line, reader=reader)
    copy = cursor.to_dict()
    assert json.dumps(copy) == json.dumps(msgspec.structs.asdict(cursor))
    before = json.dumps(copy)
    cursor.reader["later"] = [1]  # the fold goes on: the copy taken stays as it was
    for value in cursor.reader.values():
        if isinstance(value, dict | list):
            value.clear()
    assert json.dumps(copy) == before
