"""The recorder: agents write native events; the budget decides live what replay decides later."""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.budget import Budget
from ledger.core.reasons import StopReason
from ledger.ingest.files import LedgerPathError
from ledger.ingest.options import Options
from ledger.ingest.replay import replay, replay_session
from ledger.live.recorder import BudgetExceeded, Recorder, open_session
from tests.helpers import ROOT
from tests.live.test_deadline import DEADLINES, FAMILY, SLACK, wait_gone

R = StopReason
SCHEMA = json.loads((ROOT / "ledger" / "schema" / "native-event.schema.json").read_text())
NOON = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)
NO_CAPS = Budget(**{key: None for key in Budget.keys()})


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "agent.jsonl"


@pytest.fixture
def start(ledger: Path, clock: Clock) -> Callable[..., Recorder]:
    ledger.parent.mkdir(exist_ok=True)

    def start(budget: Budget | None = None, **options: Any) -> Recorder:
        options.setdefault("session", "s1")
        options.setdefault("task_class", "bugfix")
        options.setdefault("clock", clock)
        return open_session(ledger, budget=budget, now=lambda: NOON, **options)

    return start


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def replayed(path: Path, budget: Budget, session: str = "s1") -> tuple[str, int | None]:
    row = next(r for rows, _ in replay([path], Options(budget=budget)) for r in rows
               if r["session_id"] == session)
    return row["stop_reason"], row["stop_at"]


# --- what is written ------------------------------------------------------------------------


def test_a_session_is_written_as_native_events(start, ledger: Path, clock: Clock) -> None:
    with start() as rec:
        clock.now += 2.5
        rec.action("think", "plan the fix")
        clock.now += 1.25
        rec.round(tool_calls=[{"name": "run_tests", "input": {"k": "v"}}], output_tokens=420,
                  observation="1 failed", tool_error=True, vendor_stop="tool_use")
        rec.close("task_complete")
    ts = "2026-11-29T12:00:00.000Z"
    assert lines(ledger) == [
        {"ts": ts, "session": "s1", "type": "start", "task_class": "bugfix", "elapsed_s": 0.0},
        {"ts": ts, "session": "s1", "type": "action", "action": "think",
         "detail": "plan the fix", "elapsed_s": 2.5},
        {"ts": ts, "session": "s1", "type": "round", "tool": "run_tests", "tool_calls": 1,
         "output_tokens": 420, "observation": "1 failed", "tool_error": True,
         "vendor_stop": "tool_use", "elapsed_s": 3.75},
        {"ts": ts, "session": "s1", "type": "end", "outcome": "task_complete", "elapsed_s": 3.75},
    ]
    for event in lines(ledger):
        jsonschema.validate(event, SCHEMA)


def test_a_session_id_is_generated_time_sortable_and_unique(ledger: Path) -> None:
    ledger.parent.mkdir()
    before = datetime.now(UTC).strftime("%Y%m%d")
    a, b = open_session(ledger), open_session(ledger)
    after = datetime.now(UTC).strftime("%Y%m%d")  # (the same day, but across a midnight)
    assert a.session != b.session
    assert a.session[:8] in {before, after}


def test_elapsed_time_comes_from_the_monotonic_clock_at_full_precision(start, clock) -> None:
    rec = start()
    clock.now += 1 / 3
    rec.action("read", "x")
    assert rec.elapsed() == lines(rec.path)[-1]["elapsed_s"] == (1000.0 + 1 / 3) - 1000.0
    assert rec.remaining_seconds() == pytest.approx(45.0 - 1 / 3)
    assert start(NO_CAPS, session="s2").remaining_seconds() is None


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: r.action("deploy", "x"), "unknown action 'deploy'"),
        (lambda r: r.round(output_tokens=-1), "must not be negative"),
        (lambda r: r.round(tool_calls=True), "must be a whole number"),
        (lambda r: r.action("read", 42), "must be a string"),
        (lambda r: r.close("done"), "'done' is not a valid StopReason"),
        (lambda r: r.action("read", "bad \ud800 text"), "lone surrogate"),
    ],
)
def test_an_event_the_reader_would_refuse_is_never_written(start, call, message) -> None:
    rec = start()
    before = rec.path.read_bytes()
    with pytest.raises(ValueError, match=message):
        call(rec)
    assert rec.path.read_bytes() == before
    assert rec.state.events == 1


def test_the_ledgers_folder_is_created(tmp_path: Path) -> None:
    rec = open_session(tmp_path / "runs" / "2026" / "agent.jsonl")
    assert lines(rec.path)[0]["type"] == "start"


def test_native_events_do_not_go_into_a_gate_ledger(ledger: Path) -> None:
    ledger.parent.mkdir()
    ledger.write_text('{"step": 1, "action": "think", "detail": "plan", "writes": 0}\n')
    with pytest.raises(LedgerPathError, match="a gate ledger; native events go to a file"):
        open_session(ledger)


# --- secrets ----------------------------------------------------------------------------------


def test_secrets_are_redacted_before_they_are_written(start, ledger: Path) -> None:
    rec = start(task_class="api_key=sk-abcdefghijklmnopqrstuvwxyz123456")
    rec.action("read", "curl -H 'Authorization: Bearer abcdef123456'", tool="password=hunter2")
    rec.round(tool_calls=1, observation="AKIAQ7W3E4R5T6Y2U3I4 in .env")
    text = ledger.read_text()
    for secret in ("sk-abcdef", "abcdef123456", "hunter2", "AKIAQ7W3E4R5T6Y2U3I4"):
        assert secret not in text
    assert "[REDACTED:aws-access-key] in .env" in text
    assert rec.redactions == 4


def test_no_progress_sees_redacted_observations_live_and_in_replay(start, ledger) -> None:
    # Two observations that differ only in a secret are the same observation once redacted.
    budget = Budget(no_progress_rounds=2)
    rec = start(budget)
    rec.round(tool_calls=1, observation="login failed: password=first-try")
    with pytest.raises(BudgetExceeded) as raised:
        rec.round(tool_calls=1, observation="login failed: password=second-try")
    assert (raised.value.reason, raised.value.at) == (R.NO_PROGRESS, 3)
    assert replayed(ledger, budget) == ("no_progress", 3)


# --- the gate ---------------------------------------------------------------------------------


def test_the_event_that_trips_the_budget_is_written_then_raises(start, ledger) -> None:
    rec = start(Budget(max_steps=2))
    rec.action("read", "a")
    rec.action("read", "b")
    with pytest.raises(BudgetExceeded, match=r"^steps 3 > 2$") as raised:
        rec.action("read", "c")
    exc = raised.value
    assert (exc.reason, exc.detail, exc.at, exc.session) == (R.MAX_STEPS, "steps 3 > 2", 4, "s1")
    assert isinstance(exc, RuntimeError)
    assert lines(ledger)[-1]["detail"] == "c"


def test_a_stopped_session_stays_stopped(start, ledger) -> None:
    rec = start(Budget(max_steps=4))
    for _ in range(3):
        rec.action("read")
    with pytest.raises(BudgetExceeded, match="retry blocked near step ceiling"):
        rec.action("retry", "again")
    for call in (lambda: rec.action("read"), lambda: rec.round(tool_calls=0)):
        with pytest.raises(BudgetExceeded) as raised:
            call()
        assert (raised.value.reason, raised.value.at) == (R.RETRY_NEAR_CEILING, 5)
    rec.close()  # markers are not steps: closing never raises
    assert len(lines(ledger)) == 8


@pytest.mark.parametrize(
    ("budget", "drive", "reason", "at"),
    [
        (Budget(max_rounds=2), lambda r, c: [r.round(observation=str(i)) for i in range(2)],
         R.MAX_ROUNDS, 3),
        (Budget(max_tool_calls=3), lambda r, c: r.round(tool_calls=["a", "b", "c"]),
         R.MAX_TOOL_CALLS, 2),
        (Budget(max_output_tokens=100), lambda r, c: r.round(output_tokens=100),
         R.MAX_OUTPUT_TOKENS, 2),
        (Budget(max_consecutive_tool_errors=2),
         lambda r, c: [r.action("read", tool_error=True) for _ in range(2)],
         R.TOOL_ERROR_BUDGET, 3),
        (Budget(), lambda r, c: r.round(vendor_stop="policy_hidden_v3"), R.UNKNOWN_VENDOR, 2),
        (Budget(max_writes=1), lambda r, c: [r.action("write") for _ in range(2)],
         R.MAX_WRITES, 3),
        (Budget(max_seconds=10), lambda r, c: (setattr(c, "now", c.now + 10.5),
                                               r.action("think")), R.MAX_SECONDS, 2),
    ],
)
def test_every_cap_raises_live_where_replay_stops(start, ledger, clock, budget, drive, reason,
                                                  at) -> None:
    rec = start(budget)
    with pytest.raises(BudgetExceeded) as raised:
        drive(rec, clock)
    assert (raised.value.reason, raised.value.at) == (reason, at)
    assert replayed(ledger, budget) == (reason.value, at)


def test_the_context_manager_records_the_outcome(start, ledger) -> None:
    with pytest.raises(BudgetExceeded), start(Budget(max_writes=0)) as rec:
        rec.action("write", "patch")
    assert lines(ledger)[-1]["outcome"] == "max_writes"
    with start(session="s2"):
        pass
    with pytest.raises(KeyError), start(session="s3"):
        raise KeyError("crash")
    ends = [e for e in lines(ledger) if e["type"] == "end"]
    assert [(e["session"], e.get("outcome")) for e in ends] == [
        ("s1", "max_writes"), ("s2", None), ("s3", None)]


# --- tools under the wall clock -------------------------------------------------------------


def test_a_tool_run_is_recorded_with_its_outcome(start, ledger) -> None:
    rec = start(clock=time.monotonic, session="tools")
    assert rec.run(["sh", "-c", "exit 0"]).ok
    result = rec.run("echo out; exit 2", shell=True, action="write", capture_output=True,
                     text=True)
    assert (result.returncode, result.stdout) == (2, "out\n")
    events = lines(ledger)[1:]
    assert [(e["action"], e["tool"], e["detail"], e["tool_error"]) for e in events] == [
        ("read", "sh", "sh: exit 0", False),
        ("write", "echo", "echo: exit 2", True),
    ]


def test_a_tool_past_the_wall_clock_is_killed_and_the_budget_raises(start, ledger) -> None:
    """Under the first budget of DEADLINES the tool is started within: from the session's
    start to the tool's takes a few ms on an idle machine, more on a loaded one, and a run
    where the budget ran out first (the tool not started) shows nothing here."""
    for n, seconds in enumerate(DEADLINES):
        session = f"slow{n}"
        rec = start(Budget(max_seconds=seconds), clock=time.monotonic, session=session)
        message = rf"^elapsed \d+\.\ds > {re.escape(str(seconds))}s$"
        with pytest.raises(BudgetExceeded, match=message) as raised:
            rec.run(["sh", "-c", FAMILY], grace=0.2, capture_output=True, text=True)
        last = lines(ledger)[-1]
        if not last["detail"].startswith("sh: not started"):
            break
    else:
        pytest.fail(f"the tool was not started within {DEADLINES[-1]} s")
    assert (raised.value.reason, raised.value.at) == (R.MAX_SECONDS, 2)
    assert re.fullmatch(r"sh: killed after \d+\.\ds \(wall-clock budget\)", last["detail"])
    assert last["tool_error"] is True
    assert seconds < last["elapsed_s"] < seconds + 0.2 + SLACK
    assert replayed(ledger, Budget(max_seconds=seconds), session) == ("max_seconds", 2)
    # The next tool is not even started.
    with pytest.raises(BudgetExceeded):
        rec.run(["touch", str(ledger.parent / "never")])
    assert not (ledger.parent / "never").exists()
    assert lines(ledger)[-1]["detail"] == "touch: not started (session stopped)"


def test_a_tool_the_budget_would_refuse_is_not_started(start, ledger, tmp_path) -> None:
    rec = start(Budget(max_writes=0))
    marker = tmp_path / "patched"
    with pytest.raises(BudgetExceeded, match=r"^writes 1 > 0$"):
        rec.run(["touch", str(marker)], action="write")
    assert not marker.exists()
    last = lines(ledger)[-1]
    assert (last["action"], last["detail"]) == ("write", "touch: not started (writes 1 > 0)")
    assert "tool_error" not in last


def test_the_tool_and_its_children_are_gone_after_the_kill(start, tmp_path: Path) -> None:
    """Under the first budget of DEADLINES the shell gets far enough within (it has written
    both pids): a run where it did not shows nothing, and a loaded machine may need longer."""
    for n, seconds in enumerate(DEADLINES):
        rec = start(Budget(max_seconds=seconds), clock=time.monotonic, session=f"s{n}")
        pids = tmp_path / f"pids-{n}"
        with pytest.raises(BudgetExceeded):
            rec.run(["sh", "-c", f'sleep 300 & echo "$$ $!" > {pids}.new; mv {pids}.new {pids}; '
                     "wait"], grace=0.2)
        if pids.exists():
            break
    else:
        pytest.fail(f"the shell did not write its pids within {DEADLINES[-1]} s")
    shell, grandchild = (int(pid) for pid in pids.read_text().split())
    assert wait_gone(shell) and wait_gone(grandchild)


# --- live equals replay -----------------------------------------------------------------------

observations = st.sampled_from(
    [None, "", "a", "b", "same", "password=one", "password=two", "x" * 5000]
)
vendor_stops = st.sampled_from(
    [None, "end_turn", "tool_use", "max_tokens", "completed", "length", "policy_hidden_v3"]
)
rounds = st.fixed_dictionaries({
    "tool_calls": st.one_of(st.none(), st.integers(0, 6), st.lists(st.sampled_from("ab"))),
    "output_tokens": st.one_of(st.none(), st.integers(0, 6000)),
    "observation": observations,
    "tool_error": st.sampled_from([None, False, True]),
    "vendor_stop": vendor_stops,
}).map(lambda kw: ("round", kw))
actions = st.fixed_dictionaries({
    "action": st.sampled_from(["think", "read", "write", "retry"]),
    "detail": st.sampled_from([None, "tool:read", "token=abc123"]),
    "tool_error": st.sampled_from([None, False, True]),
    "observation": observations,
}).map(lambda kw: ("action", kw))
ticks = st.floats(0, 20, allow_nan=False).map(lambda s: ("tick", s))
sessions = st.lists(st.tuples(st.sampled_from(["s1", "s2"]), st.one_of(rounds, actions, ticks)),
                    min_size=4, max_size=40)


def cap(low: int, high: int) -> st.SearchStrategy[int | None]:
    """A cap from ``low`` to ``high``, or off (about one time in four)."""
    off = max(1, (high - low) // 3)
    return st.integers(low - off, high).map(lambda n: None if n < low else n)


budgets = st.builds(
    Budget,
    max_rounds=cap(0, 10), max_tool_calls=cap(0, 30), max_output_tokens=cap(0, 20_000),
    max_consecutive_tool_errors=cap(0, 4), no_progress_rounds=cap(1, 4),
    max_steps=cap(0, 12), max_writes=cap(0, 4),
    max_seconds=st.one_of(st.none(), st.floats(0, 60, allow_nan=False)),
)


@settings(max_examples=200, deadline=None)
@given(ops=sessions, budget=budgets)
def test_live_decisions_equal_replay_decisions(tmp_path_factory, ops, budget) -> None:
    path = tmp_path_factory.mktemp("live") / "agent.jsonl"
    clock = Clock()
    recorders = {sid: open_session(path, "prop", budget, session=sid, clock=clock)
                 for sid in ("s1", "s2")}
    first: dict[str, tuple[str, int]] = {}
    for sid, (kind, kw) in ops:
        if kind == "tick":
            clock.now += kw
            continue
        rec = recorders[sid]
        try:
            rec.round(**kw) if kind == "round" else rec.action(**kw)
        except BudgetExceeded as exc:
            raised = (exc.reason.value, exc.at)
            assert first.setdefault(sid, raised) == raised  # once stopped, stopped the same
    for rec in recorders.values():
        rec.close()

    options = Options(budget=budget)
    [(replayed_rows, put_aside)] = replay([path], options)
    assert put_aside == []
    rows = {r["session_id"]: r for r in replayed_rows}
    for sid, rec in recorders.items():
        expected = first.get(sid, ("task_complete", None))
        assert (rows[sid]["stop_reason"], rows[sid]["stop_at"]) == expected
        assert (rec.state.stop_reason, rec.state.stop_at) == (
            R(expected[0]) if expected[1] else None, expected[1])
        assert replay_session(path, sid, options).state == rec.state


# --- the example of docs/recording.md runs as written ----------------------------------------


def readme_example() -> str:
    text = (ROOT / "docs" / "recording.md").read_text()
    after = text.split("Wrapping a tool\ndispatch:\n\n```python\n", 1)[1]
    return after.split("```", 1)[0]


class Call:
    def __init__(self, name: str) -> None:
        self.name, self.args = name, {"path": "main.py"}


class Reply:
    def __init__(self, calls: list[Call], stop: str) -> None:
        self.tool_calls, self.output_tokens, self.stop_reason = calls, 120, stop


class Model:
    """Asks for a tool ``rounds`` times, then answers; never stops if ``rounds`` is None."""

    def __init__(self, rounds: int | None) -> None:
        self.left = rounds

    def complete(self, messages: list) -> Reply:
        if self.left == 0:
            return Reply([], "end_turn")
        self.left = None if self.left is None else self.left - 1
        return Reply([Call("read_file")], "tool_use")


@pytest.mark.parametrize(("rounds", "stop"), [(3, "task_complete"), (None, "max_rounds")])
def test_the_readme_example_runs(tmp_path, monkeypatch, rounds, stop) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    versions = itertools.count()  # the file changes, so every observation is new
    names = {
        "model": Model(rounds), "messages": [], "ACTION_CLASS": {"read_file": "read"},
        "TOOLS": {"read_file": lambda path: f"{path}, version {next(versions)}"},
        "tool_messages": lambda reply, results: list(results),
    }
    if stop == "task_complete":
        exec(readme_example(), names)
    else:
        with pytest.raises(BudgetExceeded):
            exec(readme_example(), names)
    [(sessions, errors)] = replay([tmp_path / "runs"], Options(budget=Budget(max_steps=40,
                                                                           max_seconds=600)))
    [session] = sessions
    assert errors == [] and session["stop_reason"] == stop
    assert (session["task_class"], session["steps"]) == ("bugfix", 7 if rounds else 24)
    # The log's own terminal signal: the vendor's end_turn, or the end the with block wrote.
    assert session["recorded_stop"] == ("task_complete" if rounds else "max_rounds")
