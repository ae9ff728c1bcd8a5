"""replay_session: one session of a native ledger, replayed as ingest would, up to a byte."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.core.budget import Budget
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.ingest.replay import replay_session
from tests.helpers import rows


def write(path: Path, lines: list[object]) -> Path:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def act(session: str, action: str = "read", **extra: object) -> dict:
    return {"session": session, "type": "action", "action": action, **extra}


def test_only_the_sessions_own_lines_count(tmp_path: Path) -> None:
    path = write(tmp_path / "l.jsonl", [act("a"), act("b"), act("a", "write"), act("b")])
    session = replay_session(path, "a")
    assert session is not None
    assert (session.state.events, session.state.steps, session.state.writes) == (2, 2, 1)
    assert replay_session(path, "nobody") is None


def test_lines_from_byte_end_on_are_not_read(tmp_path: Path) -> None:
    path = write(tmp_path / "l.jsonl", [act("a"), act("a"), act("a")])
    second_end = len(path.read_bytes().split(b"\n", 2)[0]) * 2 + 2
    assert replay_session(path, "a", end=second_end).state.events == 2


def test_it_agrees_with_ingest_on_bad_and_odd_lines(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps(act("a")).encode() + b"\r\n"
        + b'{"session": "a", "type": "action", "action": "deploy"}\n'
        + b'{"session": "a", "type": "act\n'  # torn: cannot tell whose it is
        + b"\n"
        + json.dumps(act("a", "retry")).encode() + b"\n"
    )
    budget = Budget(max_steps=2)
    session = replay_session(path, "a", Options(budget=budget))
    db = tmp_path / "l.db"
    ingest(db, [path], Options(budget=budget))
    [row] = rows(db, "select * from sessions")
    assert session.row()["stop_reason"] == row["stop_reason"] == "retry_near_ceiling"
    assert session.state.events == row["events"] == 2
