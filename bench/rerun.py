"""Benchmark: a re-run a user can feel (issue 22, item 3).

Builds a Claude Code data folder as ccusage looks for it (``CLAUDE_CONFIG_DIR/projects/
<project>/<session>.jsonl``): copies of the public Claude Code samples in
tests/fixtures/real-agent-logs/ (every id rewritten, so each copy is a session of its own)
and transcripts generated as bench/agent_logs.py makes them, ``--files`` in all. Ingests it
once, then times whole processes, as a user's shell starts them, taking turns:

- ``python``: ``python -c pass``, the interpreter's own start, for scale;
- ``noop``: ``agent-ledger ingest DB PROJECTS`` again, nothing new (the console script of
  pyproject.toml, built here as pip builds it, so the entry point measured is the one
  installed);
- ``ccusage``: ``ccusage claude daily --offline --json`` over the same folder (it reads
  every file again each run: it keeps nothing between runs);
- ``grown N``: the same ingest after a turn was appended to N of the files (5 and 50 by
  default; each run appends new turns), to show that its cost follows the new lines, not
  the files.

Then the grown ingests again inside this process, everything loaded once: the work alone.
Every run's figure is printed, then the medians and the ratio ccusage / noop (round by
round, and of the medians). ``--python`` names the interpreter of the console script: an
editable install (``pip install -e``, as a development checkout has) adds its path finder's
imports to every start of Python (pathlib and re, some 20 ms here), which an installed
package does not.

    .venv/bin/python bench/rerun.py                         # 500 files, 7 rounds
    .venv/bin/python bench/rerun.py --files 2000 --ccusage /tmp/ccu/node_modules/.bin/ccusage

ccusage is installed outside the repository (``npm install ccusage@20.0.24`` in a folder of
its own; 20.0.26, the latest, ships no linux-x64 binary); without ``--ccusage`` or node, its
runs are left out with a note.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from agent_logs import PROJECTS, Claude, write  # noqa: E402
from hook import renamed  # noqa: E402

SAMPLES = ROOT / "tests/fixtures/real-agent-logs"
#: The Claude Code samples copied into the corpus, one in every ``COPY_EVERY`` files.
CLAUDE_SAMPLES = sorted(SAMPLES.glob("0[123]_claude_code_*.jsonl"))
COPY_EVERY = 5


def corpus(folder: Path, files: int, seed: int) -> list[tuple[Path, Claude]]:
    """Write ``files`` transcripts under ``folder/projects``; returns the generated ones with
    their session makers (to grow them later)."""
    rng = random.Random(seed)
    samples = [
        [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        for path in CLAUDE_SAMPLES
    ]
    grown: list[tuple[Path, Claude]] = []
    start = datetime(2026, 1, 1, 9, tzinfo=UTC)
    for n in range(files):
        project = folder / "projects" / f"-home-dev-{PROJECTS[n % len(PROJECTS)]}"
        if n % COPY_EVERY == 0:
            sample = samples[(n // COPY_EVERY) % len(samples)]
            session = str(uuid.UUID(int=rng.getrandbits(128)))
            write(project / f"{session}.jsonl",
                  (json.dumps({**renamed(obj, n), "sessionId": session}) for obj in sample))
            continue
        claude = Claude(rng, project.name, start + timedelta(hours=n))
        path = project / f"{claude.session}.jsonl"
        write(path, (line for _ in range(rng.randint(1, 4)) for line in claude.turn()))
        grown.append((path, claude))
    return grown


def console_script(folder: Path, python: str) -> Path:
    """The ``agent-ledger`` script pip would install from pyproject.toml's entry point."""
    spec = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, func = spec["agent-ledger"].partition(":")
    script = folder / "agent-ledger"
    script.write_text(
        f"#!{python}\nimport sys\nfrom {module} import {func}\n"
        f"if __name__ == '__main__':\n    sys.exit({func}())\n"
    )
    script.chmod(0o755)
    return script


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall-clock milliseconds of one process, and what it printed."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return (time.perf_counter() - started) * 1000, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7, help="Alternated runs of each kind.")
    parser.add_argument("--grown", type=int, action="append",
                        help="Files grown by a turn before each grown run (repeatable; "
                        "default 5 and 50).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ccusage", help="The ccusage command (e.g. node_modules/.bin/ccusage).")
    parser.add_argument("--keep", type=Path, help="Build in this folder and keep it.")
    parser.add_argument("--python", default=sys.executable,
                        help="The interpreter of the console script (default: this one).")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="rerun-"))
    shutil.rmtree(work / "claude", ignore_errors=True)
    (work / "ledger.db").unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    makers = corpus(work / "claude", args.files, args.seed)
    projects = work / "claude" / "projects"
    size = sum(p.stat().st_size for p in projects.rglob("*.jsonl"))
    # As an installed package runs: from its bytecode (pip compiles it when it installs), so
    # the first ingest writes it, whatever PYTHONDONTWRITEBYTECODE says here.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
           "CLAUDE_CONFIG_DIR": str(work / "claude")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    script = console_script(work, args.python)
    ours = [str(script), "ingest", str(work / "ledger.db"), str(projects)]
    first, _ = timed(ours, env)
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; "
          f"{args.files} files, {size / 1e6:.1f} MB; first ingest {first:.0f} ms")
    grown = args.grown or [5, 50]
    kinds = {"python": [args.python, "-c", "pass"], "noop": ours,
             **{f"grown {n}": ours for n in grown}}
    if args.ccusage and shutil.which(args.ccusage):
        kinds["ccusage"] = [args.ccusage, "claude", "daily", "--offline", "--json"]
    else:
        print("ccusage: not run (no --ccusage, or it is not installed)")
    rng = random.Random(args.seed)
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for round_ in range(args.rounds):
        for kind, command in kinds.items():
            if kind.startswith("grown"):
                grow(makers, rng, int(kind.split()[1]))
            took, out = timed(command, env)
            times[kind].append(took)
            print(f"round {round_ + 1} {kind}: {took:.1f} ms"
                  + (f"  ({out.splitlines()[0]})" if command is ours else ""))
    medians = {kind: statistics.median(t) for kind, t in times.items()}
    report(times, medians)
    in_process(work / "ledger.db", projects, makers, rng, args.rounds, (0, *sorted(set(grown))))
    if not args.keep:
        shutil.rmtree(work)


def report(times: dict[str, list[float]], medians: dict[str, float]) -> None:
    print("medians: " + ", ".join(f"{k} {v:.1f} ms" for k, v in medians.items()))
    if "ccusage" in medians:
        ratios = [c / n for c, n in zip(times["ccusage"], times["noop"], strict=True)]
        print("ccusage / noop, round by round: " + " ".join(f"{r:.1f}x" for r in ratios))
        print(f"ccusage / noop, medians: {medians['ccusage'] / medians['noop']:.2f}x")


def in_process(db: Path, projects: Path, makers: list[tuple[Path, Claude]], rng: random.Random,
               rounds: int, sizes: tuple[int, ...]) -> None:
    """The grown ingests again inside this process, its modules and the secret rules loaded
    once: the work alone, which follows the lines read, not the files (0: none grown)."""
    from ledger.ingest.ingester import ingest

    grow(makers, rng, 1)
    ingest(db, [projects])  # loads it all, the secret rules too
    for round_ in range(rounds):
        for n in sizes:
            grow(makers, rng, n)
            started = time.perf_counter()
            summary = ingest(db, [projects])
            took = (time.perf_counter() - started) * 1000
            print(f"round {round_ + 1} in process, {n} grown: {took:.1f} ms, "
                  f"{summary.lines} lines read ({summary.unchanged_files} files unchanged)")


def grow(makers: list[tuple[Path, Claude]], rng: random.Random, files: int) -> None:
    """A turn more in ``files`` of the generated transcripts."""
    for path, maker in rng.sample(makers, files):
        write(path, maker.turn(), "a")


if __name__ == "__main__":
    main()
