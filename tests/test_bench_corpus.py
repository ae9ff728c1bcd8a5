"""The benchmark's real-log-shaped corpus (bench/real_corpus.py) checks itself: agent-ledger
ingest reads all of it and puts nothing aside, its line sizes and record mix are what
bench/README.md records of the real samples, no text repeats, and a seed gives the same bytes.
No figure here is a time."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import cli

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import generate  # noqa: E402
import real_corpus  # noqa: E402
import real_shape  # noqa: E402

#: Measured shares of lines of the main kinds (bench/README.md), and how far off they may be
#: on a corpus this small (a few thousand lines).
SHARES = {
    "claude-code": {"user/tool_result": 0.291, "assistant/tool_use": 0.290,
                    "assistant/text": 0.140, "progress/hook_progress": 0.076,
                    "assistant/thinking": 0.065, "user/text": 0.037},
    "codex": {"event_msg/token_count": 0.200, "response_item/function_call": 0.143,
              "response_item/function_call_output": 0.142, "turn_context": 0.100,
              "response_item/reasoning": 0.085},
}
SHARE_TOLERANCE = 0.05
#: p10 to p90 of the line sizes may be this far (relatively) from the measured ones.
SIZE_TOLERANCE = 0.25


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, real_corpus.Manifest]:
    folder = tmp_path_factory.mktemp("real")
    return folder, real_corpus.generate(folder, claude_mb=3, codex_mb=1.5, claude_files=24,
                                        seed=7)


@pytest.fixture(scope="module")
def shapes(corpus: tuple[Path, real_corpus.Manifest]) -> dict[str, real_shape.Shape]:
    return real_shape.measure([corpus[0]])


def ingest(db: Path, *paths: Path) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["ingest", str(db), *map(str, paths), "--json",
                                      "--no-progress", "--strict"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_real_layouts(corpus: tuple[Path, real_corpus.Manifest]) -> None:
    folder, manifest = corpus
    names = list(manifest.sizes)
    assert all(n.startswith(("claude/projects/", "codex/sessions/")) for n in names)
    assert any("/subagents/agent-" in n for n in names)
    assert sum(n.startswith("claude/") for n in names) == 24
    assert all(Path(n).name.startswith("rollout-") for n in names if n.startswith("codex/"))


def test_ingest_reads_everything_and_puts_nothing_aside(
        corpus: tuple[Path, real_corpus.Manifest], tmp_path: Path) -> None:
    folder, manifest = corpus
    summary = ingest(tmp_path / "ledger.db", folder / "claude" / "projects",
                     folder / "codex" / "sessions")
    assert summary["files"] == len(manifest.sizes)
    assert summary["lines"] == manifest.lines
    assert summary["bytes_read"] == manifest.bytes
    assert (summary["errors"], summary["skipped"], summary["unknown_records"]) == (0, [], {})


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_line_sizes_are_the_measured_ones(shapes: dict[str, real_shape.Shape],
                                          kind: str) -> None:
    made = real_shape.quantiles(shapes[kind].sizes)
    for q, got, want in zip(real_shape.QUANTILES, made, real_corpus.LINE_BYTES[kind],
                            strict=True):
        if 0.1 <= q <= 0.9:
            assert abs(got - want) <= SIZE_TOLERANCE * want, (kind, q, got, want)


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_record_mix_is_the_measured_one(shapes: dict[str, real_shape.Shape], kind: str) -> None:
    lines = len(shapes[kind].sizes)
    for record, share in SHARES[kind].items():
        got = len(shapes[kind].kinds[record]) / lines
        assert abs(got - share) <= SHARE_TOLERANCE, (kind, record, got, share)


@pytest.mark.parametrize("kind", ["claude-code", "codex"])
def test_no_text_repeats(shapes: dict[str, real_shape.Shape], kind: str) -> None:
    assert shapes[kind].unique_texts() == 1.0


def test_a_seed_gives_the_same_bytes(tmp_path: Path) -> None:
    made = [real_corpus.generate(tmp_path / str(n), 0.2, 0.1, 4, seed=3) for n in (1, 2)]
    assert made[0].sizes == made[1].sizes
    for name in made[0].sizes:
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes()


def test_grown_files_are_ingested_and_restored(tmp_path: Path) -> None:
    folder = tmp_path / "real"
    manifest = real_corpus.generate(folder, 0.3, 0.1, 6, seed=5)
    db = tmp_path / "ledger.db"
    first = ingest(db, folder)
    added, lines = real_corpus.grow(folder, 3)
    again = ingest(db, folder)
    assert (again["updated_files"], again["lines"], again["bytes_read"]) == (3, lines, added)
    assert again["errors"] == 0 and first["errors"] == 0
    real_corpus.restore(folder, manifest)
    assert all((folder / n).stat().st_size == s for n, s in manifest.sizes.items())


def test_varied_seed_002_details_all_differ(tmp_path: Path) -> None:
    manifest = generate.varied_gate_corpus(tmp_path / "varied", events=3000, files=3)
    details: Counter[str] = Counter()
    for path in (tmp_path / "varied").rglob("*.jsonl"):
        for line in path.read_bytes().splitlines():
            try:
                details[json.loads(line)["detail"]] += 1
            except (ValueError, KeyError, TypeError):
                pass  # a line made malformed on purpose
    assert sum(details.values()) == manifest.lines - manifest.malformed
    assert max(details.values()) == 1
