"""ccusage, the baseline on Claude Code (and Codex) logs: installed by the benchmark itself.

``install()`` puts a pinned ccusage into ``bench/data/node/`` (git ignores ``bench/data/``) with
``npm install`` from the npm registry, once; where node or npm is missing, or the install fails,
it says why, and the benchmark leaves the ccusage stages out with that note. ccusage reads the
folders ``CLAUDE_CONFIG_DIR`` (its ``projects/``) and ``CODEX_HOME`` (its ``sessions/``) name;
it is run with ``--offline`` (its bundled prices: no network in a timed run) and ``--json``, with
``HOME`` pointed at an empty folder so that nothing of the machine's own logs is read.

ccusage 20 is a native binary per platform (an optional dependency of the ``ccusage``
package). The newest, 20.0.26, has no linux-x64 binary in the registry; 20.0.24 is the newest
that has one, so that is the version pinned.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

VERSION = "20.0.24"
COMMAND = ("daily", "--json", "--offline")  # reads every file, groups usage by day


def install(folder: Path) -> tuple[Path | None, str]:
    """(the ccusage executable, its version) or (None, why it is left out)."""
    if shutil.which("node") is None:
        return None, "left out: node not found"
    npm = shutil.which("npm")
    if npm is None:
        return None, "left out: npm not found"
    exe = folder / "node_modules" / ".bin" / "ccusage"
    if version(exe) != VERSION:
        folder.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [npm, "install", "--prefix", str(folder), "--no-audit", "--no-fund",
             "--loglevel=error", f"ccusage@{VERSION}"],
            capture_output=True, text=True, check=False, timeout=600)
        if proc.returncode != 0:
            return None, f"left out: npm install ccusage@{VERSION} failed: {proc.stderr[-300:]}"
    found = version(exe)
    if found != VERSION:
        return None, f"left out: ccusage did not run ({found or 'no output'})"
    return exe, f"ccusage {VERSION}"


def version(exe: Path) -> str:
    if not exe.exists():
        return ""
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                          check=False, timeout=60)
    return proc.stdout.strip().removeprefix("ccusage ").removeprefix("v") if (
        proc.returncode == 0) else proc.stderr.strip()[-200:]


def argv(exe: Path, agent: str) -> list[str]:
    """ccusage's daily report of ``agent`` ('claude' or 'codex')."""
    return [str(exe), agent, *COMMAND]


def env(claude_dir: Path | None, codex_dir: Path | None, home: Path) -> dict[str, str]:
    """The environment that points ccusage at a corpus's folders and nothing else."""
    home.mkdir(parents=True, exist_ok=True)
    out = {"HOME": str(home), "LOG_LEVEL": "0", "NO_COLOR": "1",
           "CLAUDE_CONFIG_DIR": str(claude_dir or home / "none"),
           "CODEX_HOME": str(codex_dir or home / "none")}
    return out
