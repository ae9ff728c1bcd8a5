"""Process settings for bulk work: the garbage collector's pace and the C heap's top pad.

Both are process-wide, so each is a context manager that puts the setting back when the work
ends (also when it fails). :func:`bulk_work` enters both; an ingest and each of its workers
run inside it.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

#: glibc's ``mallopt`` parameter for the heap's top pad, and its default (see mallopt(3)).
M_TOP_PAD = -2
DEFAULT_TOP_PAD = 128 * 1024
#: Free memory kept at the top of the heap while ingesting.
TOP_PAD = 16 << 20


@contextmanager
def rare_young_collections(allocations: int = 100_000) -> Iterator[None]:
    """Let the cyclic garbage collector's young pass run every ``allocations`` container
    allocations, not every 700, while ingesting (the older passes keep their pace).

    Every event allocates a few containers (its steps row, lists of incidents) and a batch
    holds its 20,000 rows until they are written, so at the default pace the collector ran
    every few events and kept promoting the batch's rows into older generations, which it
    then walked again: about 5% of ingest's CPU time on the 1M corpus. The fold makes no
    reference cycles, so nothing waits longer to be freed (peak RSS unchanged).
    """
    before = gc.get_threshold()
    gc.set_threshold(allocations, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextmanager
def padded_heap(pad: int = TOP_PAD) -> Iterator[bool]:
    """Keep ``pad`` bytes free at the top of the C heap (glibc only); yields whether it could.

    An ingest makes and frees buffers of a few hundred KB over and over: a worker marshals
    each part of a batch (about 300 KB for 2,000 steps), the writer receives it in 64 KB
    pieces gathered into a growing buffer, then unmarshals it. glibc hands the free top of its
    heap back to the kernel once it passes 128 KB, so each new buffer was made of fresh pages:
    a page fault and a page zeroed for every 4 KB. With a 16 MB pad the heap keeps those pages
    for the next buffer. The whole ingest of the 1M corpus with two workers: 68,000 page
    faults to 21,000; five runs each, alternated, 13.06-13.89 s of CPU (median 13.32) against
    13.09-14.35 s (13.90), and 7.12-7.63 s against 7.11-7.77 s of wall-clock time. The pad
    keeps only pages the process has used already, so its peak memory does not grow.
    Elsewhere (macOS, Windows, musl) this does nothing.
    """
    mallopt = _mallopt()
    applied = mallopt is not None and mallopt(M_TOP_PAD, pad) == 1
    try:
        yield applied
    finally:
        if applied and mallopt is not None:
            mallopt(M_TOP_PAD, DEFAULT_TOP_PAD)


def _mallopt() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).mallopt  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


@contextmanager
def bulk_work() -> Iterator[None]:
    """Both settings above, for the length of an ingest (or of a worker's life)."""
    with ExitStack() as stack:
        stack.enter_context(rare_young_collections())
        stack.enter_context(padded_heap())
        yield
