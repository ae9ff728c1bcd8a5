"""The whole benchmark: one command, a table of figures, targets met or not.

    .venv/bin/python bench/run.py                  # 1,000,000 events (minutes)
    .venv/bin/python bench/run.py --events 100000  # a quick run
    .venv/bin/python bench/run.py --skip rss --skip sqlite-utils
    .venv/bin/python bench/run.py --quick          # the real-log stages only (minutes)

Every figure is the median of ``--repeat`` runs, each in a fresh process (so each stage's peak
RSS is its own). The baselines run in the same invocation, on the same files, their runs
interleaved with ingest's, so the ratios hold on a noisy machine even when the absolute
numbers do not. A stage whose command or route does not exist yet is reported as "not
available". The table is printed and written to
``bench/results/latest.md`` (with the date and the machine), the numbers to ``latest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import baselines  # noqa: E402
import generate  # noqa: E402
import real_bench  # noqa: E402
from harness import (  # noqa: E402
    MB,
    Figure,
    Run,
    StageFailed,
    copy_to_disk,
    fresh,
    log,
    repeat,
    stage,
)

SEED_STAGES = ("raw", "raw-shaped", "sqlite-utils", "ingest", "ingest-1", "reingest",
               "incremental", "what-if", "dashboard", "rss")
STAGES = SEED_STAGES + real_bench.REAL_STAGES
WHATIF_OPTIONS = ["--budget", "max_steps=20", "--budget", "max_rounds=30"]


# --- corpus ----------------------------------------------------------------------------------


def corpus(data: Path, events: int, seed: int) -> tuple[Path, generate.Manifest]:
    """The corpus for ``events`` (generated once, then reused), restored to its generated size."""
    folder = data / f"corpus-{events}-seed{seed}"
    manifest = generate.Manifest.load(folder)
    if manifest is None:
        if folder.exists():
            shutil.rmtree(folder)
        log(f"generating {events:,} events into {folder}")
        start = time.perf_counter()
        manifest = generate.generate(folder, events, max(1, events // 100), 100, seed)
        log(f"generated {manifest.bytes / MB:.0f} MB in {time.perf_counter() - start:.0f} s")
    generate.restore(folder, manifest)
    return folder, manifest


# --- stages ----------------------------------------------------------------------------------


def available(command: list[str]) -> bool:
    """Whether an agent-ledger command exists (its --help exits 0)."""
    proc = subprocess.run([sys.executable, "-m", "ledger", *command, "--help"],
                          capture_output=True, check=False)
    return proc.returncode == 0


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(tempfile.mkdtemp(prefix="agent-ledger-bench-", dir=args.data))
        self.figures: dict[str, Figure] = {}
        self.missing: dict[str, str] = {}
        self.pages: dict[str, dict[str, Any]] = {}
        self.rss: list[tuple[int, Figure]] = []
        self.grown: list[tuple[int, Figure]] = []  # incremental ingest by database size
        self.manifest: generate.Manifest | None = None
        self.real: real_bench.RealLogs | None = None

    def wanted(self, name: str) -> bool:
        return name not in self.args.skip

    def run(self) -> None:
        if any(self.wanted(s) for s in SEED_STAGES):
            self.seed_stages()
        if any(self.wanted(s) for s in real_bench.REAL_STAGES):
            self.real = real_bench.RealLogs(self)
            self.real.run()

    def seed_stages(self) -> None:
        args = self.args
        folder, manifest = corpus(args.data, args.events, args.seed)
        self.corpus, self.manifest = folder, manifest
        events, size = manifest.lines, manifest.bytes
        db = self.work / "ledger.db"
        log(f"corpus: {events:,} events, {size / MB:.0f} MB, {manifest.files} files")

        self.full_ingest_and_baselines(folder, db)
        if not db.exists() and any(self.wanted(s) for s in
                                   ("reingest", "incremental", "what-if", "dashboard")):
            log("ingesting once for the later stages")
            stage("ingest", {"db": str(db), "paths": [str(folder)]})

        if self.wanted("reingest"):
            log("no-op re-ingest")
            runs = repeat("ingest", args.repeat, {"db": str(db), "paths": [str(folder)]})
            self.add("reingest", runs, events=events, size=size,
                     note="same unchanged files; events/s counts the files' events")

        if self.wanted("incremental"):
            log(f"incremental ingest after {args.append}% and {args.append_more}% more events")
            self.incremental(db)

        if self.wanted("what-if"):
            if available(["what-if"]):
                log("what-if")
                options = args.whatif_options or WHATIF_OPTIONS
                try:
                    runs = repeat("what-if", args.repeat, {"db": str(db), "options": options})
                    self.add("what-if", runs, events=events,
                             note="agent-ledger what-if DB " + " ".join(options))
                except StageFailed as exc:
                    self.missing["what-if"] = f"failed: {exc}"
            else:
                self.missing["what-if"] = "not available (no `agent-ledger what-if` command)"

        if self.wanted("dashboard"):
            log("dashboard pages and canned queries")
            run = stage("dashboard", {"db": str(db), "requests": args.requests,
                                      "pages": args.page})
            self.pages = run.result["pages"]
            self.add("dashboard", [run], note=f"{args.requests} requests per page")

        if self.wanted("rss"):
            self.rss_scaling()

    def full_ingest_and_baselines(self, folder: Path, db: Path) -> None:
        """Full ingest and its two baselines, their runs interleaved (raw, sqlite-utils,
        ingest, raw, ...), so that a change in the machine's load between runs falls on all
        three alike and their ratios hold."""
        kinds = [k for k in ("raw", "raw-shaped", "sqlite-utils", "ingest", "ingest-1")
                 if self.wanted(k)]
        if not kinds:
            return
        raw_db, su_db, lines = self.work / "raw.db", self.work / "su.db", self.work / "all.jsonl"
        count = nbytes = 0
        if "sqlite-utils" in kinds:
            log("preparing the input of sqlite-utils insert --nl")
            count, nbytes = baselines.sqlite_utils_lines(folder, lines)
        plans = {
            "raw": ("raw", {"corpus": str(folder), "db": str(raw_db)}, raw_db),
            "raw-shaped": ("raw", {"corpus": str(folder), "db": str(raw_db), "shaped": True},
                           raw_db),
            "sqlite-utils": ("sqlite-utils", {"db": str(su_db), "file": str(lines)}, su_db),
            "ingest": ("ingest", {"db": str(db), "paths": [str(folder)]}, db),
            "ingest-1": ("ingest", {"db": str(db), "paths": [str(folder)], "jobs": 0}, db),
        }
        runs: dict[str, list[Run]] = {k: [] for k in kinds}
        for n in range(self.args.repeat):
            for kind in kinds:
                name, stage_args, target = plans[kind]
                fresh(target)
                runs[kind].append(stage(name, stage_args))
                log(f"  {kind} run {n + 1}/{self.args.repeat}: "
                    f"{runs[kind][-1].result['seconds']:.2f} s, {runs[kind][-1].rss_mb:.0f} MB")
        if "raw" in runs:
            first = runs["raw"][0].result
            self.add("raw", runs["raw"], events=first["events"], size=self.manifest.bytes,
                     note=f"parse with {first['parser']}, executemany, key order, "
                     "one transaction per file")
        if "raw-shaped" in runs:
            self.add("raw-shaped", runs["raw-shaped"], events=runs["raw-shaped"][0].result[
                "events"], size=self.manifest.bytes,
                note="the raw limit with ingest's insert tricks: None bound directly, rare GC "
                "passes, 16 KB pages, the heap's top kept (a reference)")
        if "sqlite-utils" in runs:
            self.add("sqlite-utils", runs["sqlite-utils"], events=count, size=nbytes,
                     note="JSONL records only, malformed lines left out")
        for kind, note in (("ingest", "default --jobs"),
                           ("ingest-1", "--jobs 0: folded in the ingest process")):
            if kind in runs:
                first = runs[kind][0].result
                self.add(kind, runs[kind], events=first["events"], size=first["bytes"],
                         note=f"{note} ({first['workers']} workers)")
        fresh(raw_db, su_db)
        lines.unlink(missing_ok=True)

    def incremental(self, db: Path) -> None:
        """Ingest after ``--append`` % more events, and after ``--append-more`` %: the first
        against a full ingest's cost per MB, the two together for the cost of the bytes
        alone (the cost of looking at every file is the same in both). The two take turns
        (``--incremental-repeat`` rounds), so that a drift in the machine's speed falls on
        both alike."""
        base = self.work / "base.db"
        shutil.copyfile(db, base)
        kinds = (("incremental", self.args.append), ("incremental-more", self.args.append_more))
        turns = self.take_turns(
            [(f"{percent:.3g}% more", base, self.corpus, self.manifest, percent)
             for _, percent in kinds], self.args.incremental_repeat)
        for name, percent in kinds:
            runs, appended = turns[f"{percent:.3g}% more"]
            self.add(name, runs, events=runs[0].result["events"], size=appended,
                     note=f"{percent}% more events appended to every JSONL file")
        fresh(base)

    def take_turns(
        self, plans: list[tuple[str, Path, Path, generate.Manifest, float]], rounds: int
    ) -> dict[str, tuple[list[Run], int]]:
        """``rounds`` rounds of appended ingests, one for each plan (label, database, corpus,
        its manifest, percent appended) in every round, so that a drift in the machine's speed
        falls on every plan alike; each plan's runs and the bytes appended."""
        runs: dict[str, list[Run]] = {label: [] for label, *_ in plans}
        appended: dict[str, int] = {}
        for n in range(rounds):
            for label, base, folder, manifest, percent in plans:
                run, appended[label] = self.appended_run(base, folder, manifest, percent)
                runs[label].append(run)
                log(f"  {label}, run {n + 1}: {run.result['seconds']:.2f} s")
        return {label: (runs[label], appended[label]) for label in appended}

    def appended_run(self, base: Path, folder: Path, manifest: generate.Manifest,
                     percent: float) -> tuple[Run, int]:
        """One ingest into a fresh copy of ``base`` (on disk before it starts) after
        ``percent`` % more events were appended to ``folder``; and the bytes appended."""
        inc = self.work / "incremental.db"
        fresh(inc)
        copy_to_disk(base, inc)
        appended = generate.append(folder, percent)
        try:
            run = stage("ingest", {"db": str(inc), "paths": [str(folder)]})
        finally:
            generate.restore(folder, manifest)
            fresh(inc)
        return run, appended

    def rss_scaling(self) -> None:
        """Peak RSS of a full ingest as the input grows; then, into each of those databases,
        the same ``--grow-events`` events appended: what an incremental ingest costs as the
        database grows. The appended ingests take turns between the sizes (``--grow-repeat``
        rounds), so that a drift in the machine's speed falls on every size alike."""
        grow = self.args.grow_events
        bases = []
        for events in self.args.rss_sizes:
            folder, manifest = corpus(self.args.data, events, self.args.seed)
            db = self.work / f"rss-{events}.db"
            log(f"peak RSS at {events:,} events")
            run = stage("ingest", {"db": str(db), "paths": [str(folder)]})
            figure = Figure(f"ingest {events:,}", [run], run.result["events"], manifest.bytes)
            self.rss.append((events, figure))
            bases.append((events, db, folder, manifest))
        labels = {events: f"{grow:,} events more into the database of {events:,}"
                  for events, *_ in bases}
        turns = self.take_turns(
            [(labels[events], db, folder, manifest, grow / events * 100)
             for events, db, folder, manifest in bases], self.args.grow_repeat if grow else 0)
        for events, *_ in bases:
            if labels[events] in turns:
                runs, appended = turns[labels[events]]
                self.grown.append((events, Figure(
                    f"incremental into {events:,}", runs, runs[0].result["events"], appended,
                    f"{grow:,} events appended over the JSONL files, into the database of "
                    f"{events:,}")))
        fresh(*(db for _, db, *_ in bases))

    def add(self, name: str, runs: list[Run], events: int | None = None,
            size: int | None = None, note: str = "") -> None:
        self.figures[name] = Figure(name, runs, events, size, note)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


# --- the report --------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for package in ("agent-ledger", "msgspec", "orjson", "sqlite-utils", "datasette"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    memory = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.system()} {platform.machine()}, {cpu}",
        "cores": str(os.cpu_count()),
        "memory": memory,
        "load average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        **versions,
    }


def _num(value: float | None, digits: int = 0) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")


class Report:
    def __init__(self, bench: Bench) -> None:
        self.b = bench
        self.rows: list[tuple[str, str, str, str, str, str]] = []
        self.numbers: dict[str, Any] = {}

    def target(self, figure: str, value: str, baseline: str, ratio: str, target: str,
               ok: bool | None) -> None:
        self.rows.append((figure, value, baseline, ratio, target, verdict(ok)))

    def build(self) -> str:
        f = self.b.figures
        ingest, raw, su = f.get("ingest"), f.get("raw"), f.get("sqlite-utils")
        alone = f.get("ingest-1")
        for base, label, goal in ((raw, "raw limit", 0.7), (su, "sqlite-utils insert --nl", 4)):
            for fig, name, target in ((ingest, "full ingest", goal),
                                      (alone, "(reference) full ingest, --jobs 0,", None)):
                if fig and base:
                    r = fig.events_per_s / base.events_per_s
                    cpu = (base.cpu_seconds / base.events) / (fig.cpu_seconds / fig.events)
                    self.target(f"{name} vs {label}", f"{_num(fig.events_per_s)} events/s",
                                f"{_num(base.events_per_s)} events/s",
                                f"{r:.2f}x (CPU time: {cpu:.2f}x)",
                                f">= {target}x" if target else "",
                                r >= target if target else None)
        shaped = f.get("raw-shaped")
        for fig, name in ((ingest, "full ingest"), (alone, "full ingest, --jobs 0,")):
            if fig and shaped:
                r = fig.events_per_s / shaped.events_per_s
                self.target(f"(reference) {name} vs the raw limit with ingest's insert tricks "
                            "(None bound directly, rare GC passes, 16 KB pages, "
                            "the heap's top kept)",
                            f"{_num(fig.events_per_s)} events/s",
                            f"{_num(shaped.events_per_s)} events/s", f"{r:.2f}x", "", None)
        if ingest:
            self.target("full ingest peak memory: the ingest and its workers together (PSS)",
                        f"{ingest.tree_mb:.0f} MB",
                        f"the ingest process alone: {ingest.rss_mb:.0f} MB RSS", "",
                        "< 100 MB", ingest.tree_mb < 100)
        if len(self.b.rss) >= 2:
            # Flat: the largest input needs no more than the one before it (a file smaller
            # than one batch of lines needs less, so the smallest size is shown, not judged).
            peaks = [fig.tree_mb for _, fig in self.b.rss]
            (small, a), (large, b) = self.b.rss[-2], self.b.rss[-1]
            r = b.tree_mb / a.tree_mb
            sizes = " / ".join(f"{e // 1000:,}k" for e, _ in self.b.rss)
            self.target(f"peak memory (with workers) at {sizes} events",
                        " / ".join(f"{p:.0f} MB" for p in peaks), "",
                        f"{r:.2f}x from {small // 1000:,}k to {large // 1000:,}k",
                        "< 100 MB, flat (<= 1.25x)", max(peaks) < 100 and r <= 1.25)
        if len(self.b.grown) >= 2:
            # As the database grows, the same new events should cost the same.
            (small, a), (large, b) = self.b.grown[-2], self.b.grown[-1]
            r = b.seconds / a.seconds
            cpu = b.cpu_seconds / a.cpu_seconds
            sizes = " / ".join(f"{e // 1000:,}k" for e, _ in self.b.grown)
            self.target(f"incremental ingest of the same {self.b.args.grow_events:,} events "
                        f"into databases of {sizes} events",
                        " / ".join(f"{fig.seconds:.2f} s" for _, fig in self.b.grown), "",
                        f"{r:.2f}x from {small // 1000:,}k to {large // 1000:,}k "
                        f"(CPU time: {cpu:.2f}x)", "flat (<= 1.25x)", r <= 1.25)
        reingest = f.get("reingest")
        if reingest and ingest:
            r = reingest.seconds / ingest.seconds
            self.target("no-op re-ingest", f"{reingest.seconds:.3f} s",
                        f"{ingest.seconds:.2f} s (full)", f"{r:.2%}", "< 2%", r < 0.02)
        # Appended lines are folded in the ingest process (workers take only new files), so
        # the cost of a full ingest's bytes to hold them to is the one-process ingest's.
        per_byte = alone or ingest
        inc = f.get("incremental")
        if inc and per_byte and reingest and inc.bytes and per_byte.bytes:
            # Beyond the fixed cost of looking at every file (the no-op re-ingest), the new
            # bytes should cost what bytes cost in a full ingest.
            per_mb = (inc.seconds - reingest.seconds) / (inc.bytes / MB)
            r = per_mb / per_byte.seconds * (per_byte.bytes / MB)
            cpu = ((inc.cpu_seconds - reingest.cpu_seconds) / inc.bytes) / (
                per_byte.cpu_seconds / per_byte.bytes)
            self.target("incremental ingest, beyond the no-op (s per new MB)",
                        f"{inc.seconds:.2f} s for {inc.bytes / MB:.1f} MB",
                        self.per_mb(per_byte, ingest, per_mb),
                        f"{r:.2f}x (CPU time: {cpu:.2f}x)", "proportional (<= 2x)", r <= 2)
        more = f.get("incremental-more")
        if inc and more and per_byte and more.bytes and inc.bytes and per_byte.bytes:
            # Both appends look at the same files; what the larger costs beyond the smaller
            # is what its extra bytes cost.
            per_mb = (more.seconds - inc.seconds) / ((more.bytes - inc.bytes) / MB)
            r = per_mb / per_byte.seconds * (per_byte.bytes / MB)
            self.target("incremental ingest, cost of the new bytes (s per MB between "
                        f"{self.b.args.append}% and {self.b.args.append_more}% appended)",
                        f"{per_mb:.3f} s/MB", self.per_mb(per_byte, ingest, per_mb),
                        f"{r:.2f}x", "proportional (<= 2x)", r <= 2)
        whatif = f.get("what-if")
        if whatif:
            self.target("what-if on the stored events", f"{whatif.seconds:.2f} s", "", "",
                        "< 5 s", whatif.seconds < 5)
        elif "what-if" in self.b.missing:
            self.target("what-if on the stored events", self.b.missing["what-if"], "", "",
                        "< 5 s", None)
        for page, found in self.b.pages.items():
            if "median_ms" not in found:
                self.target(f"page {page}", f"not available ({found['status']})", "", "",
                            "< 300 ms", None)
                continue
            ok = found["status"] == 200 and found["median_ms"] < 300
            status = "" if found["status"] == 200 else f" (HTTP {found['status']})"
            self.target(f"page {page}", f"{found['median_ms']:.0f} ms{status}", "", "",
                        "< 300 ms", ok)
        real_bench.targets(self)
        return self.render()

    @staticmethod
    def per_mb(per_byte: Figure, ingest: Figure | None, seconds_per_mb: float) -> str:
        """The full ingest's seconds per MB an incremental one is held to, and (if that was
        the one-process ingest) the default's beside it, for the ratio to it."""
        text = f"{per_byte.seconds / (per_byte.bytes / MB):.3f} s/MB (full"
        if ingest is None or ingest is per_byte:
            return text + ")"
        default = ingest.seconds / (ingest.bytes / MB)
        return (text + f", --jobs 0; with workers {default:.3f} s/MB, "
                f"{seconds_per_mb / default:.2f}x)")

    def render(self) -> str:
        facts = machine()
        m = self.b.manifest
        out = [
            "# agent-ledger benchmark",
            "",
            f"{facts['date']}, {facts['machine']}, {facts['cores']} cores, {facts['memory']}.",
            "",
            "| machine | |",
            "|---|---|",
            *(f"| {k} | {v} |" for k, v in facts.items()),
            "",
            *([f"Corpus: {m.lines:,} events ({m.malformed} malformed lines) in "
               f"{m.native_files + m.gate_files + m.trace_files} files ({m.native_files} "
               f"native, {m.gate_files} gate, {m.trace_files} trace), {m.bytes / MB:.0f} MB, "
               f"seed {m.seed}."] if m else []),
            *real_bench.corpus_lines(self.b.real),
            f"Median of {self.b.args.repeat} runs ({self.b.args.incremental_repeat} for the "
            "incremental and no-op rows); every run is listed at the end.",
            "",
            "## Targets",
            "",
            "| figure | value | baseline | ratio | target | met? |",
            "|---|---|---|---|---|---|",
            *("| " + " | ".join(row) + " |" for row in self.rows),
            "",
            "## Measurements",
            "",
            "| stage | median s | CPU s | events/s | MB/s | peak RSS | with workers (PSS) "
            "| runs | note |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        figures = [*self.b.figures.values(), *(fig for _, fig in self.b.rss),
                   *(fig for _, fig in self.b.grown)]
        for fig in figures:
            out.append(
                f"| {fig.name} | {fig.seconds:.3f} | {fig.cpu_seconds:.3f} | "
                f"{_num(fig.events_per_s)} | {_num(fig.mb_per_s, 1)} | {fig.rss_mb:.0f} MB | "
                f"{fig.tree_mb:.0f} MB | {len(fig.runs)} | {fig.note} |"
            )
        for name, why in self.b.missing.items():
            out.append(f"| {name} | | | | | | | | {why} |")
        out += ["", "## Every run", "", "| stage | seconds, run by run | peak with workers, "
                "run by run |", "|---|---|---|"]
        out += [f"| {fig.name} | " + " / ".join(f"{r.result['seconds']:.3f}" for r in fig.runs)
                + " | " + " / ".join(f"{r.tree_mb:.0f}" for r in fig.runs) + " MB |"
                for fig in figures]
        self.numbers = {
            "machine": facts,
            "manifest": vars(m) if m else None,
            "real_corpus": ({k: v for k, v in vars(self.b.real.corpus).items() if k != "sizes"}
                            if self.b.real and self.b.real.corpus else None),
            "figures": {fig.name: {"seconds": [r.result["seconds"] for r in fig.runs],
                                   "median_s": fig.seconds, "cpu_s": fig.cpu_seconds,
                                   "events": fig.events,
                                   "bytes": fig.bytes, "peak_rss_mb": fig.rss_mb,
                                   "peak_tree_pss_mb": fig.tree_mb,
                                   "peak_tree_pss_mb_runs": [r.tree_mb for r in fig.runs]}
                        for fig in figures},
            "pages": self.b.pages,
            "missing": self.b.missing,
        }
        return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--append", type=float, default=1.0,
                        help="percent of events appended for the incremental ingest")
    parser.add_argument("--append-more", type=float, default=5.0,
                        help="a larger append, for the cost of the new bytes alone")
    parser.add_argument("--requests", type=int, default=5, help="requests per dashboard page")
    parser.add_argument("--page", action="append", default=[], help="another page to time")
    parser.add_argument("--whatif-option", dest="whatif_options", action="append",
                        help=f"options for what-if (default: {' '.join(WHATIF_OPTIONS)})")
    parser.add_argument("--rss-sizes", default="100000,1000000,3000000",
                        help="corpus sizes for the peak-RSS scaling stage")
    parser.add_argument("--grow-events", type=int, default=10_000,
                        help="events appended into each database of --rss-sizes (0: none)")
    parser.add_argument("--incremental-repeat", type=int, default=5,
                        help="rounds of the --append and --append-more ingests, taking turns")
    parser.add_argument("--grow-repeat", type=int, default=5,
                        help="rounds of those appended ingests, taking turns between sizes")
    parser.add_argument("--skip", action="append", default=[], choices=STAGES)
    parser.add_argument("--real-only", action="store_true",
                        help="only the real-log stages (ccusage, real-*, varied)")
    parser.add_argument("--quick", action="store_true",
                        help="only the real-log stages, on a 26 MB corpus and 50,000 varied "
                        "seed 002 events (a few minutes)")
    parser.add_argument("--data", type=Path, default=HERE / "data",
                        help="where corpora are generated and kept (default bench/data)")
    parser.add_argument("--out", type=Path, default=HERE / "results",
                        help="folder for latest.md and latest.json ('-': write nothing)")
    args = parser.parse_args()
    args.rss_sizes = [int(x) for x in args.rss_sizes.split(",") if x]
    if args.quick or args.real_only:
        args.skip += SEED_STAGES
    args.data.mkdir(parents=True, exist_ok=True)
    bench = Bench(args)
    try:
        bench.run()
    finally:
        bench.close()
    report = Report(bench)
    text = report.build()
    print(text)
    if str(args.out) != "-":
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "latest.md").write_text(text)
        (args.out / "latest.json").write_text(json.dumps(report.numbers, indent=1) + "\n")
        log(f"wrote {args.out / 'latest.md'}")


if __name__ == "__main__":
    main()
