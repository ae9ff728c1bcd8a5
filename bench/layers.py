"""Where ingest's time goes: CPU time per event of each layer, added one at a time.

    .venv/bin/python bench/layers.py bench/data/corpus-1000000-seed1
    .venv/bin/python bench/layers.py CORPUS --cprofile   # and the top functions

Each line runs the pipeline up to that layer over the corpus's JSONL files (best of
``--repeat`` runs, CPU time, so other load on the machine matters less) and prints the CPU
microseconds per event, and that layer's cost: the difference to the line it adds to. Parsing
and validating is measured twice: the general way (``parse_json``, then the record readers),
and the typed way the ingest takes (``native_line``/``gate_line``), on which the fold builds.
The last three lines are whole ingests into a fresh database (traces included): without the
``steps`` rows and the verdict tables, with the rows, and with everything.

With ``--real`` the corpus is one of real-log shape (``bench/real_corpus.py``: Claude Code and
Codex files) and the layers are those of real logs: read the lines; decode every line
(msgspec); classify and fold them (the Claude Code and Codex readers, the action map, the
budget machine, rows) with redaction switched off; the same with redaction; then whole ingests
as above (the write). Figures are CPU microseconds per line, and MB/s of CPU time.

    .venv/bin/python bench/layers.py --real bench/data/real-100mb-30mb-500f-seed1
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from ledger.core.fold import Fold
from ledger.db import writes
from ledger.formats import agent_records
from ledger.formats.seed_dialects import (
    GATE,
    NATIVE,
    RecordError,
    gate_line,
    gate_record,
    native_line,
    native_record,
    parse_json,
)
from ledger.ingest.files import DEFAULT_MAX_LINE, Line, discover, read_lines, sniff
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.ingest.source import SourceFold


def jsonl_files(corpus: Path) -> list[tuple[Path, str]]:
    infos = (sniff(path) for path in discover([corpus]))
    return [(i.path, i.dialect) for i in infos if i.dialect in (NATIVE, GATE)]


def batches(path: Path) -> Iterator[list[Line]]:
    """A file's lines, a batch of 20,000 at a time, as ingest reads them."""
    with path.open("rb") as f:
        offset = 0
        while True:
            lines, offset = read_lines(f, offset, 20_000)
            if not lines:
                return
            yield lines


def pipeline(files: list[tuple[Path, str]], depth: int) -> int:
    """Run the layers up to ``depth``; returns lines. 1 read; 2 parse and 3 records, the
    general way (``parse_json``, then ``native_record``/``gate_record``); 4 records the typed
    way the ingest takes (``native_line``/``gate_line``); 5 fold."""
    fold = Options().make_fold()
    count = 0
    for path, dialect in files:
        source = SourceFold(fold, path.name, str(path), dialect, "bench")
        record = native_record if dialect == NATIVE else gate_record
        typed = native_line if dialect == NATIVE else gate_line
        for lines in batches(path):
            count += len(lines)
            if depth == 5:
                source.feed_lines(lines, DEFAULT_MAX_LINE)
                continue
            for line in lines:
                if depth == 4:
                    try:
                        typed(line.raw)
                    except RecordError:
                        pass
                elif depth > 1:
                    try:
                        value = parse_json(line.raw)
                        if depth > 2:
                            record(value)
                    except RecordError:
                        pass
            source.take()
    return count


def real_files(corpus: Path) -> list[tuple[Path, str]]:
    infos = (sniff(path) for path in discover([corpus]))
    return [(i.path, i.dialect) for i in infos if i.dialect not in (NATIVE, GATE)]


def _no_redaction(text: str) -> tuple[str, int]:
    return text, 0


def real_pipeline(files: list[tuple[Path, str]], depth: int) -> int:
    """Real logs' layers up to ``depth``; returns lines. 1 read; 2 decode every line; 3 fold
    (readers, actions, budget, rows) without redaction; 4 fold with redaction."""
    options = Options()
    redact = _no_redaction if depth == 3 else None
    fold = Fold(options.budget, options.vendor_map, redact, options.prices,
                options.action_map, options.task_classes) if redact else options.make_fold()
    decode = msgspec.json.Decoder().decode
    count = 0
    kept = agent_records.redact
    if redact:
        agent_records.redact = redact  # the readers' excerpts and folders, too
    try:
        for path, dialect in files:
            source = SourceFold(fold, path.name, str(path), dialect, "bench")
            for lines in batches(path):
                count += len(lines)
                if depth >= 3:
                    source.feed_lines(lines, DEFAULT_MAX_LINE)
                    source.take()
                elif depth == 2:
                    for line in lines:
                        try:
                            decode(line.raw)
                        except msgspec.DecodeError:
                            pass
    finally:
        agent_records.redact = kept
    return count


def whole_ingest(corpus: Path, write_steps: bool = True, verdicts: bool = True) -> int:
    """A whole ingest into a fresh database; optionally without the ``steps`` rows (and then
    without the verdict tables, which read them) or without the verdict tables."""
    from ledger.db import verdict_tables

    original, after_ingest = writes.write_batch, verdict_tables.after_ingest

    def without_steps(conn, *, steps, **rest):  # type: ignore[no-untyped-def]
        return original(conn, steps=[], **rest)

    writes.write_batch = original if write_steps else without_steps
    if not verdicts:
        verdict_tables.after_ingest = lambda *_args, **_kwargs: None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            summary = ingest(Path(tmp) / "ledger.db", [corpus])
    finally:
        writes.write_batch, verdict_tables.after_ingest = original, after_ingest
    return summary.steps + summary.errors


def best(work: Callable[[], int], repeat: int) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(repeat):
        start = time.process_time()
        count = work()
        times.append(time.process_time() - start)
    return min(times), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cprofile", action="store_true", help="also profile a whole ingest")
    parser.add_argument("--real", action="store_true",
                        help="a corpus of real-log shape (Claude Code and Codex)")
    args = parser.parse_args()
    files = real_files(args.corpus) if args.real else jsonl_files(args.corpus)
    whole = [
        ("whole ingest, no steps rows, no verdicts", lambda: whole_ingest(args.corpus, False,
                                                                          False), 4),
        ("+ steps rows (executemany)", lambda: whole_ingest(args.corpus, True, False), 5),
        ("+ verdict tables (whole ingest)", lambda: whole_ingest(args.corpus), 6),
    ]
    real = [
        ("read lines (files.read_lines)", lambda: real_pipeline(files, 1), None),
        ("+ decode every line (msgspec)", lambda: real_pipeline(files, 2), 0),
        ("+ classify and fold, no redaction (readers, actions, budget, rows)",
         lambda: real_pipeline(files, 3), 1),
        ("+ redaction (the fold as ingest runs it)", lambda: real_pipeline(files, 4), 2),
        *((name, work, base - 1) for name, work, base in whole),
    ]
    # (name, work, the layer it adds to)
    layers = real if args.real else [
        ("read lines (files.read_lines)", lambda: pipeline(files, 1), None),
        ("+ parse JSON (dialects.parse_json)", lambda: pipeline(files, 2), 0),
        ("+ validate records (native_record/gate_record)", lambda: pipeline(files, 3), 1),
        ("+ parse and validate, typed (native_line/gate_line)", lambda: pipeline(files, 4),
         0),
        ("+ fold: sessions, budget, hashing, redaction, rows", lambda: pipeline(files, 5), 3),
        *whole,
    ]
    size = sum(path.stat().st_size for path, _ in files)
    figures: list[float] = []
    unit = "line" if args.real else "event"
    print(f"| layer | CPU us/{unit} | this layer | MB/s (CPU) |\n|---|---|---|---|")
    lines = 0
    for name, work, base in layers:
        seconds, count = best(work, args.repeat)
        lines = lines or count  # real logs: every row per line read (a line is not an event)
        per_event = seconds * 1e6 / (lines if args.real else count)
        added = per_event - (figures[base] if base is not None else 0.0)
        print(f"| {name} | {per_event:.1f} | {added:+.1f} | {size / 1e6 / seconds:.1f} |",
              flush=True)
        figures.append(per_event)
    if args.cprofile:
        profiler = cProfile.Profile()
        profiler.runcall(whole_ingest, args.corpus)
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
