"""What an ingest reads back of ``sources``: the ids a new source's id must not collide with."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.db.sources import prefix_range, source_ids_from

#: Hex digits as the ids are made, and the characters next to the edges of the code points.
CHARS = st.sampled_from(["0", "9", "a", "f", "-", "2", "\x7f", "\x80", "\ud7ff", "\ue000",
                         "\uffff", "\U00010000", "\U0010ffff"])
IDS = st.text(CHARS, max_size=5)


def table(ids: set[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE sources (source_id TEXT PRIMARY KEY, path TEXT)")
    conn.executemany("INSERT INTO sources (source_id) VALUES (?)", [(i,) for i in ids])
    return conn


@settings(max_examples=300, deadline=None)
@given(st.sets(IDS, max_size=12), IDS)
def test_the_ids_from_a_prefix_are_those_that_start_with_it(ids: set[str], prefix: str) -> None:
    assert source_ids_from(table(ids), prefix) == {i for i in ids if i.startswith(prefix)}


def test_a_prefix_is_looked_up_in_the_index() -> None:
    bounds = prefix_range("c0b13d5daf52")
    assert bounds == ("c0b13d5daf52", "c0b13d5daf53")
    plan = table(set()).execute(
        "EXPLAIN QUERY PLAN SELECT source_id FROM sources WHERE source_id >= ? AND source_id < ?",
        bounds,
    ).fetchall()
    assert "SEARCH" in plan[0][3], plan


def test_a_prefix_with_no_successor_is_matched_all_the_same() -> None:
    assert [prefix_range(p) for p in ("", "a\U0010ffff", "\ud7ff")] == [None, None, None]
    ids = {"", "a\U0010ffff", "a\U0010ffff-2", "b"}
    assert source_ids_from(table(ids), "a\U0010ffff") == {"a\U0010ffff", "a\U0010ffff-2"}
    assert source_ids_from(table(ids), "") == ids
