"""The writer's cleaning of rows: every text of every row redacted, whatever it remembers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.db import writes
from ledger.db.writes import clean, stored_rows

AWS = "AKIAABCDEFGHIJKLMNOP"
VALUES = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.sampled_from(["read", "src-1", "2026-06-06T17:30:02Z", "0123abcd", f"key {AWS}",
                     f"password={AWS}", '{"token": "hunter2hunter2"}', "[1, 2]", "plain text"]),
    st.text(max_size=30),
)
ROWS = st.lists(st.lists(VALUES, max_size=8).map(tuple), max_size=6)


@settings(max_examples=300)
@given(rows=ROWS, remembered=st.lists(st.sampled_from(["read", "src-1", "plain text"])))
def test_each_row_comes_back_with_every_text_cleaned(
    rows: list[tuple], remembered: list[str]
) -> None:
    """Texts remembered as storable, texts seen twice in a row or in two rows, secrets
    before and after the first text to clean: each value comes back as clean() gives it, and
    a row without a text comes back as the very same object."""
    writes._STORABLE.update(remembered)
    expected = [tuple(clean(v) for v in row) for row in rows]
    cleaned = stored_rows(rows)
    assert [tuple(row) for row in cleaned] == expected
    for row, out in zip(rows, cleaned, strict=True):
        if not any(isinstance(v, str) for v in row):
            assert out is row
