"""The shape of real agent logs: line sizes, record mix and text diversity, by log kind.

    .venv/bin/python bench/real_shape.py                        # the real samples
    .venv/bin/python bench/real_shape.py bench/data/real-100mb  # a generated corpus, to compare

With no argument it reads the real public samples (``../shared/fixtures/real-agent-logs/``
and its ``more/`` folder, where they exist, and the licensed samples in
``tests/fixtures/real-agent-logs/``), never copying them. It prints, for Claude Code and for
Codex, the line-size quantiles, each record kind's share of the lines and of the bytes with
its own size quantiles, and two measures of diversity: the share of texts (tool inputs and
outputs, messages) that occur once, and how far zlib compresses the bytes. The figures in
``bench/README.md`` and the tables of :mod:`real_corpus` come from this output.
"""

from __future__ import annotations

import argparse
import re
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
REAL = (ROOT.parent / "shared" / "fixtures" / "real-agent-logs",
        ROOT / "tests" / "fixtures" / "real-agent-logs")
CLAUDE, CODEX = "claude-code", "codex"
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
_decode = msgspec.json.Decoder().decode


def claude_kind(record: dict[str, Any]) -> str:
    """A Claude Code line's kind: its type, and the content block or subtype it holds."""
    kind = record.get("type")
    if kind in ("user", "assistant"):
        content = (record.get("message") or {}).get("content")
        if isinstance(content, str):
            return f"{kind}/text"
        blocks = [b.get("type", "?") for b in content or () if isinstance(b, dict)]
        return f"{kind}/{'+'.join(dict.fromkeys(blocks)) or 'empty'}"
    if kind == "system":
        return f"system/{record.get('subtype')}"
    if kind == "progress":
        return f"progress/{(record.get('data') or {}).get('type')}"
    return str(kind)


def codex_kind(record: dict[str, Any]) -> str:
    """A Codex rollout line's kind: its type and its payload's type."""
    payload = record.get("payload")
    inner = payload.get("type") if isinstance(payload, dict) else None
    return f"{record.get('type')}/{inner}" if inner else str(record.get("type"))


SAME_BY_DESIGN = frozenset({"id", "uuid", "signature", "cwd"})  # ids, the session's folder


def texts(record: dict[str, Any]) -> Iterator[str]:
    """The free texts of a line (tool inputs and outputs, messages, reasoning)."""
    stack: list[Any] = [record.get("message") or record.get("payload") or record.get("data")]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if len(value) >= 40:
                yield value
        elif isinstance(value, dict):
            stack += [v for k, v in value.items() if k not in SAME_BY_DESIGN]
        elif isinstance(value, list):
            stack += value


@dataclass
class Shape:
    """What was measured over the lines of one log kind."""

    files: int = 0
    sizes: list[int] = field(default_factory=list)
    kinds: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    text_counts: Counter[int] = field(default_factory=Counter)
    stored: int = 0  # bytes as stored (redacted, where a sample was)
    compressed: int = 0
    bad: int = 0

    def add_file(self, data: bytes, kind_of: Any) -> None:
        self.files += 1
        self.stored += len(data)
        self.compressed += len(zlib.compress(data, 6))
        for line in data.splitlines(keepends=True):
            size = unredacted_size(line)
            self.sizes.append(size)
            try:
                record = _decode(line)
            except msgspec.DecodeError:
                self.bad += 1
                continue
            if not isinstance(record, dict):
                self.bad += 1
                continue
            self.kinds[kind_of(record)].append(size)
            self.text_counts.update(hash(t) for t in texts(record))

    @property
    def bytes(self) -> int:
        return sum(self.sizes)

    def unique_texts(self) -> float:
        """The share of texts that occur once."""
        total = sum(self.text_counts.values())
        return sum(1 for c in self.text_counts.values() if c == 1) / total if total else 1.0

    def zlib_ratio(self) -> float:
        """How far zlib shrinks the bytes as stored (a measure of repetition)."""
        return self.stored / self.compressed if self.compressed else 0.0


_PLACEHOLDER = re.compile(rb"\[REDACTED_[A-Z_]+ len=(\d+) sha=[0-9a-f]+\]")


def unredacted_size(line: bytes) -> int:
    """A line's size with its newline, as it was before its publisher redacted it: some
    public samples replace each text by ``[REDACTED_OUTPUT len=136 sha=...]``, which states
    the text's length (counted as that many bytes, escapes aside)."""
    size = len(line) if line.endswith(b"\n") else len(line) + 1
    for match in _PLACEHOLDER.finditer(line):
        size += int(match.group(1)) - len(match.group(0))
    return size


def quantiles(values: Iterable[int]) -> list[int]:
    ordered = sorted(values)
    if not ordered:
        return [0] * len(QUANTILES)
    return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in QUANTILES]


def log_kind(path: Path, first: bytes) -> str | None:
    """Claude Code, Codex, or neither, from a file's first lines."""
    if path.suffix != ".jsonl":
        return None
    if b'"payload"' in first and (b'"session_meta"' in first or b'"response_item"' in first
                                  or b'"event_msg"' in first or b'"turn_context"' in first):
        return CODEX
    if any(mark in first for mark in (b'"sessionId"', b'"leafUuid"', b'"file-history-snapshot"')):
        return CLAUDE
    return None


def measure(paths: Iterable[Path]) -> dict[str, Shape]:
    """The shape of every Claude Code and Codex file under ``paths`` (each file once)."""
    shapes = {CLAUDE: Shape(), CODEX: Shape()}
    seen: set[bytes] = set()
    files = sorted({f for p in paths for f in ([p] if p.is_file() else p.rglob("*.jsonl"))})
    for path in files:
        data = path.read_bytes()
        kind = log_kind(path, data[:20_000])
        digest = zlib.crc32(data).to_bytes(4, "big") + len(data).to_bytes(8, "big")
        if kind is None or digest in seen:  # the in-repo samples are also in shared/
            continue
        seen.add(digest)
        shapes[kind].add_file(data, claude_kind if kind == CLAUDE else codex_kind)
    return shapes


def report(shapes: dict[str, Shape]) -> str:
    """Markdown tables of the measured shape."""
    out = ["| quantile | " + " | ".join(f"p{round(q * 100)}" for q in QUANTILES) + " |",
           "|---|" + "---|" * len(QUANTILES)]
    for name, shape in shapes.items():
        out.append(f"| {name} line bytes | " + " | ".join(map(str, quantiles(shape.sizes)))
                   + " |")
    for name, shape in shapes.items():
        lines, size = len(shape.sizes), shape.bytes
        out += ["", f"**{name}**: {shape.files} files, {lines:,} lines, {size:,} bytes; "
                f"texts that occur once: {shape.unique_texts():.1%}; zlib ratio "
                f"{shape.zlib_ratio():.1f}x; unreadable lines: {shape.bad}", "",
                "| kind | lines | share of lines | share of bytes | p10 | p50 | p90 | max |",
                "|---|---|---|---|---|---|---|---|"]
        for kind, sizes in sorted(shape.kinds.items(), key=lambda kv: -len(kv[1])):
            q = quantiles(sizes)
            out.append(f"| {kind} | {len(sizes)} | {len(sizes) / lines:.1%} | "
                       f"{sum(sizes) / size:.1%} | {q[1]} | {q[3]} | {q[5]} | {q[-1]} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", type=Path, nargs="*", help="default: the real samples")
    args = parser.parse_args()
    paths = args.paths or [p for p in REAL if p.exists()]
    print(report(measure(paths)))


if __name__ == "__main__":
    main()
