"""Benchmark: one call of the live brake, as Claude Code makes it.

A transcript of ``--lines`` lines is built from the public Claude Code sample (its lines
repeated with fresh ids), then grown by more tool calls, one hook call after each, as in a
live session: each call reads only the lines written since the last one. Each kind of call
is timed in turn, after the same appends:

``installed``   exactly the command ``hook install`` writes (the self-starting client of the
                resident server), with NO server started beforehand: its first call (which
                starts the server, and is answered in its own process meanwhile) is reported
                apart, as ``installed_first_call_ms``, with the time until the server listens
                (``installed_server_ready_ms``); the calls after it are the kind's figures;
``plain``       a fresh ``agent-ledger-hook claude-code`` process (``hook install --plain``;
                ``python -c 'from ledger.live.hook_main import main; main()'`` when the
                script is not installed): interpreter, imports, state, fold, database row;
``cli``         a fresh ``agent-ledger hook claude-code`` process (the whole command line;
                ``python -m ledger``), fewer calls: it is the slow one;
``resident``    the client of a server started by hand (``hook serve``) before the calls;
``in_process``  ``hook_run.run`` inside this process.

The first call on the transcript, with no saved state, is timed apart (it reads everything).
Processes are started with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed), as an
installed package runs; a first untimed call of each kind but ``installed`` writes the caches.

``--user-install`` runs the processes from a venv in ``bench/data/hook-venv`` where
agent-ledger is installed as users install it (a wheel built by pip from this tree, not the
editable install of a checkout, whose path finder costs every start some 15 ms); the
dependencies are this interpreter's (a ``.pth`` file), so nothing else is downloaded but what
pip needs to build the wheel. Every server the benchmark started is stopped at the end.

    .venv/bin/python bench/hook.py                       # 5,000 and 100 lines, 40 calls each
    .venv/bin/python bench/hook.py --calls 20 --user-install
    taskset -c 1 .venv/bin/python bench/hook.py          # pinned to one core
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.budget import Budget
from ledger.ingest.options import Options
from ledger.live import hook_server
from ledger.live.hook_main import hook_args
from ledger.live.hook_run import run

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = (ROOT / "tests/fixtures/real-agent-logs"
          / "03_claude_code_main_session_tail_lines1781-1863_v2.1.39.jsonl")
NO_CAPS = Budget(**{key: None for key in Budget.keys()})


def renamed(obj: Any, k: int) -> Any:
    """A line with every id made unique to copy ``k`` (uuids, response and tool call ids)."""
    if isinstance(obj, dict):
        return {
            key: f"{value}-{k}" if key in ("uuid", "parentUuid", "id", "tool_use_id", "requestId")
            and isinstance(value, str) else renamed(value, k)
            for key, value in obj.items()
        }
    if isinstance(obj, list):
        return [renamed(v, k) for v in obj]
    return obj


def lines(count: int) -> list[bytes]:
    sample = [json.loads(x) for x in SAMPLE.read_bytes().splitlines() if x.strip()]
    out: list[bytes] = []
    k = 0
    while len(out) < count:
        out.extend(json.dumps(renamed(x, k)).encode() + b"\n" for x in sample)
        k += 1
    return out[:count]


def call_of(raw: bytes, transcript: Path) -> dict[str, Any] | None:
    obj = json.loads(raw)
    if obj.get("type") != "assistant":
        return None
    for block in obj["message"].get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            return {"hook_event_name": "PreToolUse", "session_id": obj["sessionId"],
                    "transcript_path": str(transcript), "cwd": obj.get("cwd"),
                    "tool_name": block["name"], "tool_input": block["input"],
                    "tool_use_id": block["id"]}
    return None


@dataclass
class Interpreter:
    """The Python the processes run, and their environment."""

    python: str
    env: dict[str, str]
    scripts: Path | None = None  # where pip put agent-ledger-hook (a user's install)

    @classmethod
    def this_checkout(cls) -> Interpreter:
        env = _env()
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "plugins")])
        return cls(sys.executable, env)


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",
                                                             "PYTHONPATH")}


def user_install(folder: Path) -> Interpreter:
    """A venv with agent-ledger installed from a wheel of this tree, as ``pip install``
    leaves it; its dependencies are this interpreter's site-packages (a ``.pth`` line)."""
    python = folder / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    wheels = folder / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    left = [p for p in (ROOT / "build", ROOT / "agent_ledger.egg-info") if not p.exists()]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                    str(wheels), str(ROOT)], check=True)
    for path in left:  # what the build wrote into the tree
        shutil.rmtree(path, ignore_errors=True)
    [wheel] = wheels.glob("agent_ledger-*.whl")
    site = next((folder / "lib").glob("python3*/site-packages"))
    deps = next(p for p in map(Path, sys.path) if p.name == "site-packages" and p.is_dir())
    (site / "deps.pth").write_text(f"{deps}\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                    "--quiet", "--no-deps", "--force-reinstall", str(wheel)], check=True)
    found = subprocess.run([str(python), "-c", "import ledger; print(ledger.__file__)"],
                           check=True, capture_output=True, text=True, env=_env(),
                           cwd=folder).stdout
    assert str(site) in found, f"the venv imports another ledger: {found}"
    return Interpreter(str(python), _env(), folder / "bin")


def commands(db: Path, py: Interpreter) -> dict[str, list[str]]:
    caps = [f"--budget={key}=off" for key in Budget.keys()]
    script = (py.scripts / "agent-ledger-hook") if py.scripts else shutil.which(
        "agent-ledger-hook")
    plain = [str(script)] if script else [py.python, "-c", LIGHT]
    client = subprocess.run(  # the client of that interpreter's install
        [py.python, "-c", "from ledger.live import hook_client; print(hook_client.__file__)"],
        check=True, capture_output=True, text=True, env=py.env).stdout.strip()
    sock = hook_server.socket_path(db, hook_args(db, budget_pairs=[c[9:] for c in caps]))
    return {
        "plain": [*plain, "claude-code", "--db", str(db), *caps],
        "cli": [py.python, "-m", "ledger", "hook", "claude-code", "--db", str(db), *caps],
        "resident": [py.python, "-S", client, str(sock), "--db", str(db), *caps],
        "serve": [py.python, "-m", "ledger", "hook", "serve", "--db", str(db), *caps,
                  "--idle-seconds", "600"],
    }


def installed_command(work: Path, db: Path, py: Interpreter) -> list[str]:
    """What ``hook install`` of that interpreter writes into settings.json, as argv."""
    budget = work / "budget.toml"
    budget.write_text("".join(f"{key} = 'off'\n" for key in Budget.keys()))
    subprocess.run([py.python, "-m", "ledger", "hook", "install", "--dir", str(work), "--db",
                    str(db), "--budget-file", str(budget), "--idle-seconds", "600"],
                   check=True, capture_output=True, env=py.env)
    settings = json.loads((work / ".claude" / "settings.json").read_text())
    return shlex.split(settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"])


LIGHT = "from ledger.live.hook_main import main; main()"
#: Of every ``CLI_EVERY`` calls, one is timed as ``cli`` (it takes ten times as long).
CLI_EVERY = 4
KINDS = ("installed", "plain", "cli", "resident", "in_process")


def bench(count: int, calls: int, work: Path, py: Interpreter) -> dict[str, Any]:
    transcript, db = work / "t.jsonl", work / "ledger.db"
    body = lines(count + (calls + 2) * 150)
    head, tail = body[:count], body[count:]
    transcript.write_bytes(b"".join(head))
    options = Options(budget=NO_CAPS)
    first = next(c for c in map(lambda r: call_of(r, transcript), reversed(head)) if c)
    started = time.perf_counter()
    run(json.dumps(first).encode(), db, lambda _f: options)
    cold = (time.perf_counter() - started) * 1000
    argv = commands(db, py)
    argv["installed"] = installed_command(work, db, py)
    server = subprocess.Popen(argv.pop("serve"), env=py.env, stderr=subprocess.DEVNULL)
    extra: dict[str, float] = {}
    try:
        _wait(lambda: any(i.pid == server.pid for i in hook_server.running(db)))
        for kind in ("plain", "cli", "resident"):  # untimed: bytecode caches written
            subprocess.run(argv[kind], input=json.dumps(first).encode(), env=py.env,
                           capture_output=True, check=True)
        times = _timed_calls(transcript, tail, db, argv, py, options, calls, extra)
    finally:
        stopped = hook_server.stop_servers(db)
        server.wait(timeout=30)
    return {"lines": count, "python": py.python, "cold_first_call_ms": round(cold, 1), **extra,
            **{kind: summary(t) for kind, t in times.items()},
            "servers_stopped": sorted(i.pid for i in stopped),
            "servers_left": [i.pid for i in hook_server.running(db)]}


def _timed_calls(
    transcript: Path, tail: list[bytes], db: Path, argv: dict[str, list[str]],
    py: Interpreter, options: Options, calls: int, extra: dict[str, float],
) -> dict[str, list[float]]:
    kinds: dict[str, list[float]] = {kind: [] for kind in KINDS}
    wanted = {"installed": calls, "plain": calls, "cli": max(1, calls // CLI_EVERY),
              "resident": calls, "in_process": calls}
    turn = 0
    with transcript.open("ab") as f:
        for raw in tail:
            f.write(raw)
            f.flush()
            call = call_of(raw, transcript)
            if call is None:
                continue
            stdin = json.dumps(call).encode()
            if "installed_first_call_ms" not in extra:  # no server for it yet: it starts one
                started = time.perf_counter()
                subprocess.run(argv["installed"], input=stdin, check=True, env=py.env,
                               capture_output=True)
                extra["installed_first_call_ms"] = round(_ms(started), 1)
                command = argv["installed"]
                sock = command[next(i for i, a in enumerate(command)
                                    if a.endswith("hook_client.py")) + 1]
                _wait(lambda s=sock: any(i.socket == s for i in hook_server.running(db)))
                extra["installed_server_ready_ms"] = round(_ms(started), 1)
                continue
            kind = _next_kind(kinds, wanted, turn)
            turn += 1
            if kind is None:
                break
            started = time.perf_counter()
            if kind == "in_process":
                run(stdin, db, lambda _f: options)
            else:
                subprocess.run(argv[kind], input=stdin, check=True, env=py.env,
                               capture_output=True)
            kinds[kind].append(_ms(started))
    return kinds


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _wait(what: Any, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not what():
        if time.monotonic() > deadline:
            raise SystemExit(f"no server after {deadline_s} s")
        time.sleep(0.02)


def _next_kind(kinds: dict[str, list[float]], wanted: dict[str, int], turn: int) -> str | None:
    """The kinds in turn (``cli`` one turn in ``CLI_EVERY``), each until it has its calls."""
    order = ["installed", "plain", "resident", "in_process"] + (
        ["cli"] if turn % CLI_EVERY == 0 else [])
    missing = [k for k in order if len(kinds[k]) < wanted[k]] or [
        k for k in kinds if len(kinds[k]) < wanted[k]
    ]
    return min(missing, key=lambda k: len(kinds[k]) / wanted[k]) if missing else None


def summary(times: list[float]) -> dict[str, float]:
    times = sorted(times)
    return {"calls": len(times), "p50_ms": round(statistics.median(times), 1),
            "p95_ms": round(times[max(0, math.ceil(len(times) * 0.95) - 1)], 1),
            "max_ms": round(times[-1], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, action="append",
                        help="Transcript length (repeatable; default 5000 and 100).")
    parser.add_argument("--calls", type=int, default=40, help="Timed calls of each kind.")
    parser.add_argument("--user-install", action="store_true",
                        help="Run the processes from a venv where agent-ledger is installed "
                        "from a wheel (bench/data/hook-venv), as users have it.")
    args = parser.parse_args()
    py = Interpreter.this_checkout()
    if args.user_install:
        venv = ROOT / "bench" / "data" / "hook-venv"
        py = user_install(venv)
        os.chdir(venv)  # ``python -m`` and ``-c`` look in the folder they start in first
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}, processes run by {py.python}")
    for name, flags in (("bare_interpreter_start", ["-S"]), ("interpreter_with_site", [])):
        bare = []
        for _ in range(10):
            started = time.perf_counter()
            subprocess.run([py.python, *flags, "-c", "pass"], check=True, env=py.env)
            bare.append(_ms(started))
        print(json.dumps({name: summary(bare)}))
    for count in args.lines or [5000, 100]:
        with tempfile.TemporaryDirectory() as work:
            print(json.dumps(bench(count, args.calls, Path(work), py)))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
