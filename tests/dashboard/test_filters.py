"""Dashboard filters: what the URL may say, and the SQL it becomes (parameters only)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger_dashboard.filters import FilterError, Filters, whole_number


@pytest.mark.parametrize(
    ("args", "active"),
    [
        ({}, {}),
        ({"task_class": "", "stop_reason": "  ", "source": ""}, {}),
        ({"task_class": "bugfix"}, {"task_class": "bugfix"}),
        ({"stop_reason": "max_rounds", "other": "x"}, {"stop_reason": "max_rounds"}),
        ({"since": "2026-11-01", "until": "2026-11-30"},
         {"since": "2026-11-01", "until": "2026-11-30"}),
        ({"source": "runs/a b.jsonl"}, {"source": "runs/a b.jsonl"}),
    ],
)
def test_filters_from_args(args: dict[str, str], active: dict[str, str]) -> None:
    assert Filters.from_args(args).active() == active


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"stop_reason": "done"}, "unknown stop reason 'done'"),
        ({"stop_reason": "MAX_ROUNDS"}, "unknown stop reason"),
        ({"since": "2026-1-1"}, "'2026-1-1' is not a date"),
        ({"until": "20261130"}, "'20261130' is not a date"),
        ({"until": "2026-11-31"}, "'2026-11-31' is not a date"),
        ({"since": "2026-11-02", "until": "2026-11-01"}, "is after until"),
    ],
)
def test_bad_filters_say_what_is_wrong(args: dict[str, str], message: str) -> None:
    with pytest.raises(FilterError, match=message):
        Filters.from_args(args)


@pytest.mark.parametrize(
    ("until", "picked"),
    [
        ("2026-12-30", []),
        ("2026-12-31", ["2026-12-31", "2026-12-31T23:59:59.999Z", "2026-12-31 23:59"]),
        ("9999-12-30", ["2026-12-31", "2026-12-31T23:59:59.999Z", "2026-12-31 23:59",
                        "2027-01-01T00:00:00Z"]),
        ("9999-12-31", ["2026-12-31", "2026-12-31T23:59:59.999Z", "2026-12-31 23:59",
                        "2027-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]),
    ],
)
def test_until_is_inclusive_of_its_whole_day_up_to_the_last_day(
    until: str, picked: list[str]
) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("create table sessions (started_at)")
    stamps = ["2026-12-31", "2026-12-31T23:59:59.999Z", "2026-12-31 23:59",
              "2027-01-01T00:00:00Z", "9999-12-31T23:59:59Z"]
    conn.executemany("insert into sessions values (?)", [(t,) for t in stamps])
    filters = Filters.from_args({"until": until})
    sql = f"select started_at from sessions s where 1{filters.session_where()} order by rowid"
    assert [r[0] for r in conn.execute(sql, filters.params())] == picked


@pytest.mark.parametrize(
    ("text", "minimum", "value"),
    [("0", 0, 0), ("7", 2, 7), ("9223372036854775807", 1, 2**63 - 1)],
)
def test_whole_numbers_fit_sqlite(text: str, minimum: int, value: int) -> None:
    assert whole_number("n", text, minimum) == value


@pytest.mark.parametrize(
    ("text", "minimum"),
    [("9223372036854775808", 0), ("1" * 400, 0), ("1", 2), ("-1", 0), ("1_000", 0),
     (" 7", 0), ("\u0667", 0), ("1.5", 0), ("", 0), ("1e3", 0)],
)
def test_other_numbers_are_filter_errors(text: str, minimum: int) -> None:
    with pytest.raises(FilterError, match=f"n: .* must be a whole number from {minimum} to"):
        whole_number("n", text, minimum)


@pytest.mark.parametrize(
    ("filters", "query"),
    [
        (Filters(), ""),
        (Filters(task_class="a&b=c"), "?task_class=a%26b%3Dc"),
        (Filters(task_class="x", since="2026-11-01"), "?task_class=x&since=2026-11-01"),
    ],
)
def test_query_strings_round_trip(filters: Filters, query: str) -> None:
    assert filters.query() == query


def test_query_changes_keep_the_rest() -> None:
    filters = Filters(task_class="x", stop_reason="max_steps")
    assert filters.query(stop_reason=None) == "?task_class=x"
    assert filters.query(_next="abc", _size=None) == "?task_class=x&stop_reason=max_steps&_next=abc"


SESSIONS = [
    # session_id, task_class, stop_reason, started_at, source_id
    ("a", "bugfix", "max_rounds", "2026-11-01T10:00:00Z", "src1"),
    ("b", "bugfix", "task_complete", "2026-11-02T23:59:59Z", "src1"),
    ("c", "docs", "max_steps", None, "src2"),
    ("d", "it's \"odd\"; drop table sessions", "no_progress", "2026-11-03T00:00:00Z", "src2"),
]


@pytest.fixture
def conn() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("create table sessions (session_id, task_class, stop_reason, started_at, "
                 "source_id)")
    conn.execute("create table sources (source_id, path)")
    conn.execute("create table incidents (session_id, kind)")
    conn.executemany("insert into sessions values (?, ?, ?, ?, ?)", SESSIONS)
    conn.executemany("insert into sources values (?, ?)",
                     [("src1", "runs/one.jsonl"), ("src2", "runs/two.jsonl")])
    conn.executemany("insert into incidents values (?, 'retry_storm')", [("a",), ("c",), ("d",)])
    return conn


def picked(conn: sqlite3.Connection, filters: Filters) -> list[str]:
    sql = f"select session_id from sessions s where 1{filters.session_where()} order by 1"
    return [r[0] for r in conn.execute(sql, filters.params())]


def picked_incidents(conn: sqlite3.Connection, filters: Filters) -> list[str]:
    sql = f"select session_id from incidents i where 1{filters.incident_where()} order by 1"
    return [r[0] for r in conn.execute(sql, filters.params())]


@pytest.mark.parametrize(
    ("args", "sessions"),
    [
        ({}, ["a", "b", "c", "d"]),
        ({"task_class": "bugfix"}, ["a", "b"]),
        ({"task_class": SESSIONS[3][1]}, ["d"]),
        ({"stop_reason": "max_steps"}, ["c"]),
        ({"since": "2026-11-02"}, ["b", "d"]),
        ({"until": "2026-11-02"}, ["a", "b"]),
        ({"since": "2026-11-02", "until": "2026-11-02"}, ["b"]),
        ({"source": "src2"}, ["c", "d"]),
        ({"source": "runs/one.jsonl"}, ["a", "b"]),
        ({"source": "nowhere"}, []),
    ],
)
def test_session_and_incident_conditions_pick_the_same_sessions(
    conn: sqlite3.Connection, args: dict[str, str], sessions: list[str]
) -> None:
    filters = Filters.from_args(args)
    assert picked(conn, filters) == sessions
    assert picked_incidents(conn, filters) == [s for s in sessions if s != "b"]


@given(st.text(max_size=40), st.text(max_size=40))
def test_the_sql_depends_on_which_filters_are_set_never_on_their_values(
    task_class: str, source: str
) -> None:
    filters = Filters(task_class=task_class, source=source)
    same_shape = Filters(task_class="x", source="y")
    for method in ("session_where", "rollup_where", "incident_where"):
        assert getattr(filters, method)() == getattr(same_shape, method)()
