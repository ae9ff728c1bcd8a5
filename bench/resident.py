"""The resident ingest servers a benchmark times calls to (``ingest --resident``,
docs/resident.md): started as their client starts them, before the timed rounds (their start
and memory reported apart), in a folder of the bench's own (``XDG_RUNTIME_DIR``)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall-clock milliseconds of one process, and what it printed."""
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return (time.perf_counter() - started) * 1000, done.stdout


def socket_of(python: Path, db: Path, env: dict[str, str]) -> str:
    """The socket the client of ``python``'s agent-ledger finds the server for ``db`` at.
    Asked with ``-P``, as the server runs: ``python -c`` would import a ``ledger`` package
    in the current folder first (a checkout the bench runs from), whose settings name that
    folder, not the installed package, and so another socket (the bench's server then
    answered no call, and each run's first resident calls started a server of their own and
    ran the ingest themselves meanwhile: its round 1 took 100-430 ms)."""
    return subprocess.run(
        [str(python), "-P", "-c", "from ledger.cli import resident_client as r; "
         f"k = r.settings({str(db)!r}); print(r.socket_path(k))"],
        env=env, capture_output=True, text=True, check=True).stdout.strip()


class Resident:
    """The resident ingest servers of the installed package (``ingest --resident``), in a
    folder of the bench's own (``XDG_RUNTIME_DIR``)."""

    def __init__(self, script: Path, work: Path, env: dict[str, str]) -> None:
        self.script, self.python = script, script.with_name("python")
        self.env = {**env, "XDG_RUNTIME_DIR": str(work / "run"),
                    "AGENT_LEDGER_RESIDENT_IDLE": "3600"}
        self.pids: dict[Path, int] = {}

    def start(self, db: Path) -> None:
        """The server for ``db``, started as its client starts it, timed until it listens."""
        socket = socket_of(self.python, db, self.env)
        started = time.perf_counter()
        subprocess.Popen([str(self.python), "-P", "-m", "ledger.cli.resident_server", socket,
                          os.path.realpath(db)], env=self.env, start_new_session=True,
                         stdout=subprocess.DEVNULL)
        while (pid := self._pid(db)) is None:  # (its info file is written once it listens)
            if time.perf_counter() - started > 120:
                raise SystemExit(f"no resident server on {socket} after 120 s")
            time.sleep(0.005)
        self.pids[db] = pid
        print(f"resident server for {db.name}: listening after "
              f"{(time.perf_counter() - started) * 1000:.0f} ms")
        self.memory(db, "idle, warm")

    def _pid(self, db: Path) -> int | None:
        folder = Path(self.env["XDG_RUNTIME_DIR"]) / "agent-ledger"
        for path in folder.glob("server-*.pid"):
            try:
                info = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # (written by a rename, so never half; gone meanwhile)
            if info["args"][0] == os.path.realpath(db):
                return int(info["pid"])
        return None

    def memory(self, db: Path, when: str) -> None:
        """RSS and PSS of the server for ``db``, from /proc."""
        fields = {}
        for line in Path(f"/proc/{self.pids[db]}/smaps_rollup").read_text().splitlines()[1:]:
            name, value = line.split(":")
            fields[name] = int(value.split()[0])
        print(f"resident server {self.pids[db]} for {db.name} ({when}): "
              f"RSS {fields['Rss'] / 1024:.1f} MB, PSS {fields['Pss'] / 1024:.1f} MB")

    def whole_corpus(self, projects: Path) -> None:
        """A server for a new database, then the whole corpus ingested through it."""
        db = projects.parent.parent / "whole.db"
        self.start(db)
        took, out = timed([str(self.script), "ingest", str(db), str(projects), "--resident"],
                          self.env)
        print(f"whole corpus through the resident server: {took:.0f} ms ({out.splitlines()[0]})")
        self.memory(db, "after ingesting the whole corpus")

    def stop(self) -> None:
        for db in self.pids:
            subprocess.run([str(self.script), "ingest", str(db), "--resident", "--stop"],
                           env=self.env, check=True, capture_output=True)
