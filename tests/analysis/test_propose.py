"""A proposed budget: the tightest caps under which every verified session still completes."""

from __future__ import annotations

import json
import tempfile
import tomllib
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from msgspec.structs import replace

from ledger.analysis.propose import CAPS, Proposal, propose, to_toml, trial, trial_lines, usage
from ledger.analysis.whatif import COMPLETE, Replayer, evaluate
from ledger.cli import cli
from ledger.cli.options import EXIT_NO_VERIFIED
from ledger.config.budget_file import read_budget_file
from ledger.core.budget import Budget, BudgetError
from ledger.core.events import Event
from ledger.core.vendors import DEFAULT_VENDOR_MAP
from ledger.db.stored import VERIFIED, StoredSession, open_readonly, stored_sessions
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.strategies import ledger, write_ledger

OFF = Budget(**{key: None for key in Budget.keys()})


def session(dialect: str = "native", sid: str = "s") -> StoredSession:
    return StoredSession(sid, "work", dialect, COMPLETE, None, None, COMPLETE, OFF)


def rnd(calls: int = 1, tokens: int = 100, obs: str | None = "o", error: bool | None = False,
        elapsed: float | None = None) -> Event:
    return Event("round", tool_calls=calls, output_tokens=tokens, observation=obs,
                 tool_error=error, elapsed_s=elapsed)


# --- one session's usage ------------------------------------------------------------------


def test_usage_records_each_peak_and_the_least_cap_that_passes() -> None:
    events = [
        Event("start", elapsed_s=0.0),
        rnd(2, 300, "a", True, 1.0),
        rnd(1, 200, "a", True, 2.0),  # two errors in a row, "a" twice
        Event("write", elapsed_s=2.5),
        rnd(0, 50, "b", False, 4.25),
        Event("end", outcome="task_complete", elapsed_s=60.0),  # not a step: not a peak
    ]
    used = usage(session(), events)
    assert used.peaks == {
        "max_rounds": 3, "max_tool_calls": 3, "max_output_tokens": 550,
        "max_consecutive_tool_errors": 2, "no_progress_rounds": 2,
        "max_steps": 4, "max_writes": 1, "max_seconds": 4.25,
    }
    assert used.needs == {
        "max_rounds": 4, "max_tool_calls": 4, "max_output_tokens": 551,  # >=: peak + 1
        "max_consecutive_tool_errors": 3, "no_progress_rounds": 3,
        "max_steps": 4, "max_writes": 1, "max_seconds": 4.25,  # >: the peak
    }


def test_a_retry_near_the_end_raises_the_step_cap() -> None:
    events = [rnd(), rnd(), Event("retry"), rnd()]
    assert usage(session(), events).needs["max_steps"] == 5  # retry at step 3 needs 3 + 2


@pytest.mark.parametrize(
    ("dialect", "events", "measured"),
    [
        ("trace", [rnd(), rnd()], {"max_rounds", "max_tool_calls", "max_output_tokens",
                                   "max_consecutive_tool_errors", "no_progress_rounds"}),
        ("gate", [Event("think", elapsed_s=1.0), Event("write", elapsed_s=2.0)],
         {"max_steps", "max_writes", "max_seconds"}),
        ("native", [Event("round", observation="x")],
         {"max_rounds", "no_progress_rounds", "max_steps"}),
    ],
)
def test_only_caps_the_dialect_is_held_to_and_can_measure(dialect, events, measured) -> None:
    assert set(usage(session(dialect), events).needs) == measured


# --- the proposal ---------------------------------------------------------------------------


def test_the_proposal_takes_the_largest_need_and_explains_every_cap() -> None:
    small = usage(session(sid="a"), [rnd(1, 100, None, None)])
    large = usage(session(sid="b"), [rnd(3, 900, None, None), rnd(0, 0, None, None)])
    proposal = propose("work", [small, large])
    values = {line.key: line.value for line in proposal.lines}
    assert values == {
        "max_rounds": 3, "max_tool_calls": 4, "max_output_tokens": 901,
        "max_consecutive_tool_errors": None, "no_progress_rounds": None, "max_cost": None,
        "max_steps": 2, "max_writes": None, "max_seconds": None,
    }
    notes = {line.key: line.note for line in proposal.lines}
    assert notes["max_rounds"] == (
        "rounds: peak 2, measured in 2 of 2 verified sessions; cap = the peak + 1"
    )
    assert notes["no_progress_rounds"].startswith("FAIL CLOSED: no verified session carries "
                                                  "the observations meter")
    assert notes["max_writes"].startswith("FAIL CLOSED")
    assert proposal.budget == Budget(**values)


def test_gate_caps_are_not_applicable_to_a_class_of_traces() -> None:
    proposal = propose("work", [usage(session("trace"), [rnd()])])
    gate = [line for line in proposal.lines if line.key in ("max_steps", "max_writes")]
    assert all(line.value is None and line.note.startswith("not applicable") for line in gate)


def test_the_toml_is_a_budget_file_labelled_a_proposal(tmp_path: Path) -> None:
    proposal = propose('odd "class"\nname', [usage(session(), [rnd(elapsed=1.5)])], "a b.db")
    text = to_toml(proposal)
    assert text.startswith("# PROPOSAL — not a tested budget.")
    assert "agent-ledger what-if 'a b.db' --budget-file THIS_FILE" in text
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    assert Budget.from_mapping(read_budget_file(str(path))) == proposal.budget
    assert tomllib.loads(text)["budget"]["max_writes"] == "off"


# --- the proposal against whole ledgers -----------------------------------------------------


def proposal_for(db: Path, task_class: str) -> Proposal:
    with closing(open_readonly(str(db))) as conn:
        usages = [usage(s, ev) for s, ev in stored_sessions(conn, task_class, VERIFIED)]
        proposal = propose(task_class, usages, str(db))
        return trial(proposal, stored_sessions(conn, task_class), DEFAULT_VENDOR_MAP)


def verified_stops(db: Path, task_class: str, budget: Budget) -> list[str]:
    """Verified sessions of the class that ``budget`` stops."""
    with closing(open_readonly(str(db))) as conn:
        replayer = Replayer(lambda _stored: budget, DEFAULT_VENDOR_MAP)
        sessions = stored_sessions(conn, task_class, VERIFIED)
        return [v.session_id for v in evaluate(sessions, replayer) if v.new.reason != COMPLETE]


def one_notch_lower(value: int | float, key: str) -> int | float | None:
    lowered = round(value - 0.001, 3) if isinstance(value, float) else value - 1
    floor = 1 if key == "no_progress_rounds" else 0
    return lowered if lowered >= floor else None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions=ledger(sessions=5, outcome="task_complete"))
def test_the_proposal_passes_every_verified_session_and_one_notch_less_would_not(
    sessions,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        ingest(db, [write_ledger(Path(tmp) / "runs", sessions)], Options(budget=OFF))
        for task_class in {s[0]["task_class"] for s in sessions}:
            proposal = proposal_for(db, task_class)
            if not proposal.verified:
                continue  # every session of the class hit an unmapped vendor string
            assert proposal.verified_stopped == []
            assert verified_stops(db, task_class, proposal.budget) == []
            for line in proposal.lines:
                lower = None if line.value is None else one_notch_lower(line.value, line.key)
                if lower is not None:
                    tighter = replace(proposal.budget, **{line.key: lower})
                    assert verified_stops(db, task_class, tighter), line


def test_the_sample_proposal_for_refactor(sample_db: Path) -> None:
    proposal = proposal_for(sample_db, "refactor")
    assert proposal.verified == 1
    assert proposal.budget == Budget(
        max_rounds=4, max_tool_calls=7, max_output_tokens=2371, max_consecutive_tool_errors=1,
        no_progress_rounds=2, max_steps=None, max_writes=None, max_seconds=None,
    )
    stopped = {v.session_id: (v.new.reason, v.new.at, v.change) for v in proposal.stopped}
    assert stopped == {
        "0d35d469e4d4": ("no_progress", 3, None),
        "811be5e93b95": ("max_rounds", 4, "earlier"),
        "ca1ccbfdeb56": ("max_output_tokens", 1, "earlier"),
    }


# --- the command ----------------------------------------------------------------------------


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_prints_a_loadable_proposal(sample_db: Path, tmp_path: Path) -> None:
    result = invoke("propose-budget", sample_db, "--task-class", "refactor")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("# PROPOSAL")
    assert "3 of 4 stored sessions stop before they run out (0 of the 1 verified" in result.output
    path = tmp_path / "refactor.toml"
    path.write_text(result.stdout, encoding="utf-8")
    check = invoke("what-if", sample_db, "--budget-file", path, "--task-class", "refactor",
                   "--json")
    changes = {c["session_id"]: c["change"] for c in json.loads(check.output)["changes"]}
    assert changes == {"811be5e93b95": "earlier", "ca1ccbfdeb56": "earlier"}


def test_cli_proposals_of_several_classes_printed_say_a_budget_file_holds_one(
    sample_db: Path, tmp_path: Path
) -> None:
    result = invoke("propose-budget", sample_db)
    assert result.exit_code == 0
    assert ("note: 2 proposals, one per task class ('bugfix', 'refactor'); a --budget-file "
            "holds one") in result.stderr
    path = tmp_path / "budget.toml"
    path.write_text(result.stdout, encoding="utf-8")  # what `... > budget.toml` makes
    with pytest.raises(BudgetError, match=r"2 \[budget\] tables: .* --task-class CLASS"):
        read_budget_file(str(path))


def test_cli_one_proposal_per_class_into_a_folder(sample_db: Path, tmp_path: Path) -> None:
    result = invoke("propose-budget", sample_db, "--output-dir", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["bugfix.toml", "refactor.toml"]
    for path in (tmp_path / "out").iterdir():
        Budget.from_mapping(read_budget_file(str(path)))
    assert "note: task class 'docs': no session completed with a verified terminal signal" in (
        result.output
    )


def _refuse_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder that cannot be written (as root, chmod would not stop the test)."""
    def refused(self: Path, *_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_text", refused)


@pytest.mark.parametrize(
    ("folder", "refuse", "message"),
    [
        ("a-file/out", False, "a-file/out: cannot be made (Not a directory)"),
        ("out", True, "out/bugfix.toml: cannot be written (Permission denied)"),
    ],
    ids=["under-a-file", "unwritable"],
)
def test_cli_an_output_dir_that_cannot_be_written_is_one_line(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str,
    refuse: bool, message: str,
) -> None:
    (tmp_path / "a-file").write_text("")
    if refuse:
        _refuse_writes(monkeypatch)
    result = invoke("propose-budget", sample_db, "--output-dir", tmp_path / folder)
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output


def test_cli_json(sample_db: Path) -> None:
    result = invoke("propose-budget", sample_db, "--json")
    data = json.loads(result.stdout)
    assert [p["task_class"] for p in data["proposals"]] == ["bugfix", "refactor"]
    assert data["unverified_task_classes"] == ["docs"]
    bugfix = data["proposals"][0]
    assert bugfix["budget"]["max_writes"] == 1
    assert bugfix["trial"]["verified_stopped"] == 0
    assert {c["key"] for c in bugfix["caps"]} == {c.key for c in CAPS}


@pytest.mark.parametrize("task_class", ["docs", "nope"])
def test_cli_nothing_to_propose_from_exits_4(sample_db: Path, task_class: str) -> None:
    result = invoke("propose-budget", sample_db, "--task-class", task_class)
    assert result.exit_code == EXIT_NO_VERIFIED == 6
    assert "completed with a verified terminal signal: no budget can be proposed" in result.output


def test_the_trial_says_what_the_proposal_would_have_saved() -> None:
    """Verified: two rounds of $0.10, so max_cost is $0.21 (and max_rounds 3). A runaway of
    five rounds stops at its third ($0.30 spent): the proposal would have saved $0.20."""
    def paid(n: int) -> list[Event]:
        return [Event("round", tool_calls=0, output_tokens=1, cost=0.1) for _ in range(n)]

    proposal = propose("work", [usage(session(sid="v"), paid(2))])
    assert proposal.budget.max_cost == 0.21
    runaway = StoredSession("r", "work", "native", COMPLETE, None, None, None, OFF, 0.5)
    trial(proposal, [(session(sid="v"), paid(2)), (runaway, paid(5))], DEFAULT_VENDOR_MAP)
    (stopped,) = proposal.stopped
    assert (stopped.session_id, stopped.new.at, stopped.saved_usd) == ("r", 3, 0.2)
    found = proposal.to_dict()["trial"]
    assert (found["cost_usd"], found["saved_usd"]) == (0.5, 0.2)
    assert "they would have saved $0.20 (40%)" in "\n".join(trial_lines(proposal))
