"""Time ingest on Claude Code and Codex logs in their real layouts and shape, on its own.

Generates the corpus of :mod:`real_corpus` (deterministic for a seed), then times ``ingest``
of both folders from scratch, and again after a tenth of the Claude Code transcripts grew by
a response (only the new bytes are read). ``run.py --quick`` measures the same corpus against
ccusage and the raw line limit; this is the short way to see ingest alone.

Usage::

    python bench/agent_logs.py bench/data/agent-logs --claude-mb 100 --codex-mb 30
    python bench/agent_logs.py bench/data/agent-logs --generate-only
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import real_corpus  # noqa: E402

from ledger.ingest.ingester import ingest  # noqa: E402


def timed(db: Path, folder: Path, label: str) -> None:
    began = time.perf_counter()
    summary = ingest(db, [folder / "claude" / "projects", folder / "codex" / "sessions"])
    took = time.perf_counter() - began
    mb = summary.bytes_read / 1e6
    print(f"{label}: {summary.files} files, {summary.lines:,} lines, {mb:,.1f} MB, "
          f"{len(summary.sessions):,} sessions, {took:.1f} s "
          f"({summary.lines / took:,.0f} lines/s, {mb / took:.1f} MB/s)")


def main() -> None:
    parser = real_corpus.corpus_parser(__doc__)
    parser.add_argument("--generate-only", action="store_true")
    args = parser.parse_args()
    shutil.rmtree(args.folder, ignore_errors=True)
    began = time.perf_counter()
    manifest = real_corpus.generate(args.folder, args.claude_mb, args.codex_mb,
                                    args.claude_files, args.seed)
    print(f"generated {len(manifest.sizes):,} transcripts, {manifest.bytes / 1e6:.0f} MB, "
          f"in {time.perf_counter() - began:.1f} s")
    if args.generate_only:
        return
    db = args.folder / "ledger.db"
    timed(db, args.folder, "first ingest")
    real_corpus.grow(args.folder, max(1, args.claude_files // 10))
    timed(db, args.folder, "after growth")


if __name__ == "__main__":
    main()
