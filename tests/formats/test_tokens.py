"""Every token count, checked against figures counted apart from the ledger.

``tests/fixtures/expected_tokens.json`` holds, for each real log (the samples
here, and the 32 Claude Code and Codex files of ``shared/fixtures/real-agent-logs/more/``
beside the repository when it is there, as in CI), figures counted from the raw JSON by a
separate script (Claude Code: one API response per ``message.id`` and ``requestId``, each
usage count its largest over the response's lines; Codex: the last ``token_count``) and, for
Claude Code, what ccusage 20.0.24 (``ccusage session --json --offline``) reports for the file:
every count of every Claude Code file is ccusage's (18.0.11 kept a streamed response's first,
partial ``output_tokens``, its issue 901, and counted lines without a ``requestId`` once each,
its issue 976; 20.0.24 does neither). For Codex the file also keeps what @ccusage/codex 18.0.11
reports: it adds up the ``last_token_usage`` of every ``token_count`` event, so a rollout that
re-emits unchanged counts is counted more than once there (see docs/conformance.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.ingest.replay import replay
from tests.helpers import FIXTURES, MORE_LOGS, REAL_LOGS, real_log

TABLE = json.loads((FIXTURES / "expected_tokens.json").read_text())
COUNTS = ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens")


def totals(path: Path) -> dict[str, Any]:
    """A file's sessions added up (its main session and its sub-agents')."""
    (sessions, _errors), = list(replay([path]))
    found: dict[str, Any] = {"models": []}
    for row in sessions:
        for key in ("rounds", "tool_calls", "reasoning_tokens", *COUNTS):
            if row[key] is not None:
                found[key] = found.get(key, 0) + row[key]
        found["models"] += [m for m in (row["models"] or "").split(",") if m]
    return found


@pytest.mark.parametrize("name", sorted(TABLE["claude_code"]))
def test_claude_code_tokens_are_the_counts_taken_from_the_raw_json(name: str) -> None:
    want = TABLE["claude_code"][name]
    got = totals(real_log(name))
    for key in ("rounds", "tool_calls", *COUNTS):
        # (a log whose usage has no cache fields, as Bedrock's, stores NULL: counted as 0)
        assert got.get(key, 0) == want[key], key
    assert sorted(set(got["models"])) == sorted(want["models"])


@pytest.mark.parametrize("name", sorted(TABLE["claude_code"]))
def test_claude_code_tokens_are_ccusages(name: str) -> None:
    theirs = TABLE["claude_code"][name]["ccusage"]
    got = totals(real_log(name))
    assert {key: got.get(key, 0) for key in COUNTS} == theirs


@pytest.mark.parametrize("name", sorted(TABLE["codex"]))
def test_codex_tokens_add_up_to_the_last_cumulative_token_count(name: str) -> None:
    last = TABLE["codex"][name]["last_total_token_usage"]
    got = totals(real_log(name))
    if last is None:  # a rollout without token_count lines carries no token meter
        assert [got.get(k) for k in COUNTS if k != "output_tokens"] == [None, None, None]
        return
    assert got["output_tokens"] == last["output_tokens"]
    assert got["reasoning_tokens"] == last["reasoning_output_tokens"]
    assert got["cache_read_tokens"] == last["cached_input_tokens"]
    assert got["input_tokens"] + got["cache_read_tokens"] == last["input_tokens"]
    assert "cache_creation_tokens" not in got  # Codex does not report cache writes


def test_the_table_covers_every_real_claude_code_and_codex_file() -> None:
    mine = {p.name for p in REAL_LOGS.glob("0*.jsonl")}
    assert mine == {n for n in (*TABLE["claude_code"], *TABLE["codex"]) if "/" not in n}
    if (MORE_LOGS / "more").exists():
        more = {f"more/{p.parent.name}/{p.name}" for kind in ("claude-code", "codex")
                for p in (MORE_LOGS / "more" / kind).glob("*.jsonl")}
        assert more == {n for n in (*TABLE["claude_code"], *TABLE["codex"]) if "/" in n}
