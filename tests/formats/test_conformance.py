"""Every real log against figures counted by hand: rounds, tool calls, file-edit writes and
the log's own stop, per file (its main session and its sub-agents added up).

``tests/fixtures/expected_sessions.json`` is written by ``scripts/hand_count.py``, which reads
the raw JSON with the standard library and none of ``ledger`` (its doc gives the rules). The
samples shipped in ``tests/fixtures/real-agent-logs/`` are always checked; the files of
``../shared/fixtures/real-agent-logs/more/`` when that folder is beside the repository (as in
CI). Token counts are checked in test_tokens.py; docs/conformance.md has the whole table.
Each file is ingested alone with every cap off, so a stop is the log's, not the budget's.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.core.budget import Budget
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import FIXTURES, MORE_LOGS, REAL_LOGS, ROOT, real_log

TABLE = json.loads((FIXTURES / "expected_sessions.json").read_text())
NAMES = sorted(n for n in TABLE if not n.startswith("_"))
NO_CAPS = Budget(**dict.fromkeys(Budget.keys()))
EDITS = ("Edit", "MultiEdit", "Write", "NotebookEdit", "apply_patch")


@pytest.fixture(scope="module")
def count(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], dict[str, Any]]:
    """What the ledger makes of a file alone, ingested once for all the tests of this module."""
    done: dict[str, dict[str, Any]] = {}

    def of(name: str) -> dict[str, Any]:
        if name not in done:
            done[name] = counted(real_log(name), tmp_path_factory.mktemp("conformance"))
        return done[name]

    return of


def counted(path: Path, folder: Path) -> dict[str, Any]:
    """What the ledger makes of ``path`` alone, in the hand count's terms."""
    db = folder / "ledger.db"
    ingest(db, [path], Options(budget=NO_CAPS))
    with sqlite3.connect(db) as conn:
        rounds, calls, writes = conn.execute(
            "select sum(rounds), sum(tool_calls), sum(writes) from sessions"
        ).fetchone()
        marks = ",".join("?" * len(EDITS))
        edits = dict(conn.execute(
            f"select action, count(*) from steps where tool in ({marks}) group by action", EDITS
        ).fetchall())
        write_steps = conn.execute("select count(*) from steps where action = 'write'").fetchone()
        stops = [r[0] for r in conn.execute(
            "select recorded_stop from sessions where parent_session_id is null"
        )] or [r[0] for r in conn.execute("select recorded_stop from sessions")]
    return {
        "rounds": rounds, "tool_calls": calls, "edit_writes": edits.get("write", 0)
        + edits.get("retry", 0), "edit_actions": set(edits), "stop": stops,
        "writes": writes, "write_steps": write_steps[0],
    }


@pytest.mark.parametrize("field", ["rounds", "tool_calls", "edit_writes", "stop"])
@pytest.mark.parametrize("name", NAMES)
def test_each_file_is_its_hand_count(
    name: str, field: str, count: Callable[[str], dict[str, Any]]
) -> None:
    want = TABLE[name]
    got = count(name)
    if field == "stop":  # the main session's recorded stop (a sub-agent file: its own)
        assert got["stop"] == [want["stop"]]
    else:
        assert got[field] == want[field]


@pytest.mark.parametrize("name", NAMES)
def test_an_edit_is_a_write_and_the_writes_are_the_write_steps(
    name: str, count: Callable[[str], dict[str, Any]]
) -> None:
    got = count(name)
    assert not got["edit_actions"] & {"read", "think"}  # (its round and end steps name it too)
    assert got["writes"] == got["write_steps"]


def test_the_table_is_the_hand_count_of_every_real_file() -> None:
    """The table is what the script prints now: no figure was edited by hand after it ran,
    and it covers every Claude Code and Codex file present."""
    if not (MORE_LOGS / "more").exists():
        assert set(NAMES) >= {p.name for p in REAL_LOGS.glob("0[1-5]_*.jsonl")}
        pytest.skip("../shared/fixtures/real-agent-logs/more/ is not beside the repo")
    printed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "hand_count.py")],
        check=True, capture_output=True, text=True,
    ).stdout
    assert json.loads(printed) == TABLE
