"""The benchmark's real-log stages (issue 22), on corpora shaped like what users ingest.

* ``ccusage``: ``agent-ledger ingest DB claude/projects`` into a fresh database against
  ``ccusage claude daily --json --offline`` over the same files, both timed as whole commands
  from a shell (interpreter start and imports included); the same for Codex as a reference.
* ``real-raw``: ingest of the whole corpus (Claude Code and Codex, in-process, the work only)
  against the raw line limit of the same files (:func:`raw_lines.raw_lines`).
* ``real-noop``: ``agent-ledger ingest DB FILE...`` naming every Claude Code file (500 by
  default) of a database that holds them all, as a whole command, against a ccusage run over
  the same files.
* ``real-incremental``: the same after a few lines were appended to a few files
  (:func:`real_corpus.grow`), into a fresh copy of that database each time, against ccusage.
* ``real-memory``: peak memory (the ingest and its workers, PSS) of the in-process ingest of a
  corpus half as large and of the whole one.
* ``varied``: seed 002 ledgers with varied details: ingest against the raw limit of the same
  shape and against ``sqlite-utils insert --nl``.

Within a stage the runs of ours and of the baselines take turns, so that the machine's drift
falls on both; each run is kept and reported, and every ratio is also given round by round.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import baselines
import ccusage
import generate
import installed
import real_corpus
from harness import MB, Figure, Run, copy_to_disk, fresh, log, stage
from resident import Resident

REAL_STAGES = ("ccusage", "real-raw", "real-noop", "real-incremental", "real-memory", "varied")


@dataclass(frozen=True)
class Sizes:
    claude_mb: float
    codex_mb: float
    claude_files: int
    varied_events: int
    varied_files: int


FULL = Sizes(100, 30, 500, 200_000, 20)
QUICK = Sizes(20, 6, 500, 50_000, 20)  # seed 002 varied: a quarter of the 200,000
GROWN_FILES = 5  # files a few lines are appended to, for the incremental stage


def agent_ledger(data: Path) -> dict[str, Any]:
    """The command a user runs, as a ``command`` stage's arguments: the console script of
    agent-ledger installed from its wheel into ``data`` (:mod:`installed`), with no
    ``PYTHONPATH`` (which would put a working tree before the installed package)."""
    return {"argv": [str(installed.console_script(data))], "unset": ["PYTHONPATH"]}


def editable() -> dict[str, Any]:
    """The same from the development checkout: the console script beside this interpreter
    (an editable install), or ``-m ledger``, with this environment's ``PYTHONPATH``."""
    script = Path(sys.executable).with_name("agent-ledger")
    return {"argv": [str(script)] if script.exists() else [sys.executable, "-m", "ledger"]}


def real_logs(data: Path, claude_mb: float, codex_mb: float, files: int,
              seed: int) -> tuple[Path, real_corpus.Manifest]:
    """The real-log-shaped corpus (generated once, then reused), at its generated size."""
    folder = data / f"real-{claude_mb:g}mb-{codex_mb:g}mb-{files}f-seed{seed}"
    manifest = real_corpus.Manifest.load(folder)
    if manifest is None:
        shutil.rmtree(folder, ignore_errors=True)
        log(f"generating {claude_mb:g} MB of Claude Code and {codex_mb:g} MB of Codex logs "
            f"into {folder}")
        manifest = real_corpus.generate(folder, claude_mb, codex_mb, files, seed)
    real_corpus.restore(folder, manifest)
    return folder, manifest


def varied_ledgers(data: Path, events: int, files: int,
                   seed: int) -> tuple[Path, generate.Manifest]:
    folder = data / f"varied-{events}-{files}f-seed{seed}"
    manifest = generate.Manifest.load(folder)
    if manifest is None:
        shutil.rmtree(folder, ignore_errors=True)
        log(f"generating {events:,} seed 002 events with varied details into {folder}")
        manifest = generate.varied_gate_corpus(folder, events, files, seed)
    return folder, manifest


class RealLogs:
    """Runs the real-log stages for a :class:`run.Bench` and adds their figures to it."""

    def __init__(self, bench: Any) -> None:
        self.bench, self.args = bench, bench.args
        self.sizes: Sizes = QUICK if self.args.quick else FULL
        self.work: Path = bench.work
        self.ccusage_note = ""
        self.corpus: real_corpus.Manifest | None = None
        self.varied: generate.Manifest | None = None

    def wanted(self, name: str) -> bool:
        return name not in self.args.skip

    def run(self) -> None:
        s, data, seed = self.sizes, self.args.data, self.args.seed
        folder, manifest = real_logs(data, s.claude_mb, s.codex_mb, s.claude_files, seed)
        self.corpus = manifest
        claude = manifest.files(folder, "claude")
        log(f"real-log corpus: {len(manifest.sizes)} files ({len(claude)} Claude Code), "
            f"{manifest.lines:,} lines, {manifest.bytes / MB:.0f} MB")
        exe = None
        if any(self.wanted(n) for n in ("ccusage", "real-noop", "real-incremental")):
            exe, self.ccusage_note = ccusage.install(data / "node")
            log(f"ccusage: {self.ccusage_note}")
            if exe is None:
                self.bench.missing["ccusage"] = self.ccusage_note
        db = self.work / "real-claude.db"
        self.whole_ingests(folder, manifest, exe, db)
        if not db.exists():
            stage("command", self.ingest_argv(db, [folder / "claude" / "projects"]))
        if self.wanted("real-noop"):
            self.noop(folder, claude, exe, db)
        if self.wanted("real-incremental"):
            self.incremental(folder, manifest, claude, exe, db)
        if self.wanted("real-memory"):
            self.memory()
        if self.wanted("varied"):
            self.varied_stage()

    # --- the stages ----------------------------------------------------------------------

    def ingest_argv(self, db: Path, paths: list[Path]) -> dict[str, Any]:
        command = agent_ledger(self.args.data)
        command["argv"] += ["ingest", str(db), *map(str, paths), "--json", "--no-progress"]
        return {**command, "json_summary": True}

    def raw_lines_argv(self, db: Path, folder: Path) -> dict[str, Any]:
        """``bench/raw_lines.py`` as a whole command, by the installed package's interpreter:
        the cheapest Python process that reads the same logs (the first-ingest row's
        ceiling)."""
        python = installed.console_script(self.args.data).with_name("python")
        script = Path(__file__).resolve().with_name("raw_lines.py")
        return {"argv": [str(python), str(script), str(db), str(folder)],
                "unset": ["PYTHONPATH"]}

    def ccusage_args(self, exe: Path, folder: Path, agent: str) -> dict[str, Any]:
        dirs = {"claude": (folder / "claude", None), "codex": (None, folder / "codex")}[agent]
        return {"argv": ccusage.argv(exe, agent),
                "env": ccusage.env(*dirs, self.work / "ccusage-home")}

    def whole_ingests(self, folder: Path, manifest: real_corpus.Manifest, exe: Path | None,
                      db: Path) -> None:
        """Rounds of: ccusage and our ingest on Claude Code, then on Codex (whole commands);
        the raw line limit and the in-process ingest of everything."""
        plans: dict[str, tuple[str, dict[str, Any], Path | None]] = {}
        claude_mb = sum(s for n, s in manifest.sizes.items() if n.startswith("claude"))
        codex_mb = manifest.bytes - claude_mb
        if self.wanted("ccusage"):
            codex_db = self.work / "real-codex.db"
            plans["real: ingest, Claude Code (command)"] = (
                "command", self.ingest_argv(db, [folder / "claude" / "projects"]), db)
            if exe is not None:
                plans["real: ccusage, Claude Code"] = (
                    "command", self.ccusage_args(exe, folder, "claude"), None)
                raw_cmd_db = self.work / "real-raw-command.db"
                plans["real: raw line limit, Claude Code (command)"] = (
                    "command", self.raw_lines_argv(raw_cmd_db, folder / "claude" / "projects"),
                    raw_cmd_db)
                plans["real: ingest, Codex (command)"] = (
                    "command", self.ingest_argv(codex_db, [folder / "codex" / "sessions"]),
                    codex_db)
                plans["real: ccusage, Codex"] = (
                    "command", self.ccusage_args(exe, folder, "codex"), None)
        if self.wanted("real-raw"):
            every = [str(p) for p in manifest.files(folder)]
            raw_db, all_db = self.work / "real-raw.db", self.work / "real-all.db"
            plans["real: raw line limit"] = ("raw-lines", {"paths": every, "db": str(raw_db)},
                                             raw_db)
            plans["real: ingest, everything"] = ("ingest", {"db": str(all_db), "paths": [
                str(folder / "claude" / "projects"), str(folder / "codex" / "sessions")]},
                all_db)
        sizes = {"Claude Code": claude_mb, "Codex": codex_mb}
        for name, runs in self.take_turns(plans, self.args.repeat).items():
            size = next((v for k, v in sizes.items() if k in name), manifest.bytes)
            self.bench.add(name, runs, events=runs[0].result.get("events"), size=size,
                           note=note_for(name, runs))
        fresh(*(target for _, _, target in plans.values()
                if target is not None and target != db))

    def noop(self, folder: Path, claude: list[Path], exe: Path | None, db: Path) -> None:
        ingest = ["ingest", str(db), *map(str, claude)]
        plans: dict[str, tuple[str, dict[str, Any], Path | None]] = {
            f"real: no-op re-ingest of {len(claude)} files ({kind})": (
                "command", {**command, "argv": command["argv"] + ingest}, None)
            for kind, command in (("command", agent_ledger(self.args.data)),
                                  ("editable install", editable()))}
        if exe is not None:
            plans["real: ccusage, no-op rounds"] = (
                "command", self.ccusage_args(exe, folder, "claude"), None)
        for name, runs in self.take_turns(plans, self.args.incremental_repeat).items():
            self.bench.add(name, runs, note=note_for(name, runs))

    def incremental(self, folder: Path, manifest: real_corpus.Manifest, claude: list[Path],
                    exe: Path | None, db: Path) -> None:
        """Each round: a few lines appended to a few files, then our ingest into a fresh copy
        of the database (on disk first) and ccusage over the same files; then cut back."""
        copy = self.work / "real-incremental.db"
        ours = f"real: {GROWN_FILES} files grown, ingest (command)"
        work = f"real: {GROWN_FILES} files grown, ingest (in-process, imports done)"
        warm = f"real: {GROWN_FILES} files grown, ingest --resident (command)"
        runs: dict[str, list[Run]] = {ours: [], work: [], warm: [],
                                      "real: ccusage, incremental rounds": []}
        server = self.resident_server(copy, db)
        added = lines = 0
        for n in range(self.args.incremental_repeat):
            fresh(copy)
            copy_to_disk(db, copy)
            added, lines = real_corpus.grow(folder, GROWN_FILES, seed=100 + n)
            runs[ours].append(stage("command", self.ingest_argv(copy, claude)))
            fresh(copy)
            copy_to_disk(db, copy)
            runs[work].append(stage("ingest", {"db": str(copy), "paths": list(map(str, claude)),
                                               "imported": True}))
            fresh(copy)
            copy_to_disk(db, copy)
            command = self.ingest_argv(copy, claude)
            command["argv"].append("--resident")
            runs[warm].append(stage("command", {**command, "env": server.env}))
            if exe is not None:
                runs["real: ccusage, incremental rounds"].append(
                    stage("command", self.ccusage_args(exe, folder, "claude")))
            real_corpus.restore(folder, manifest)
            log(f"  incremental round {n + 1}: "
                + ", ".join(f"{k.removeprefix('real: ')} {v[-1].result['seconds']:.3f} s"
                            for k, v in runs.items() if v))
        fresh(copy)
        server.stop()
        for name, kept in runs.items():
            if kept:
                self.bench.add(name, kept, size=added,
                               note=f"a response appended to {GROWN_FILES} of {len(claude)} "
                               f"files each round (the last: {lines} lines, {added:,} bytes)"
                               if name == ours
                               else "the same ingest in a process that imported the command "
                               "first: its work, without Python's start and the imports"
                               if name == work
                               else "the same ingest answered by its resident server "
                               "(docs/resident.md), started before the rounds"
                               if name == warm
                               else note_for(name, kept))

    def resident_server(self, copy: Path, db: Path) -> Resident:
        """The resident server the ``--resident`` rounds call, started before them (its start,
        which its warm-up makes as slow as a first ingest, is not a re-run's cost)."""
        script = installed.console_script(self.args.data)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",
                                                                "PYTHONDONTWRITEBYTECODE")}
        server = Resident(script, self.work, env)
        fresh(copy)
        copy_to_disk(db, copy)
        server.start(copy)
        return server

    def memory(self) -> None:
        """The in-process ingest's peak memory on a corpus half the size (the whole one's
        runs come from ``real-raw``; made here if that stage was skipped)."""
        s, data, seed = self.sizes, self.args.data, self.args.seed
        for name, scale in (("real: memory, half the corpus", 0.5),
                            ("real: memory, the corpus", 1.0)):
            if name == "real: memory, the corpus" and "real: ingest, everything" in (
                    self.bench.figures):
                continue
            folder, manifest = real_logs(data, s.claude_mb * scale, s.codex_mb * scale,
                                         round(s.claude_files * scale), seed)
            target = self.work / "real-memory.db"
            runs = []
            for _ in range(2):
                fresh(target)
                runs.append(stage("ingest", {"db": str(target), "paths": [
                    str(folder / "claude" / "projects"), str(folder / "codex" / "sessions")]}))
            fresh(target)
            log(f"  {name}: {max(r.tree_mb for r in runs):.0f} MB")
            self.bench.add(name, runs, size=manifest.bytes,
                           note=f"{manifest.bytes / MB:.0f} MB, in-process ingest")

    def varied_stage(self) -> None:
        s = self.sizes
        folder, manifest = varied_ledgers(self.args.data, s.varied_events, s.varied_files, 2)
        self.varied = manifest
        lines = self.work / "varied.jsonl"
        count, nbytes = baselines.sqlite_utils_lines(folder, lines)
        raw_db, su_db, db = (self.work / f"varied-{n}.db" for n in ("raw", "su", "ingest"))
        plans: dict[str, tuple[str, dict[str, Any], Path | None]] = {
            "varied: raw limit": ("raw", {"corpus": str(folder), "db": str(raw_db)}, raw_db),
            "varied: sqlite-utils insert --nl": ("sqlite-utils", {"db": str(su_db),
                                                                  "file": str(lines)}, su_db),
            "varied: ingest": ("ingest", {"db": str(db), "paths": [str(folder)]}, db),
        }
        for name, runs in self.take_turns(plans, self.args.repeat).items():
            events = count if "sqlite-utils" in name else runs[0].result["events"]
            self.bench.add(name, runs, events=events,
                           size=nbytes if "sqlite-utils" in name else manifest.bytes,
                           note=note_for(name, runs))
        fresh(raw_db, su_db, db)
        lines.unlink(missing_ok=True)

    @staticmethod
    def take_turns(plans: dict[str, tuple[str, dict[str, Any], Path | None]],
                   rounds: int) -> dict[str, list[Run]]:
        """``rounds`` rounds, each running every plan once (its database made fresh first)."""
        runs: dict[str, list[Run]] = {name: [] for name in plans}
        for n in range(rounds):
            for name, (kind, args, target) in plans.items():
                if target is not None:
                    fresh(target)
                runs[name].append(stage(kind, args))
                log(f"  {name} run {n + 1}/{rounds}: {runs[name][-1].result['seconds']:.3f} s, "
                    f"{runs[name][-1].tree_mb:.0f} MB")
        return runs


def note_for(name: str, runs: list[Run]) -> str:
    result = runs[0].result
    if "ccusage" in name:
        agent = "codex" if "Codex" in name else "claude"
        return f"ccusage {ccusage.VERSION}: ccusage {agent} {' '.join(ccusage.COMMAND)}"
    if "command" in name:
        return "whole command from a shell, Python's start included"
    return f"parser {result['parser']}" if "parser" in result else ""


# --- targets ---------------------------------------------------------------------------------


def per_round(base: Figure, ours: Figure) -> str:
    """Each round's ratio of base seconds to ours, in order."""
    return " / ".join(f"{b.result['seconds'] / o.result['seconds']:.2f}x"
                      for b, o in zip(base.runs, ours.runs, strict=False))


def faster(report: Any, label: str, ours: str, base: str, goal: float | None) -> None:
    """A target row: ``base`` seconds / ``ours`` seconds (>= goal), medians and every round."""
    f, missing = report.b.figures, report.b.missing
    if ours in f and base in f:
        r = f[base].seconds / f[ours].seconds
        cpu = f[base].cpu_seconds / f[ours].cpu_seconds
        report.target(label, f"{f[ours].seconds:.3f} s", f"{f[base].seconds:.3f} s",
                      f"{r:.2f}x (rounds: {per_round(f[base], f[ours])}; CPU time: {cpu:.2f}x)",
                      f">= {goal}x" if goal else "", r >= goal if goal else None)
    elif ours in f and "ccusage" in base and "ccusage" in missing:
        report.target(label, f"{f[ours].seconds:.3f} s", missing["ccusage"], "",
                      f">= {goal}x" if goal else "", None)


def throughput(report: Any, label: str, ours: str, base: str, goal: float | None,
               unit: str) -> None:
    """A target row: our events/s (or MB/s) over the baseline's, medians and every round."""
    f = report.b.figures
    if ours not in f or base not in f:
        return
    a, b = f[ours], f[base]
    mine, theirs = (a.mb_per_s, b.mb_per_s) if unit == "MB/s" else (a.events_per_s,
                                                                    b.events_per_s)
    if not mine or not theirs:
        return
    # the same work in both, so a round's ratio of speeds is the inverse ratio of seconds
    work = (a.bytes / b.bytes) if unit == "MB/s" else (a.events / b.events)  # type: ignore[operator]
    rounds = " / ".join(f"{work * y.result['seconds'] / x.result['seconds']:.2f}x"
                        for x, y in zip(a.runs, b.runs, strict=False))
    r = mine / theirs
    cpu = work * b.cpu_seconds / a.cpu_seconds
    report.target(label, f"{mine:,.1f} {unit}", f"{theirs:,.1f} {unit}",
                  f"{r:.2f}x (rounds: {rounds}; CPU time: {cpu:.2f}x)",
                  f">= {goal}x" if goal else "", r >= goal if goal else None)


def targets(report: Any) -> None:
    """The real-log rows of the targets table."""
    f = report.b.figures
    faster(report, "real logs: ingest of Claude Code vs ccusage (whole commands)",
           "real: ingest, Claude Code (command)", "real: ccusage, Claude Code", 1.0)
    faster(report, "(ceiling) the raw line limit of the same Claude Code files as a whole "
           "command vs ccusage", "real: raw line limit, Claude Code (command)",
           "real: ccusage, Claude Code", None)
    faster(report, "(reference) real logs: ingest of Codex vs ccusage (whole commands)",
           "real: ingest, Codex (command)", "real: ccusage, Codex", None)
    throughput(report, "real logs: ingest vs the raw line limit (same files)",
               "real: ingest, everything", "real: raw line limit", 0.5, "MB/s")
    noops = [k for k in f if k.startswith("real: no-op re-ingest")]
    for noop in noops[1:]:  # (reference) the editable install's
        faster(report, "(reference) real logs: no-op re-ingest, editable install, vs ccusage",
               noop, "real: ccusage, no-op rounds", None)
    for noop in noops[:1]:  # the installed package's
        fig = f[noop]
        report.target(noop.removeprefix("real: ") + ", wall",
                      f"{fig.seconds * 1000:.0f} ms (runs: "
                      + " / ".join(f"{r.result['seconds'] * 1000:.0f}" for r in fig.runs)
                      + " ms)", "", "", "< 60 ms", fig.seconds < 0.060)
        faster(report, "real logs: no-op re-ingest vs ccusage over the same files", noop,
               "real: ccusage, no-op rounds", 5.0)
    grown = f"real: {GROWN_FILES} files grown, ingest (command)"
    if grown in f:
        faster(report, f"real logs: {GROWN_FILES} files grown by a few lines, ingest vs "
               "ccusage", grown, "real: ccusage, incremental rounds", 5.0)
    faster(report, f"real logs: {GROWN_FILES} files grown, ingest --resident vs ccusage",
           f"real: {GROWN_FILES} files grown, ingest --resident (command)",
           "real: ccusage, incremental rounds", 5.0)
    work = f.get(f"real: {GROWN_FILES} files grown, ingest (in-process, imports done)")
    if grown in f and work:
        whole = f[grown].seconds
        report.target(f"(reference) {GROWN_FILES} files grown: the command's start-up and "
                      "work (medians)",
                      f"{whole * 1000:.0f} ms = {(whole - work.seconds) * 1000:.0f}"
                      f" ms start-up + {work.seconds * 1000:.0f} ms work", "", "", "", None)
    half, whole = f.get("real: memory, half the corpus"), (
        f.get("real: ingest, everything") or f.get("real: memory, the corpus"))
    if half and whole:
        r = whole.tree_mb / half.tree_mb
        report.target("real logs: peak memory (ingest and workers, PSS) at half and the whole "
                      "corpus", f"{half.tree_mb:.0f} / {whole.tree_mb:.0f} MB", "",
                      f"{r:.2f}x", "< 100 MB, flat (<= 1.25x)",
                      whole.tree_mb < 100 and r <= 1.25)
    throughput(report, "seed 002, varied details: ingest vs the raw limit",
               "varied: ingest", "varied: raw limit", 0.5, "events/s")
    throughput(report, "seed 002, varied details: ingest vs sqlite-utils insert --nl",
               "varied: ingest", "varied: sqlite-utils insert --nl", 5.0, "events/s")
    throughput(report, "(ceiling) seed 002, varied details: the raw limit vs sqlite-utils "
               "insert --nl", "varied: raw limit", "varied: sqlite-utils insert --nl", None,
               "events/s")


def corpus_lines(real: RealLogs | None) -> list[str]:
    """What the report says of the real-log corpora."""
    if real is None or real.corpus is None:
        return []
    m = real.corpus
    claude = len(m.files(Path("."), "claude"))
    out = [f"Real-log corpus (bench/real_corpus.py, seed {m.seed}): {len(m.sizes)} files "
           f"({claude} Claude Code, {len(m.sizes) - claude} Codex), {m.lines:,} lines, "
           f"{m.bytes / MB:.0f} MB. ccusage: {real.ccusage_note or 'not run'}."]
    if real.varied is not None:
        v = real.varied
        out.append(f"Seed 002 ledgers with varied details: {v.lines:,} events "
                   f"({v.malformed} malformed) in {v.gate_files} files, {v.bytes / MB:.0f} MB.")
    return out

