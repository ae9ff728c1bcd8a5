"""The benchmark's baselines on real-log-shaped files: the raw line limit reads every line,
and ccusage is left out with a note where node or npm is missing. No figure here is a time."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import ccusage  # noqa: E402
import raw_lines  # noqa: E402
import real_corpus  # noqa: E402


def test_raw_line_limit_stores_a_row_per_line(tmp_path: Path) -> None:
    folder = tmp_path / "real"
    manifest = real_corpus.generate(folder, 0.3, 0.1, 5, seed=4)
    rows, size = raw_lines.raw_lines(manifest.files(folder), tmp_path / "raw.db")
    assert (rows, size) == (manifest.lines, manifest.bytes)
    with sqlite3.connect(tmp_path / "raw.db") as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT file) FROM lines").fetchone() == (
            manifest.lines, len(manifest.sizes))


def test_raw_line_limit_as_a_command_reads_folders_and_loads_no_ledger_module(
        tmp_path: Path) -> None:
    """The ceiling of the first-ingest row: the cheapest whole Python process that reads the
    logs, so it must not pay for any of agent-ledger's imports."""
    folder = tmp_path / "real"
    manifest = real_corpus.generate(folder, 0.2, 0.1, 4, seed=5)
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import raw_lines; "
             "code = raw_lines.main(sys.argv[2:]); loaded = sorted(m for m in sys.modules "
             "if m.split('.')[0] in ('ledger', 'sqlite_utils', 'click', 'baselines')); "
             "sys.exit(code or (f'loaded {loaded}' if loaded else 0))")
    done = subprocess.run([sys.executable, "-c", probe, str(BENCH), str(tmp_path / "raw.db"),
                           str(folder / "claude"), str(folder / "codex")],
                          capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert json.loads(done.stdout) == {"rows": manifest.lines, "bytes": manifest.bytes}


@pytest.mark.parametrize(("missing", "note"), [("node", "left out: node not found"),
                                               ("npm", "left out: npm not found")])
def test_ccusage_is_left_out_without_node_or_npm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str, note: str) -> None:
    monkeypatch.setattr(ccusage.shutil, "which",
                        lambda name: None if name == missing else f"/usr/bin/{name}")
    assert ccusage.install(tmp_path / "node") == (None, note)
    assert not (tmp_path / "node").exists()


def test_ccusage_reads_only_the_corpus(tmp_path: Path) -> None:
    env = ccusage.env(tmp_path / "claude", None, tmp_path / "home")
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "claude")
    assert env["HOME"] == str(tmp_path / "home") and (tmp_path / "home").is_dir()
    assert not Path(env["CODEX_HOME"]).exists()
    assert ccusage.argv(Path("ccusage"), "claude") == ["ccusage", "claude", "daily", "--json",
                                                       "--offline"]


def test_the_report_says_why_ccusage_is_left_out() -> None:
    import run
    from harness import Figure, Run

    def figure(name: str, seconds: list[float]) -> Figure:
        return Figure(name, [Run({"seconds": s, "cpu_seconds": s / 2}, 50.0, 60.0)
                             for s in seconds])

    args = SimpleNamespace(append=1.0, append_more=5.0, repeat=3, incremental_repeat=5,
                           grow_events=0)
    ours = "real: ingest, Claude Code (command)"
    noop = "real: no-op re-ingest of 500 files (command)"
    bench = SimpleNamespace(figures={ours: figure(ours, [2.0, 1.0, 3.0]),
                                     noop: figure(noop, [0.05, 0.04, 0.07])},
                            missing={"ccusage": "left out: node not found"}, rss=[], grown=[],
                            pages={}, args=args, real=None, manifest=None)
    text = run.Report(bench).build()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()}
    assert "left out: node not found" in rows[
        "real logs: ingest of Claude Code vs ccusage (whole commands)"]
    assert rows["no-op re-ingest of 500 files (command), wall"].endswith("| met |")
    assert "50 ms (runs: 50 / 40 / 70 ms)" in text
    assert "| 2.000 / 1.000 / 3.000 |" in text  # every run, not only the median
