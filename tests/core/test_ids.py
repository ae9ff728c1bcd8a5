"""Session ids and task classes cut to a bounded length (``ledger.core.ids``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ledger.core.ids import CUT_MARK, ID_MAX, bounded

TEXT = st.text(min_size=0, max_size=ID_MAX * 3)


@given(TEXT)
def test_an_id_is_kept_whole_up_to_the_limit_and_cut_to_exactly_the_limit_beyond(
    text: str
) -> None:
    cut = bounded(text)
    if len(text) <= ID_MAX:
        assert cut == text
    else:
        assert len(cut) == ID_MAX
        head, _, digest = cut.rpartition(CUT_MARK)
        assert text.startswith(head) and len(digest) == 16


@given(TEXT)
def test_cutting_twice_is_cutting_once(text: str) -> None:
    """A cut id met again (a sub-agent naming its cut parent) is the same session."""
    assert bounded(bounded(text)) == bounded(text)


@given(st.text(min_size=ID_MAX, max_size=ID_MAX), st.text(min_size=1), st.text(min_size=1))
def test_long_ids_that_share_their_head_stay_distinct(head: str, one: str, other: str) -> None:
    if one != other:
        assert bounded(head + one) != bounded(head + other)
