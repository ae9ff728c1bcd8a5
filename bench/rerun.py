"""Benchmark: a re-run a user can feel (issue 22, item 3).

Builds a Claude Code data folder as ccusage looks for it (``CLAUDE_CONFIG_DIR/projects/
<project>/<session>.jsonl``): ``--files`` transcripts of real logs' shape, as
``bench/real_corpus.py`` makes them (``--megabytes`` in all). Ingests it
once, then times whole processes, as a user's shell starts them, taking turns:

- ``python``: ``python -c pass``, the interpreter's own start, for scale;
- ``noop``: ``agent-ledger ingest DB PROJECTS`` again, nothing new (the console script of
  the package installed from its wheel, as a user installs it: :mod:`installed`);
- ``noop editable`` (with ``--editable``): the same from the development checkout's editable
  install (its path finder's imports are added to every start of Python, some 15 ms here);
- ``ccusage``: ``ccusage claude daily --offline --json`` over the same folder (it reads
  every file again each run: it keeps nothing between runs);
- ``grown N``: the same ingest after a turn was appended to N of the files (5 and 50 by
  default; each run appends new turns), to show that its cost follows the new lines, not
  the files;
- ``noop (resident)``, ``grown N (resident)``: the same with ``--resident``, answered by a
  resident server (``docs/resident.md``) started before the timed rounds (its start, and its
  memory when idle, after the rounds and after ingesting the whole corpus, are reported
  apart; ``--no-resident`` leaves these out).

Then the grown ingests again inside this process, everything loaded once: the work alone.
Every run's figure is printed, then the medians and the ratio ccusage / noop (round by
round, and of the medians). ``--python`` names the interpreter of the console script: an
editable install (``pip install -e``, as a development checkout has) adds its path finder's
imports to every start of Python (pathlib and re, some 20 ms here), which an installed
package does not.

    .venv/bin/python bench/rerun.py                         # 500 files, 7 rounds
    .venv/bin/python bench/rerun.py --files 2000 --ccusage /tmp/ccu/node_modules/.bin/ccusage

ccusage is the one ``bench/ccusage.py`` installs (pinned, into ``bench/data/node/``, which git
ignores) unless ``--ccusage`` names another; without node or npm its runs are left out with a
note.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import ccusage  # noqa: E402
import installed  # noqa: E402
import real_corpus  # noqa: E402
from resident import Resident, timed  # noqa: E402


def corpus(folder: Path, files: int, megabytes: float, seed: int) -> Path:
    """``files`` Claude Code transcripts of real logs' shape (``bench/real_corpus.py``) under
    ``folder/claude/projects``; returns that folder."""
    real_corpus.generate(folder, claude_mb=megabytes, codex_mb=0, claude_files=files, seed=seed)
    return folder / "claude" / "projects"


class Grower:
    """Appends a turn to ``n`` transcripts, a different turn each time."""

    def __init__(self, folder: Path, seed: int) -> None:
        self.folder, self.seed = folder, seed

    def __call__(self, files: int) -> None:
        self.seed += 1
        real_corpus.grow(self.folder, files, self.seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7, help="Alternated runs of each kind.")
    parser.add_argument("--grown", type=int, action="append",
                        help="Files grown by a turn before each grown run (repeatable; "
                        "default 5 and 50).")
    parser.add_argument("--megabytes", type=float, default=26.0,
                        help="Size of the Claude Code transcripts in all.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ccusage", help="The ccusage command (default: the one "
                        "bench/ccusage.py installs into bench/data/node/).")
    parser.add_argument("--keep", type=Path, help="Build in this folder and keep it.")
    parser.add_argument("--editable", action="store_true",
                        help="Also time the no-op from the editable install of this checkout.")
    parser.add_argument("--no-resident", action="store_true",
                        help="Leave out the stages of ingest --resident.")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="rerun-"))
    shutil.rmtree(work / "claude", ignore_errors=True)
    (work / "ledger.db").unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    projects = corpus(work, args.files, args.megabytes, args.seed)
    grow = Grower(work, args.seed)
    size = sum(p.stat().st_size for p in projects.rglob("*.jsonl"))
    # As an installed package runs: from its bytecode (pip compiles it when it installs), so
    # the first ingest writes it, whatever PYTHONDONTWRITEBYTECODE says here.
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(work / "claude")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPATH", None)  # the installed package, not a working tree
    script = installed.console_script(ROOT / "bench" / "data")
    ours = [str(script), "ingest", str(work / "ledger.db"), str(projects)]
    first, _ = timed(ours, env)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; "
          f"{args.files} files, {size / 1e6:.1f} MB; first ingest {first:.0f} ms")
    grown = args.grown or [5, 50]
    kinds = {"python": [str(script.with_name("python")), "-c", "pass"], "noop": ours,
             **{f"grown {n}": ours for n in grown}}
    envs = {kind: env for kind in kinds}
    resident = None if args.no_resident else Resident(script, work, env)
    if resident is not None:
        resident.start(work / "ledger.db")
        kinds["noop (resident)"] = [*ours, "--resident"]
        kinds.update({f"grown {n} (resident)": [*ours, "--resident"] for n in grown})
        envs.update(dict.fromkeys(("noop (resident)", *(f"grown {n} (resident)"
                                                        for n in grown)), resident.env))
    if args.editable:  # this checkout's code, imported through the editable install's finder
        kinds["noop editable"] = [sys.executable, "-m", "ledger", *ours[1:]]
        envs["noop editable"] = {**env, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), str(ROOT / "plugins")])}
    exe, note = ((Path(args.ccusage), "given") if args.ccusage
                 else ccusage.install(ROOT / "bench" / "data" / "node"))
    if exe is not None and shutil.which(str(exe)):
        kinds["ccusage"] = ccusage.argv(exe, "claude")
        envs["ccusage"] = env
    else:
        print(f"ccusage: not run ({note})")
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for round_ in range(args.rounds):
        for kind, command in kinds.items():
            if kind.startswith("grown"):
                grow(int(kind.split()[1]))
            took, out = timed(command, envs[kind])
            times[kind].append(took)
            print(f"round {round_ + 1} {kind}: {took:.1f} ms"
                  + (f"  ({out.splitlines()[0]})" if command[1:3] == ours[1:3] else ""))
    medians = {kind: statistics.median(t) for kind, t in times.items()}
    report(times, medians)
    if resident is not None:
        resident.memory(work / "ledger.db", "after the rounds")
        resident.whole_corpus(projects)
        resident.stop()
    in_process(work / "ledger.db", projects, grow, args.rounds, (0, *sorted(set(grown))))
    if not args.keep:
        shutil.rmtree(work)


def report(times: dict[str, list[float]], medians: dict[str, float]) -> None:
    print("medians: " + ", ".join(f"{k} {v:.1f} ms" for k, v in medians.items()))
    if "ccusage" not in medians:
        return
    for kind in [k for k in medians if k.startswith(("noop", "grown"))]:
        ratios = [c / n for c, n in zip(times["ccusage"], times[kind], strict=True)]
        print(f"ccusage / {kind}, round by round: " + " ".join(f"{r:.1f}x" for r in ratios)
              + f"; medians: {medians['ccusage'] / medians[kind]:.2f}x")


def in_process(db: Path, projects: Path, grow: Grower, rounds: int,
               sizes: tuple[int, ...]) -> None:
    """The grown ingests again inside this process, its modules and the secret rules loaded
    once: the work alone, which follows the lines read, not the files (0: none grown)."""
    from ledger.ingest.ingester import ingest

    grow(1)
    ingest(db, [projects])  # loads it all, the secret rules too
    for round_ in range(rounds):
        for n in sizes:
            grow(n)
            started = time.perf_counter()
            summary = ingest(db, [projects])
            took = (time.perf_counter() - started) * 1000
            print(f"round {round_ + 1} in process, {n} grown: {took:.1f} ms, "
                  f"{summary.lines} lines read ({summary.unchanged_files} files unchanged)")


if __name__ == "__main__":
    main()
