"""Benchmark the importers on a year of Claude Code and Codex sessions, in their real layouts.

Generates (deterministically for a seed) ``claude/projects/<slug>/<sessionId>.jsonl`` with
sub-agent files under ``<sessionId>/subagents/``, and ``codex/sessions/YYYY/MM/DD/rollout-*.jsonl``,
shaped like the real samples in tests/fixtures/real-agent-logs/ (one line per content block,
repeated usage, hook progress lines, cumulative token counts re-emitted, exit codes in both
shapes, turn ends, API errors). Then times ``ingest`` of both folders from scratch, and again
after every transcript grew by a few turns (only the new bytes are read).

Usage::

    python bench/agent_logs.py bench/data/agent-logs --days 365 --sessions-per-day 4
    python bench/agent_logs.py bench/data/agent-logs --generate-only
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ledger.ingest.ingester import ingest  # noqa: E402

PROJECTS = ("shop", "billing-api", "infra", "docs-site", "mobile-app", "data-pipeline")
TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "Write")
WORDS = ("error", "test", "passed", "failed", "module", "import", "def", "return", "config",
         "build", "line", "file", "missing", "TypeError", "assert", "expected", "found")


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


class Claude:
    """Claude Code lines for one session (and its sub-agents), turn by turn."""

    def __init__(self, rng: random.Random, project: str, at: datetime) -> None:
        self.rng, self.at = rng, at
        self.session = str(uuid.UUID(int=rng.getrandbits(128)))
        self.base = {"isSidechain": False, "userType": "external", "version": "2.1.39",
                     "cwd": f"/home/dev/{project}", "sessionId": self.session,
                     "gitBranch": "main"}

    def line(self, kind: str, **fields: object) -> str:
        self.at += timedelta(milliseconds=self.rng.randint(50, 4000))
        record = {**self.base, "type": kind, "uuid": str(uuid.UUID(int=self.rng.getrandbits(128))),
                  "timestamp": iso(self.at), **fields}
        return json.dumps(record)

    def turn(self) -> Iterator[str]:
        rng = self.rng
        yield self.line("user", message={"role": "user", "content": text(rng, 12)})
        for _ in range(rng.randint(1, 12)):
            yield from self.response()
        if rng.random() < 0.03:
            for _ in range(rng.randint(1, 4)):
                yield self.line("system", subtype="api_error", level="error", retryAttempt=1,
                                maxRetries=10, error={"status": 529})
        yield self.line("system", subtype="stop_hook_summary", hookCount=1, hookErrors=[],
                        preventedContinuation=False, stopReason="", level="suggestion")
        yield self.line("system", subtype="turn_duration", durationMs=rng.randint(1000, 10**6))

    def response(self) -> Iterator[str]:
        rng = self.rng
        msg, req = f"msg_{rng.getrandbits(64):x}", f"req_{rng.getrandbits(64):x}"
        calls = [(f"toolu_{rng.getrandbits(64):x}", rng.choice(TOOLS))
                 for _ in range(rng.choice((0, 1, 1, 1, 2)))]
        blocks = [{"type": "text", "text": text(rng, 20)}]
        blocks += [{"type": "tool_use", "id": cid, "name": name,
                    "input": {"command": text(rng, 4)}} for cid, name in calls]
        out = rng.randint(1, 6)
        for block in blocks:
            out += rng.randint(0, 200)
            usage = {"input_tokens": 3, "cache_read_input_tokens": 20000, "output_tokens": out}
            message = {"model": "claude-opus-4-6", "id": msg, "type": "message",
                       "role": "assistant", "content": [block], "stop_reason": None,
                       "usage": usage}
            yield self.line("assistant", message=message, requestId=req)
        for cid, name in calls:
            yield self.line("progress", data={"type": "hook_progress", "hookEvent": "PreToolUse",
                                              "hookName": f"PreToolUse:{name}"}, toolUseID=cid)
            failed = rng.random() < 0.05
            result = {"type": "tool_result", "tool_use_id": cid,
                      "content": text(rng, rng.randint(5, 120)), "is_error": failed}
            yield self.line("user", message={"role": "user", "content": [result]})


class Codex:
    """Codex rollout lines for one session, turn by turn (older and newer shapes)."""

    def __init__(self, rng: random.Random, project: str, at: datetime, newer: bool) -> None:
        self.rng, self.at, self.newer, self.total = rng, at, newer, 0
        self.session = str(uuid.UUID(int=rng.getrandbits(128)))
        self.project = project

    def line(self, kind: str, **payload: object) -> str:
        self.at += timedelta(milliseconds=self.rng.randint(20, 3000))
        return json.dumps({"timestamp": iso(self.at), "type": kind, "payload": payload})

    def meta(self) -> str:
        return self.line("session_meta", id=self.session, cwd=f"/Users/dev/{self.project}",
                         originator="codex-tui", cli_version="0.125.0" if self.newer else "0.77.0")

    def usage(self) -> dict[str, object]:
        usage = {"input_tokens": 9000, "output_tokens": self.total, "total_tokens": 9000}
        return {"total_token_usage": usage, "last_token_usage": usage}

    def turn(self) -> Iterator[str]:
        rng = self.rng
        turn = str(uuid.UUID(int=rng.getrandbits(128)))
        if self.newer:
            yield self.line("event_msg", type="task_started", turn_id=turn)
        yield self.line("event_msg", type="user_message", message=text(rng, 10))
        yield self.line("turn_context", cwd=f"/Users/dev/{self.project}", model="gpt-5.5")
        for _ in range(rng.randint(1, 10)):
            call = f"call_{rng.getrandbits(64):x}"
            yield self.line("response_item", type="reasoning", summary=[], encrypted_content="x")
            yield self.line("response_item", type="function_call", name="exec_command",
                            arguments=json.dumps({"cmd": text(rng, 4)}), call_id=call)
            self.total += rng.randint(20, 400)
            yield self.line("event_msg", type="token_count", info=self.usage())
            yield self.line("event_msg", type="token_count", info=self.usage())  # re-emitted
            code = 1 if rng.random() < 0.05 else 0
            body = text(rng, rng.randint(5, 120))
            if self.newer:
                yield self.line("response_item", type="function_call_output", call_id=call,
                                output=f"Process exited with code {code}\nOutput:\n{body}")
                yield self.line("event_msg", type="exec_command_end", call_id=call,
                                exit_code=code, status="failed" if code else "completed")
            else:
                output = json.dumps({"output": body, "metadata": {"exit_code": code}})
                yield self.line("response_item", type="function_call_output", call_id=call,
                                output=output)
        yield self.line("response_item", type="message", role="assistant",
                        content=[{"type": "output_text", "text": text(rng, 30)}])
        if self.newer:
            yield self.line("event_msg", type="task_complete", turn_id=turn, duration_ms=9000)


def generate(folder: Path, days: int, per_day: int, seed: int) -> list[tuple[Path, object]]:
    """Write the corpus; returns each file with its session maker (to grow it later)."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, 9, tzinfo=UTC)
    files: list[tuple[Path, object]] = []
    for day in range(days):
        for n in range(per_day):
            at = start + timedelta(days=day, hours=n)
            project = rng.choice(PROJECTS)
            claude = Claude(rng, project, at)
            slug = folder / "claude" / "projects" / f"-home-dev-{project}"
            path = slug / f"{claude.session}.jsonl"
            write(path, (line for _ in range(rng.randint(1, 4)) for line in claude.turn()))
            files.append((path, claude))
            if rng.random() < 0.2:
                agent = Claude(rng, project, at)
                agent.session = claude.session
                agent.base = {**claude.base, "isSidechain": True, "agentId": f"a{n}{day}"}
                sub = slug / claude.session / "subagents" / f"agent-a{n}{day}.jsonl"
                write(sub, agent.turn())
            codex = Codex(rng, project, at, newer=rng.random() < 0.5)
            day_dir = folder / "codex" / "sessions" / at.strftime("%Y/%m/%d")
            path = day_dir / f"rollout-{at:%Y-%m-%dT%H-%M-%S}-{codex.session}.jsonl"
            turns = (line for _ in range(rng.randint(1, 3)) for line in codex.turn())
            write(path, iter([codex.meta(), *turns]))
            files.append((path, codex))
    return files


def write(path: Path, lines: Iterator[str], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open(mode, encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def timed(db: Path, folder: Path, label: str) -> None:
    began = time.perf_counter()
    summary = ingest(db, [folder / "claude" / "projects", folder / "codex" / "sessions"])
    took = time.perf_counter() - began
    mb = summary.bytes_read / 1e6
    print(f"{label}: {summary.files} files, {summary.lines:,} lines, {mb:,.1f} MB, "
          f"{len(summary.sessions):,} sessions, {took:.1f} s "
          f"({summary.lines / took:,.0f} lines/s, {mb / took:.1f} MB/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--sessions-per-day", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args()
    shutil.rmtree(args.folder, ignore_errors=True)
    began = time.perf_counter()
    files = generate(args.folder, args.days, args.sessions_per_day, args.seed)
    print(f"generated {len(files):,} transcripts in {time.perf_counter() - began:.1f} s")
    if args.generate_only:
        return
    db = args.folder / "ledger.db"
    timed(db, args.folder, "first ingest")
    for path, maker in files[::10]:  # a tenth of the transcripts grow by a turn
        write(path, maker.turn(), "a")  # type: ignore[attr-defined]
    timed(db, args.folder, "after growth")


if __name__ == "__main__":
    main()
