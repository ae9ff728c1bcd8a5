"""Process settings for bulk work (ledger/bulk.py): each holds inside its block only."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from ledger.ingest import bulk

glibc = pytest.mark.skipif(
    bulk._mallopt() is None, reason="the heap's top pad is a glibc setting (mallopt)"
)


def test_rare_young_collections_sets_the_young_pace_and_puts_it_back() -> None:
    before = gc.get_threshold()
    with bulk.rare_young_collections(12_345):
        assert gc.get_threshold() == (12_345, *before[1:])
    assert gc.get_threshold() == before


def test_rare_young_collections_puts_the_pace_back_when_the_work_fails() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), bulk.rare_young_collections():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before


#: What a worker and the writer do for every part of a batch, a hundred times: marshal 2,000
#: steps rows, gather them in 64 KB pieces as multiprocessing's Connection receives them, and
#: unmarshal them. Prints the page faults it took.
CHURN = """
import io, marshal, resource, sys
from contextlib import nullcontext
from ledger.ingest import bulk

rows = [(f"session-{i % 40}", i, "round", "grep", "a detail", 1, 2, None, "0123456789abcdef",
         None, None, "2024-05-30T22:00:08.123Z", 1.5, 3, 4, 5, 6, 0, 1, None, 0, "src", i,
         i * 240, 0) for i in range(2000)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
with bulk.padded_heap() if sys.argv[1] == "pad" else nullcontext(False) as applied:
    assert applied == (sys.argv[1] == "pad")
    for _ in range(100):
        message = marshal.dumps(rows)
        received = io.BytesIO()
        for at in range(0, len(message), 65536):
            received.write(message[at:at + 65536])
        marshal.loads(received.getvalue())
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", CHURN, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


@glibc
def test_a_padded_heap_reuses_its_pages_instead_of_faulting_new_ones_in() -> None:
    """Each freshly mapped page is a page fault: without the pad the churn above faults in
    about 5,000 pages (the heap's top handed back and mapped again, round after round); with
    it, about 400 (the pages the heap grows by once)."""
    without, padded = _faults("plain"), _faults("pad")
    assert without > 2_000
    assert padded < without / 5


@glibc
def test_padded_heap_puts_glibcs_default_back_also_when_the_work_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, int]] = []

    def mallopt(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    monkeypatch.setattr(bulk, "_mallopt", lambda: mallopt)
    with pytest.raises(RuntimeError), bulk.padded_heap(1 << 20) as applied:
        assert applied
        raise RuntimeError("boom")
    assert calls == [(bulk.M_TOP_PAD, 1 << 20), (bulk.M_TOP_PAD, bulk.DEFAULT_TOP_PAD)]


@pytest.mark.parametrize("refused", [False, True], ids=["no mallopt", "mallopt refuses"])
def test_padded_heap_does_nothing_where_the_setting_is_missing_or_refused(
    monkeypatch: pytest.MonkeyPatch, refused: bool
) -> None:
    """Not glibc (macOS, Windows: no mallopt; musl: one that refuses everything): nothing is
    set, and nothing is put back."""
    calls: list[tuple[int, int]] = []

    def refusing(param: int, value: int) -> int:
        calls.append((param, value))
        return 0

    monkeypatch.setattr(bulk, "_mallopt", lambda: refusing if refused else None)
    with bulk.padded_heap() as applied:
        assert not applied
    assert calls == ([(bulk.M_TOP_PAD, bulk.TOP_PAD)] if refused else [])


def test_bulk_work_holds_both_settings_for_its_block(monkeypatch: pytest.MonkeyPatch) -> None:
    pads: list[int] = []

    def mallopt(param: int, value: int) -> int:
        pads.append(value)
        return 1

    monkeypatch.setattr(bulk, "_mallopt", lambda: mallopt)
    before = gc.get_threshold()
    with bulk.bulk_work():
        assert gc.get_threshold()[0] == 100_000
        assert pads == [bulk.TOP_PAD]
    assert gc.get_threshold() == before
    assert pads == [bulk.TOP_PAD, bulk.DEFAULT_TOP_PAD]
