"""max_cost in the replays of all three seed dialects (issue 19, item 6), and live.

A trace (seed 000) and a native ledger carry a cost per round, or the model and tokens that
price it; a gate ledger (seed 002) has no rounds, so max_cost does not apply to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.analysis.whatif import Replayer
from ledger.config.prices import LIBRARY, library_version, load_prices
from ledger.core.budget import Budget
from ledger.core.events import Event
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.ingest.replay import replay
from ledger.live.recorder import BudgetExceeded, open_session
from tests.helpers import rows as db_rows

CAP = Budget(max_rounds=None, max_tool_calls=None, max_output_tokens=None, max_cost=1.0)
#: claude-opus-4-6: $25 per million output tokens, so 20,000 output tokens are $0.50.
PRICED = {"model": "claude-opus-4-6", "input_tokens": 0, "output_tokens": 20_000}


def rows(path: Path, options: Options) -> list[dict]:
    ((sessions, errors),) = list(replay([path], options))
    assert errors == []
    return sessions


def only(path: Path, budget: Budget = CAP, **kwargs) -> dict:
    (session,) = rows(path, Options(budget=budget, **kwargs))
    return session


@pytest.mark.parametrize("money", [{"cost": 0.5}, PRICED], ids=["cost", "tokens+model"])
def test_a_trace_stops_at_max_cost(tmp_path, money) -> None:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"task": "t", "rounds": [dict(money) for _ in range(4)]}))
    session = only(path)
    assert (session["stop_reason"], session["stop_at"]) == ("max_cost", 2)


@pytest.mark.parametrize("money", [{"cost": 0.5}, PRICED], ids=["cost", "tokens+model"])
def test_a_native_ledger_stops_at_max_cost(tmp_path, money) -> None:
    path = tmp_path / "run.jsonl"
    lines = [{"session": "s", "type": "start"}]
    lines += [{"session": "s", "type": "round", **money} for _ in range(3)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    session = only(path)
    assert (session["stop_reason"], session["stop_at"]) == ("max_cost", 3)  # start is event 1
    assert "cost" in session["meters"]


def test_an_unpriced_model_is_a_meter_gap_not_a_stop(tmp_path) -> None:
    path = tmp_path / "run.jsonl"
    rounds = [{"session": "s", "type": "round", **PRICED, "model": "acme-coder-2"}] * 3
    path.write_text("".join(json.dumps(line) + "\n" for line in rounds))
    session = only(path)
    assert session["stop_reason"] == "task_complete"
    assert "cost" not in session["meters"]


def test_a_prices_file_prices_a_private_model(tmp_path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."acme-coder-2"]\ninput = 0\noutput = 50\n')
    path = tmp_path / "run.jsonl"
    rounds = [{"session": "s", "type": "round", **PRICED, "model": "acme-coder-2"}] * 3
    path.write_text("".join(json.dumps(line) + "\n" for line in rounds))
    session = only(path, prices=load_prices(prices))
    assert (session["stop_reason"], session["stop_at"]) == ("max_cost", 1)  # $1.00 >= $1


def test_a_gate_ledger_is_never_stopped_by_max_cost(tmp_path) -> None:
    """Seed 002's checkpoints are not model rounds and carry no usage: the cap does not apply
    (even at 0), and the session keeps its own gate caps."""
    path = tmp_path / "gate.jsonl"
    path.write_text("".join(
        json.dumps({"step": i, "action": "read", "writes": 0}) + "\n" for i in range(1, 4)
    ))
    session = only(path, Budget(max_cost=0.0))
    assert session["stop_reason"] == "task_complete"
    assert "cost" not in session["meters"]


def test_the_recorder_stops_live_where_the_replay_stops(tmp_path) -> None:
    path = tmp_path / "live.jsonl"
    with pytest.raises(BudgetExceeded) as caught, open_session(path, budget=CAP) as rec:
        for _ in range(5):
            rec.round(output_tokens=20_000, model="claude-opus-4-6", input_tokens=0)
    assert (caught.value.reason, caught.value.at) == ("max_cost", 3)
    replayed = only(path)
    assert (replayed["stop_reason"], replayed["stop_at"]) == ("max_cost", 3)


def test_what_if_replays_a_new_money_cap() -> None:
    events = [Event("round", cost=0.4) for _ in range(5)]
    replayer = Replayer(lambda stored: Budget.from_mapping({"max_cost": "1.2"}, stored), {})
    stop = replayer.stop(Budget(max_rounds=None), "native", events)
    assert (stop.reason, stop.at) == ("max_cost", 3)


def native(*rounds: dict) -> str:
    return "".join(
        json.dumps({"session": "s", "type": "round", **r}) + "\n" for r in rounds
    )


def test_the_session_row_keeps_its_spend_and_who_priced_it(tmp_path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(native(PRICED, {"cost": 0.25}, {"output_tokens": 3}))
    (session,) = rows(path, Options())
    assert session["cost_usd"] == pytest.approx(0.75)
    assert session["price_source"] == f"{LIBRARY} {library_version()}, log"
    path.write_text(native({"output_tokens": 3}))
    (session,) = rows(path, Options())
    assert (session["cost_usd"], session["price_source"]) == (None, None)


def test_the_spend_read_in_pieces_is_the_spend_read_at_once(tmp_path) -> None:
    """Incremental equals one-shot: the cost and its sources are saved with the state."""
    lines = native(PRICED, {"cost": 0.25}, PRICED, {**PRICED, "model": "acme-coder-2"})
    whole, pieces = tmp_path / "whole", tmp_path / "pieces"
    whole.mkdir()
    pieces.mkdir()
    (whole / "run.jsonl").write_text(lines)
    ingest(tmp_path / "whole.db", [whole])
    cut = lines.splitlines(keepends=True)
    for n in range(1, len(cut) + 1):
        (pieces / "run.jsonl").write_text("".join(cut[:n]))
        ingest(tmp_path / "pieces.db", [pieces])
    query = "select stop_reason, cost_usd, price_source, meters from sessions"
    assert db_rows(tmp_path / "pieces.db", query) == db_rows(tmp_path / "whole.db", query)
    (row,) = db_rows(tmp_path / "whole.db", query)
    assert row["cost_usd"] == pytest.approx(1.25)
