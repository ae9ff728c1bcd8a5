"""One measured stage, run in a process of its own so its peak RSS is its own.

``python bench/stages.py STAGE JSON_ARGS`` does the work, times it (``perf_counter`` around the
work only, not the interpreter start) and prints one JSON object on its last line. The parent
(:mod:`run`) reads the peak RSS of the process from ``os.wait4``.
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))

Result = dict[str, Any]


CPU: dict[str, float] = {}  # CPU seconds of the last timed work, reported with the result


def _timed(work: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock seconds of ``work``; its CPU seconds, its child processes' (ingest's
    workers, once ended) included, go to :data:`CPU`."""
    start, cpu = time.perf_counter(), _cpu()
    value = work()
    CPU["cpu_seconds"] = _cpu() - cpu
    return time.perf_counter() - start, value


def _cpu() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def raw(args: dict[str, Any]) -> Result:
    # here, not above: baselines imports ledger's writer (sqlite-utils, pandas), which a
    # stage that runs a whole command must not hold
    import baselines
    import raw_lines as limit

    seconds, rows = _timed(lambda: baselines.raw_limit(
        Path(args["corpus"]), Path(args["db"]), shaped=args.get("shaped", False)))
    return {"seconds": seconds, "events": rows, "parser": limit.fastest_parser()[0]}


def raw_lines(args: dict[str, Any]) -> Result:
    import raw_lines as limit

    paths = [Path(p) for p in args["paths"]]
    seconds, (rows, size) = _timed(lambda: limit.raw_lines(paths, Path(args["db"])))
    return {"seconds": seconds, "events": rows, "bytes": size,
            "parser": limit.fastest_parser()[0]}


def command(args: dict[str, Any]) -> Result:
    """A whole command as a shell runs it (``argv``, with ``env`` added): wall-clock seconds
    from its start to its end, interpreter and imports included; its CPU time and peak RSS."""
    import os
    import subprocess

    # With bytecode cached, as an installed package runs (pip compiles it when it installs),
    # whatever PYTHONDONTWRITEBYTECODE says in the benchmark's own environment.
    # ``unset``: variables the command must not see (PYTHONPATH, for an installed package).
    gone = {"PYTHONDONTWRITEBYTECODE", *args.get("unset", ())}
    env = {key: value for key, value in os.environ.items() if key not in gone}
    env.update(args.get("env", {}))
    seconds, proc = _timed(lambda: subprocess.run(args["argv"], env=env, capture_output=True,
                                                  check=False))
    if proc.returncode not in args.get("ok", (0,)):
        raise SystemExit(f"{args['argv'][:3]} exited with {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace')[-500:]}")
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    result: Result = {"seconds": seconds, "child_rss_mb": child.ru_maxrss / 1024}
    if args.get("json_summary"):
        summary = json.loads(proc.stdout)
        result.update(events=summary["steps"] + summary["errors"],
                      bytes=summary["bytes_read"],
                      summary={k: summary[k] for k in ("files", "unchanged_files",
                                                       "updated_files", "lines", "errors")})
    else:
        result["output_bytes"] = len(proc.stdout)
    return result


def sqlite_utils(args: dict[str, Any]) -> Result:
    from sqlite_utils.cli import cli

    command = ["insert", args["db"], "steps", args["file"], "--nl", "--alter", "--silent"]
    seconds, _ = _timed(lambda: cli.main(command, standalone_mode=False))
    return {"seconds": seconds, "command": "sqlite-utils " + " ".join(command)}


def _agent_ledger(command: list[str]) -> tuple[float, int, str]:
    """Run an agent-ledger command in this process; (seconds, exit code, output)."""
    import contextlib
    import io

    from ledger.cli import cli

    out = io.StringIO()

    def work() -> int:
        with contextlib.redirect_stdout(out):
            try:
                cli.main(command, standalone_mode=False)
            except SystemExit as exc:
                return int(exc.code or 0)
        return 0

    seconds, code = _timed(work)
    return seconds, code, out.getvalue()


def ingest(args: dict[str, Any]) -> Result:
    """``agent-ledger ingest`` in this process, timed around the command (``imported``: with
    the command's modules imported first, so that the time is its work and what it loads
    on first use, without Python's start or the imports: a whole command's start-up is its
    wall time less this)."""
    jobs = args.get("jobs")
    command = ["ingest", args["db"], *args["paths"], "--no-progress", "--json"]
    if jobs is not None:
        command += ["--jobs", str(jobs)]
    if args.get("imported"):
        import ledger.cli.group
        import ledger.cli.ingest  # noqa: F401
    seconds, code, output = _agent_ledger(command)
    if code not in (0, 3):
        raise SystemExit(f"agent-ledger ingest exited with {code}")
    summary = json.loads(output)
    return {
        "seconds": seconds,
        "events": summary["steps"] + summary["errors"],
        "bytes": summary["bytes_read"],
        "summary": {k: summary[k] for k in ("files", "unchanged_files", "updated_files",
                                            "sessions", "steps", "errors", "redactions")},
        "workers": summary["workers"],
    }


def whatif(args: dict[str, Any]) -> Result:
    seconds, code, output = _agent_ledger(["what-if", args["db"], *args["options"]])
    if code != 0:
        raise SystemExit(f"agent-ledger what-if exited with {code}: {output[-500:]}")
    return {"seconds": seconds, "command": "agent-ledger what-if DB " + " ".join(args["options"])}


_GROUP = re.compile(r"\(\?P<(\w+)>((?:[^()]|\([^()]*\))*)\)(\?)?")


def expand_route(pattern: str, values: dict[str, str]) -> list[str]:
    """The paths a plugin's route pattern serves: named groups filled from ``values``, an
    alternation of words expanded, an optional group left out; [] if anything else remains."""
    paths = [pattern.removeprefix("^").removesuffix("$")]
    while True:
        match = next((m for p in paths if (m := _GROUP.search(p))), None)
        if match is None:
            break
        name, body, optional = match.groups()
        if name in values:
            options = [values[name]]
        elif optional:
            options = [""]
        elif re.fullmatch(r"[\w-]+(\|[\w-]+)*", body):
            options = body.split("|")
        else:
            return []
        paths = [p.replace(match.group(0), o, 1) if match.group(0) in p else p
                 for p in paths for o in options]
    return [p for p in dict.fromkeys(paths) if not re.search(r"[()\[\]?*+\\^$|]", p)]


def _plugin_pages(datasette: Any, values: dict[str, str]) -> list[str]:
    """The pages the plugins register, with this database and its longest session filled in."""
    from datasette.plugins import pm

    pages = []
    for routes in pm.hook.register_routes(datasette=datasette):
        for pattern, _view in routes or ():
            pages += expand_route(pattern, values)
    return pages


def dashboard(args: dict[str, Any]) -> Result:
    """Median request time of each page through Datasette's in-process client."""
    from datasette.app import Datasette

    from ledger.views.serve import SETTINGS, metadata_for

    db = args["db"]
    metadata = metadata_for(db)
    name = Path(db).stem
    database = metadata["databases"][name]
    pages = ["/", f"/{name}"]
    pages += [f"/{name}/{t}" for t, spec in database.get("tables", {}).items()
              if not spec.get("hidden")]
    pages += [f"/{name}/{q}" for q in database.get("queries", {})]
    pages += args.get("pages", [])
    datasette = Datasette([db], metadata=metadata, settings=SETTINGS)
    with sqlite3.connect(db) as conn:  # the longest session: the worst case for its timeline
        row = conn.execute("SELECT session_id FROM sessions ORDER BY events DESC LIMIT 1")
        longest = (row.fetchone() or ("",))[0]
    longest = quote(longest, safe="")
    values = {"database": name, "db": name, "session": longest, "session_id": longest}
    pages += [p for p in _plugin_pages(datasette, values) if p not in pages]

    async def measure() -> dict[str, Any]:
        await datasette.invoke_startup()
        found: dict[str, Any] = {}
        for page in pages:
            first = await datasette.client.get(page)
            if first.status_code == 404:
                found[page] = {"status": 404}
                continue
            times = []
            for _ in range(args.get("requests", 5)):
                start = time.perf_counter()
                response = await datasette.client.get(page)
                times.append(time.perf_counter() - start)
            found[page] = {"status": response.status_code, "median_ms":
                           statistics.median(times) * 1000, "max_ms": max(times) * 1000}
        return found

    seconds, found = _timed(lambda: asyncio.run(measure()))
    return {"seconds": seconds, "pages": found}


STAGES: dict[str, Callable[[dict[str, Any]], Result]] = {
    "raw": raw, "raw-lines": raw_lines, "command": command, "sqlite-utils": sqlite_utils,
    "ingest": ingest, "what-if": whatif, "dashboard": dashboard,
}


if __name__ == "__main__":
    stage, raw_args = sys.argv[1], sys.argv[2]
    print(json.dumps({**STAGES[stage](json.loads(raw_args)), **CPU}))
