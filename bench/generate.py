"""Realistic ledger corpora of any size, deterministic for a seed.

A corpus is a night of agent runs from many machines, in all three dialects:

* ``native`` JSONL files (``<task_class>/host-NN.jsonl``): sessions interleaved by timestamp,
  each with a start marker, model rounds, tool actions and (usually) an end marker;
* ``gate`` JSONL files (``<task_class>/gate-NN.jsonl``): seed 002 ledgers, one run after another
  in the same file (the step counter goes back to 1);
* ``trace`` JSON documents (``traces/trace-NN.json``): seed 000 traces, one session per file.

``--files`` counts all of them: by default 100 files = 75 native + 15 gate + 10 trace
documents. Traces are one session per document, so they hold few of the events; the JSONL files
hold the rest. Sessions are made to trip every stop reason: retry storms, no-progress runs,
tool-error streaks, unknown and mapped vendor stops, token and tool-call blow-ups, too many
writes, slow sessions, and long sessions that run past the step cap (as free-inference loops
do). A few lines are malformed (put aside as ingest errors) and a few carry secrets (redacted).

Usage::

    python bench/generate.py bench/data/corpus --events 1000000
    python bench/generate.py bench/data/corpus --append 1   # 1% more events, to every JSONL file
    python bench/generate.py bench/data/varied --varied --events 200000 --files 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import real_corpus

TASK_CLASSES = ("bugfix", "refactor", "docs", "tests", "deps", "migration", "perf", "feature")
TOOLS = ("read_file", "apply_patch", "run_tests", "grep", "list_dir", "shell", "edit_file",
         "git_diff", "search_code", "web_fetch")
MODULES = ("auth", "billing", "api", "models", "views", "pagination", "cache", "config",
           "scheduler", "storage", "search", "notifications", "export", "cli", "utils")
FUNCS = ("login", "fetch_user", "paginate", "retry_request", "parse_config", "flush_cache",
         "render_invoice", "send_digest", "migrate_schema", "resolve_path", "tokenize_query",
         "reset_password", "compute_total", "load_plugins", "handle_timeout")
UNKNOWN_VENDOR_STOPS = ("overloaded_v9", "policy_hidden_v3", "STOP ", "safety_block_2026")
MAPPED_END_STOPS = ("end_turn", "stop", "STOP", "completed")

# Scenario name -> weight, for native sessions. Each trips its stop early (before the step
# cap), then the session may go on, as logs of loops without brakes do.
NATIVE_SCENARIOS = {
    "complete": 14, "complete_no_signal": 6, "user_cancel": 3, "long": 30, "retry_storm": 10,
    "retry_near_ceiling": 4, "no_progress": 9, "tool_errors": 6, "unknown_vendor": 3,
    "token_blowup": 4, "tool_call_blowup": 4, "writes": 4, "slow": 3,
}
GATE_SCENARIOS = {"complete": 25, "long": 35, "writes": 15, "slow": 10, "retry_near_ceiling": 15}
#: Those of the varied corpus: no retries, whose details repeat by design.
VARIED_GATE_SCENARIOS = {"complete": 25, "long": 45, "writes": 15, "slow": 15}
TRACE_SCENARIOS = ("long", "no_progress", "token_blowup", "complete", "unknown_vendor",
                   "tool_call_blowup", "tool_errors", "long", "complete", "no_progress")

SECRET_RATE = 0.002  # observations that carry a secret-shaped string (details: 5 times more)
MALFORMED_RATE = 0.0001  # JSONL lines that cannot be used
MANIFEST = "corpus.manifest"  # not *.json, so ingest does not take it for a ledger
T0 = 1_796_248_800.0  # 2026-12-02T22:00:00Z, the start of the night


GENERATOR_VERSION = 2  # bump when the corpus changes, so kept corpora are made again


@dataclass
class Manifest:
    events: int
    sessions: int
    files: int
    seed: int
    lines: int = 0
    malformed: int = 0
    bytes: int = 0
    native_files: int = 0
    gate_files: int = 0
    trace_files: int = 0
    sizes: dict[str, int] = field(default_factory=dict)  # file -> bytes, as generated
    version: int = GENERATOR_VERSION

    def save(self, folder: Path) -> None:
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, folder: Path) -> Manifest | None:
        path = folder / MANIFEST
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        if data.get("version") != GENERATOR_VERSION:
            return None  # made by another version of this generator
        return cls(**data)


def iso(at: float) -> str:
    """``at`` as ISO-8601 UTC with milliseconds, as agents write it."""
    whole = int(at)
    millis = int((at - whole) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


class Text:
    """Realistic detail and observation text: test output, file reads, greps, shell output."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def path(self) -> str:
        r = self.rng
        return f"src/{r.choice(MODULES)}/{r.choice(MODULES)}.py"

    def observation(self, tool: str) -> str:
        r = self.rng
        fn = r.choice(FUNCS)
        if tool == "run_tests":
            failed = r.choice((0, 0, 1, 1, 2, 5))
            text = f"{r.randint(3, 400)} passed, {failed} failed in {r.uniform(0.2, 40):.2f}s"
            if failed:
                text += (f"\nFAILED tests/test_{r.choice(MODULES)}.py::test_{fn} - "
                         f"AssertionError: assert {r.randint(0, 99)} == {r.randint(0, 99)}")
            return text
        if tool in ("read_file", "edit_file"):
            return (f"{self.path()} ({r.randint(20, 900)} lines)\n"
                    f"def {fn}(self, {r.choice(FUNCS)}_id: int) -> dict:\n"
                    f"    return self._{r.choice(MODULES)}.get({r.choice(FUNCS)}_id)")
        if tool in ("grep", "search_code"):
            hits = ", ".join(f"{self.path()}:{r.randint(1, 800)}" for _ in range(r.randint(1, 4)))
            return f"{r.randint(1, 30)} matches for '{fn}': {hits}"
        if tool == "shell":
            return r.choice((
                f"$ make lint\n{self.path()}:{r.randint(1, 400)}:5: F401 'os' imported but unused",
                f"$ pip install -q -e .\nSuccessfully installed {r.choice(MODULES)}-"
                f"{r.randint(1, 9)}.0",
                f"$ git status --short\n M {self.path()}\n?? {self.path()}",
                f"token usage: {r.randint(100, 9000)} prompt, {r.randint(10, 900)} completion",
            ))
        if tool == "apply_patch":
            return f"patched {self.path()} (+{r.randint(1, 80)} -{r.randint(0, 40)})"
        if tool == "git_diff":
            return (f"diff --git a/{self.path()} b/{self.path()}\n"
                    f"@@ -{r.randint(1, 300)},7 +{r.randint(1, 300)},9 @@")
        if tool == "web_fetch":
            return (f"GET https://docs.example.com/{r.choice(MODULES)}/{fn} -> 200 "
                    f"({r.randint(2, 90)} kB)")
        return f"{r.randint(2, 60)} entries in src/{r.choice(MODULES)}/"

    def detail(self, tool: str) -> str:
        r = self.rng
        return r.choice((
            f"tool:{tool}",
            f"fix failing test_{r.choice(FUNCS)}",
            f"plan: move {r.choice(FUNCS)} into {self.path()}",
            f"{self.path()}",
            f"check the {r.choice(MODULES)} token refresh path",
        ))

    def round_detail(self, tool: str) -> str:
        """A seed 002 line's detail for a model round (which has none of its own)."""
        return tool

    def secret(self) -> str:
        r = self.rng
        alnum = string.ascii_letters + string.digits
        key = "".join(r.choice(alnum) for _ in range(40))
        return r.choice((
            f"\nexport OPENAI_API_KEY=sk-proj-{key}",
            f"\ncurl -H 'Authorization: Bearer {key}' https://api.example.com/v1/jobs",
            f"\nDB_PASSWORD={key[:14]} ./manage.py migrate",
            "\naws_access_key_id = AKIA"
            + "".join(r.choice(string.ascii_uppercase) for _ in range(16)),
            f"\ngit clone https://ci-bot:{key[:20]}@git.example.com/acme/app.git",
        ))


class VariedText(Text):
    """Details as varied as real tool arguments: every one different, as in the seed 002
    ledgers of issue 22 (a memo of redaction results serves none of them)."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng)
        self.words = real_corpus.Words(rng)

    def detail(self, tool: str) -> str:
        return f"{tool} {self.words.path()} {self.words.text(self.rng.randint(20, 160))}"

    round_detail = detail


# --- sessions ---------------------------------------------------------------------------------


@dataclass
class Step:
    """One event of a session, before it is written in a dialect."""

    kind: str  # round | think | read | write | retry | start | end
    tool: str | None = None
    detail: str | None = None
    observation: str | None = None
    tool_calls: int = 1
    output_tokens: int = 0
    tool_error: bool | None = None
    vendor_stop: str | None = None
    outcome: str | None = None
    dt: float = 1.0  # seconds since the previous event


class SessionMaker:
    """The events of one session for a scenario, ``length`` events long."""

    def __init__(self, rng: random.Random, text: Text) -> None:
        self.rng = rng
        self.text = text

    def round(self, tool: str | None = None, **kw: object) -> Step:
        r = self.rng
        tool = tool or r.choice(TOOLS)
        obs = self.text.observation(tool)
        if r.random() < SECRET_RATE:
            obs += self.text.secret()
        step = Step("round", tool=tool, observation=obs, tool_calls=r.choice((1, 1, 1, 2, 3)),
                    output_tokens=r.randint(40, 900), tool_error=r.random() < 0.08,
                    dt=r.uniform(0.3, 4.0))
        for key, value in kw.items():
            setattr(step, key, value)
        return step

    def action(self, kind: str | None = None, **kw: object) -> Step:
        r = self.rng
        kind = kind or r.choice(("think", "read", "read", "write"))
        tool = r.choice(TOOLS)
        detail = self.text.detail(tool)
        if r.random() < SECRET_RATE * 5:  # shell actions echo commands, credentials and all
            detail += self.text.secret()
        step = Step(kind, tool=tool, detail=detail, dt=r.uniform(0.1, 2.0))
        for key, value in kw.items():
            setattr(step, key, value)
        return step

    def filler(self) -> Step:
        return self.round() if self.rng.random() < 0.6 else self.action()

    def steps(self, scenario: str, length: int) -> list[Step]:
        r = self.rng
        head: list[Step] = []
        if scenario == "retry_storm":
            tool = r.choice(TOOLS)
            head = [self.round(), self.round(tool=tool, tool_error=False)]
            head += [self.action("retry", tool=tool, detail=f"tool:{tool}")
                     for _ in range(r.randint(3, 7))]
        elif scenario == "retry_near_ceiling":
            head = [self.filler() for _ in range(6)]
            tool = r.choice(TOOLS)
            head += [self.action("retry", tool=tool, detail=f"tool:{tool}") for _ in range(3)]
        elif scenario == "no_progress":
            tool = r.choice(TOOLS)
            same = self.text.observation(tool)
            if r.random() < 0.05:
                same += self.text.secret()
            head = [self.round(tool=tool, observation=same, tool_error=False)
                    for _ in range(r.randint(2, 5))]
        elif scenario == "tool_errors":
            head = [self.round(tool_error=True) for _ in range(r.randint(3, 5))]
        elif scenario == "unknown_vendor":
            head = [self.round(), self.round(vendor_stop=r.choice(UNKNOWN_VENDOR_STOPS))]
        elif scenario == "token_blowup":
            head = [self.round(output_tokens=r.randint(11_000, 16_000)) for _ in range(3)]
        elif scenario == "tool_call_blowup":
            head = [self.round(tool_calls=r.randint(9, 14)) for _ in range(3)]
        elif scenario == "writes":
            head = [self.action("write") for _ in range(4)]
        elif scenario == "slow":
            head = [self.round(dt=r.uniform(15, 30)) for _ in range(4)]
        body = head + [self.filler() for _ in range(max(0, length - len(head)))]
        if scenario in ("complete", "complete_no_signal", "user_cancel"):
            body = body[: min(length, 7)]
            for step in body:
                if step.tool_error:
                    step.tool_error = False
        if scenario == "complete" and body and body[-1].kind == "round":
            body[-1].vendor_stop = r.choice(MAPPED_END_STOPS)
        return body


def outcome_for(scenario: str, rng: random.Random) -> str | None:
    """The terminal signal a native log records (None: it stops without one)."""
    if scenario == "complete_no_signal" or rng.random() < 0.15:
        return None
    return {
        "complete": "task_complete", "user_cancel": "user_cancel", "no_progress": "no_progress",
        "tool_errors": "tool_error_budget", "token_blowup": "max_output_tokens",
        "tool_call_blowup": "max_tool_calls",
    }.get(scenario, rng.choice(("task_complete", "max_rounds", "user_cancel")))


# --- writers ------------------------------------------------------------------------------------


def native_lines(
    maker: SessionMaker, session_id: str, task_class: str, scenario: str, length: int,
    start: float,
) -> list[tuple[float, str]]:
    """A native session as (time, JSON line) pairs; ``length`` counts every event."""
    r = maker.rng
    outcome = outcome_for(scenario, r)
    body = maker.steps(scenario, max(1, length - 1 - (outcome is not None)))
    at = start
    out = [(at, json.dumps({"ts": iso(at), "session": session_id, "type": "start",
                            "task_class": task_class, "detail": maker.text.detail("plan")}))]
    for step in body:
        at += step.dt
        record: dict[str, object] = {"ts": iso(at), "session": session_id}
        if step.kind == "round":
            record["type"] = "round"
            record["tool_calls"] = [{"name": step.tool}] * step.tool_calls
            record["output_tokens"] = step.output_tokens
            record["tool"] = step.tool
            record["observation"] = step.observation
            record["tool_error"] = step.tool_error
            if step.vendor_stop:
                record["vendor_stop"] = step.vendor_stop
        else:
            record["type"] = "action"
            record["action"] = step.kind
            record["tool"] = step.tool
            record["detail"] = step.detail
        out.append((at, json.dumps(record)))
    if outcome is not None:
        at += r.uniform(0.1, 1.0)
        out.append((at, json.dumps({"ts": iso(at), "session": session_id, "type": "end",
                                    "outcome": outcome})))
    return out


def gate_lines(maker: SessionMaker, scenario: str, length: int) -> list[str]:
    """One seed 002 run: steps counted from 1, elapsed seconds since the run started."""
    elapsed, writes, out = 0.0, 0, []
    for n, step in enumerate(maker.steps(scenario, length), 1):
        kind = step.kind if step.kind != "round" else "think"
        writes += kind == "write"
        elapsed += step.dt
        detail = step.detail or maker.text.round_detail(step.tool)
        out.append(json.dumps({"step": n, "action": kind, "detail": detail,
                               "writes": writes, "elapsed_s": round(elapsed, 3)}))
    return out


def trace_document(maker: SessionMaker, task_class: str, scenario: str, length: int,
                   pretty: bool) -> tuple[str, int]:
    """A seed 000 trace and its number of rounds."""
    rounds = []
    for step in maker.steps(scenario, length):
        if step.kind != "round":
            step = maker.round()
        entry: dict[str, object] = {
            "tool_calls": [{"name": step.tool}] * step.tool_calls,
            "output_tokens": step.output_tokens,
            "observation": step.observation,
            "tool_error": bool(step.tool_error),
        }
        if step.vendor_stop:
            entry["vendor_stop"] = step.vendor_stop
        rounds.append(entry)
    doc = {"task": maker.text.detail("plan"), "task_class": task_class, "rounds": rounds}
    return json.dumps(doc, indent=2 if pretty else None) + "\n", len(rounds)


MALFORMED: tuple[Callable[[str], bytes], ...] = (
    lambda line: line[: len(line) // 2].encode(),  # cut short
    lambda line: line.replace('"output_tokens": ', '"output_tokens": NaN, "x": ', 1).encode(),
    lambda line: b'{"session": "\xff\xfe broken", "type": "round"}',  # not UTF-8
    lambda line: line.replace('"type": "action"', '"type": "deploy"', 1).encode(),
    lambda line: line.replace('"step": ', '"step": "three", "x": ', 1).encode(),
)


def write_jsonl(path: Path, lines: list[str], rng: random.Random, manifest: Manifest,
                mode: str = "wb") -> int:
    """Write lines (a few made malformed); returns the bytes written."""
    out = bytearray()
    for line in lines:
        good = line.encode()
        bad = rng.choice(MALFORMED)(line) if rng.random() < MALFORMED_RATE else good
        if bad == good:  # not chosen, or that breakage does not apply to this line
            out += good
        else:
            out += bad
            manifest.malformed += 1
        out += b"\n"
    with path.open(mode) as f:
        f.write(out)
    manifest.lines += len(lines)
    return len(out)


# --- the corpus ---------------------------------------------------------------------------------


def lengths(rng: random.Random, count: int, total: int) -> list[int]:
    """``count`` session lengths summing to ``total``: many short sessions, a long tail."""
    raw = [rng.paretovariate(1.6) for _ in range(count)]
    scale = total / sum(raw)
    out = [max(3, round(x * scale)) for x in raw]
    diff = total - sum(out)
    i = 0
    while diff:
        step = 1 if diff > 0 else -1
        if out[i % count] + step >= 3:
            out[i % count] += step
            diff -= step
        i += 1
    return out


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def generate(folder: Path, events: int = 1_000_000, sessions: int = 10_000, files: int = 100,
             seed: int = 1) -> Manifest:
    """Write a corpus into ``folder`` (which must be empty or missing)."""
    rng = random.Random(seed)
    text = Text(rng)
    maker = SessionMaker(rng, text)
    manifest = Manifest(events, sessions, files, seed)
    trace_files = max(1, files // 10)
    gate_files = max(1, (files - trace_files) // 6)
    native_files = max(1, files - trace_files - gate_files)
    manifest.native_files, manifest.gate_files, manifest.trace_files = (
        native_files, gate_files, trace_files)
    gate_sessions = sessions // 5
    native_sessions = max(native_files, sessions - gate_sessions - trace_files)
    mean = events / sessions
    trace_events = [round(mean)] * trace_files
    gate_events = lengths(rng, gate_sessions, round(mean * 0.3 * gate_sessions))
    native_events = lengths(
        rng, native_sessions, events - sum(trace_events) - sum(gate_events))
    folder.mkdir(parents=True, exist_ok=True)

    for n in range(trace_files):
        task_class = TASK_CLASSES[n % len(TASK_CLASSES)]
        scenario = TRACE_SCENARIOS[n % len(TRACE_SCENARIOS)]
        doc, count = trace_document(maker, task_class, scenario, trace_events[n], n % 3 == 0)
        path = folder / "traces" / f"trace-{n:02d}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(doc)
        manifest.lines += count
        manifest.bytes += len(doc.encode())

    for n in range(gate_files):
        path = folder / TASK_CLASSES[n % len(TASK_CLASSES)] / f"gate-{n:02d}.jsonl"
        gate_file(maker, path, gate_events[n::gate_files], GATE_SCENARIOS, manifest)

    for n in range(native_files):
        path = folder / TASK_CLASSES[n % len(TASK_CLASSES)] / f"host-{n:02d}.jsonl"
        path.parent.mkdir(exist_ok=True)
        lines_at = native_file(maker, f"h{n:02d}", native_events[n::native_files], T0)
        manifest.bytes += write_jsonl(path, [line for _, line in lines_at], rng, manifest)
    manifest.sizes = {
        str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*.json*"))
    }
    manifest.save(folder)
    return manifest


def gate_file(maker: SessionMaker, path: Path, run_lengths: list[int],
              scenarios: dict[str, int], manifest: Manifest) -> None:
    """A seed 002 ledger of runs one after another, ``sum(run_lengths)`` events."""
    rng = maker.rng
    carry = done = 0
    lines: list[str] = []
    for length in run_lengths:
        # a short scenario's unused events go to the next run, so the total holds
        lines += gate_lines(maker, _pick(rng, scenarios), length + carry)
        carry = length + carry - len(lines) + done
        done = len(lines)
    if carry > 0:
        lines += gate_lines(maker, "long", carry)
    path.parent.mkdir(parents=True, exist_ok=True)
    manifest.bytes += write_jsonl(path, lines, rng, manifest)


def varied_gate_corpus(folder: Path, events: int = 200_000, files: int = 20,
                       seed: int = 2) -> Manifest:
    """Seed 002 ledgers with varied details (issue 22): ``events`` in ``files`` files, runs of
    a Pareto spread of lengths, every detail different."""
    rng = random.Random(seed)
    maker = SessionMaker(rng, VariedText(rng))
    runs = max(files, events // 100)
    manifest = Manifest(events, runs, files, seed, gate_files=files)
    run_lengths = lengths(rng, runs, events)
    for n in range(files):
        path = folder / "gate" / f"gate-{n:02d}.jsonl"
        gate_file(maker, path, run_lengths[n::files], VARIED_GATE_SCENARIOS, manifest)
    manifest.sizes = {str(p.relative_to(folder)): p.stat().st_size
                      for p in sorted(folder.rglob("*.jsonl"))}
    manifest.save(folder)
    return manifest


def restore(folder: Path, manifest: Manifest) -> None:
    """Cut every file back to its generated size (undoing :func:`append`)."""
    for name, size in manifest.sizes.items():
        path = folder / name
        if path.stat().st_size < size:
            raise SystemExit(f"{path} is shorter than generated; delete {folder} to regenerate")
        if path.stat().st_size > size:
            os.truncate(path, size)


def native_file(maker: SessionMaker, prefix: str, session_lengths: list[int],
                start: float, concurrency: int = 16) -> list[tuple[float, str]]:
    """Sessions run ``concurrency`` at a time on one machine, their lines merged by time."""
    r = maker.rng
    out: list[tuple[float, str]] = []
    carry = 0
    for k, length in enumerate(session_lengths):
        begin = start + (k // concurrency) * 300 + r.uniform(0, 300)
        task_class = r.choice(TASK_CLASSES)
        scenario = _pick(r, NATIVE_SCENARIOS)
        lines = native_lines(maker, f"{prefix}-{k:05d}-{r.getrandbits(32):08x}", task_class,
                             scenario, length + carry, begin)
        carry = length + carry - len(lines)  # a short scenario's events go to the next one
        out += lines
    if carry > 0:
        out += native_lines(maker, f"{prefix}-{len(session_lengths):05d}-rest", "misc", "long",
                            carry, start)
    out.sort(key=lambda pair: pair[0])
    return out


def append(folder: Path, percent: float, seed: int = 2) -> int:
    """Append ``percent`` % more events, as new sessions, to every JSONL file; returns bytes."""
    manifest = Manifest.load(folder)
    if manifest is None:
        raise SystemExit(f"{folder}: no {MANIFEST}; generate the corpus first")
    rng = random.Random(seed)
    maker = SessionMaker(rng, Text(rng))
    targets = sorted(folder.glob("*/host-*.jsonl")) + sorted(folder.glob("*/gate-*.jsonl"))
    per_file = max(3, round(manifest.events * percent / 100 / len(targets)))
    scratch = Manifest(0, 0, 0, seed)
    written = 0
    for path in targets:
        if path.name.startswith("gate-"):
            lines = [line for length in lengths(rng, max(1, per_file // 10), per_file)
                     for line in gate_lines(maker, _pick(rng, GATE_SCENARIOS), length)]
        else:
            count = max(1, per_file // 100)
            pairs = native_file(maker, f"{path.stem}-a{seed}", lengths(rng, count, per_file),
                                T0 + 86_400)
            lines = [line for _, line in pairs]
        written += write_jsonl(path, lines, rng, scratch, mode="ab")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=None,
                        help="default: one per 100 events")
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--varied", action="store_true",
                        help="seed 002 ledgers only, every detail different (--files of them)")
    parser.add_argument("--append", type=float, metavar="PERCENT",
                        help="append PERCENT %% more events to an existing corpus")
    args = parser.parse_args()
    if args.append is not None:
        print(f"appended {append(args.folder, args.append, args.seed + 1)} bytes")
        return
    if any(args.folder.iterdir() if args.folder.exists() else ()):
        raise SystemExit(f"{args.folder} is not empty")
    sessions = args.sessions or max(1, args.events // 100)
    if args.varied:
        manifest = varied_gate_corpus(args.folder, args.events, args.files, args.seed)
    else:
        manifest = generate(args.folder, args.events, sessions, args.files, args.seed)
    print(json.dumps({k: v for k, v in asdict(manifest).items() if k != "sizes"}))


if __name__ == "__main__":
    main()
