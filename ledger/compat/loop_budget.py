"""Seed 000's ``loop_budget`` on agent-ledger's machine: change one import, keep the code.

``LoopBudget``, ``LoopState``, ``apply_round``, ``should_stop``, ``observation_hash`` and
``replay_trace`` keep the seed's names, fields, defaults and results; underneath,
``apply_round`` is :func:`ledger.core.budget.apply`, ``should_stop`` is the machine's check (loop
caps only, seed 000's vendor map) and ``replay_trace`` reads the trace with the ingest's parser.

``StopReason`` is agent-ledger's own enum: seed 000's eight members with the same values, plus
the gate's four, so a reason returned here is the value the database stores. One difference:
budgets the seed would misread are refused with :class:`~ledger.core.budget.BudgetError` (a
``no_progress_rounds`` below 1, negative caps).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.core.budget import LOOP, Budget, Machine, State, apply
from ledger.core.events import ROUND, Event, observation_hash
from ledger.core.reasons import SEED_VENDOR_MAP, StopReason
from ledger.formats.seed_dialects import RecordError, parse_json, trace_rounds

__all__ = [
    "LoopBudget", "LoopState", "StopReason", "apply_round", "observation_hash", "replay_trace",
    "should_stop",
]


@dataclass(frozen=True)
class LoopBudget:
    max_rounds: int = 12
    max_tool_calls: int = 24
    max_output_tokens: int = 32_000
    max_consecutive_tool_errors: int = 3
    no_progress_rounds: int = 2

    def machine(self) -> Machine:
        """The machine with these loop caps (the gate's switched off) and seed 000's map."""
        budget = Budget(
            max_rounds=self.max_rounds,
            max_tool_calls=self.max_tool_calls,
            max_output_tokens=self.max_output_tokens,
            max_consecutive_tool_errors=self.max_consecutive_tool_errors,
            no_progress_rounds=self.no_progress_rounds,
            max_steps=None,
            max_writes=None,
            max_seconds=None,
        )
        return Machine(budget, {LOOP}, SEED_VENDOR_MAP)


@dataclass
class LoopState:
    rounds: int = 0
    tool_calls: int = 0
    output_tokens: int = 0
    consecutive_tool_errors: int = 0
    observation_hashes: list[str] = field(default_factory=list)
    last_stop: StopReason | None = None
    vendor_stop: str | None = None

    def machine_state(self) -> State:
        """The machine's view: counters, and the run of identical hashes at the end."""
        hashes = self.observation_hashes
        repeats = 0
        for digest in reversed(hashes):
            if digest != hashes[-1]:
                break
            repeats += 1
        return State(
            rounds=self.rounds,
            steps=self.rounds,
            tool_calls=self.tool_calls,
            output_tokens=self.output_tokens,
            consecutive_tool_errors=self.consecutive_tool_errors,
            last_observation_hash=hashes[-1] if hashes else None,
            observation_repeats=repeats,
        )


def should_stop(budget: LoopBudget, state: LoopState) -> StopReason | None:
    # A seed round carries every loop meter (the seed reads missing ones as "" and false),
    # so the machine checks them all, in the seed's order.
    seed_round = Event(ROUND, vendor_stop=state.vendor_stop, observation="", tool_error=False)
    found = budget.machine().check(state.machine_state(), seed_round)
    return found[0] if found else None


def apply_round(
    state: LoopState, *, tools: int, tokens: int, observation: str, tool_error: bool
) -> LoopState:
    ours = state.machine_state()
    apply(ours, Event(
        ROUND, tool_calls=tools, output_tokens=tokens, observation=observation,
        tool_error=bool(tool_error),
    ))
    state.rounds = ours.rounds
    state.tool_calls = ours.tool_calls
    state.output_tokens = ours.output_tokens
    state.consecutive_tool_errors = ours.consecutive_tool_errors
    state.observation_hashes.append(observation_hash(observation))
    return state


def replay_trace(path: str, budget: LoopBudget) -> StopReason:
    """Replay a seed 000 trace file; a round the seed could not read raises ``ValueError``."""
    with open(path, "rb") as handle:
        _, rounds = trace_rounds(parse_json(handle.read()))
    machine, state = budget.machine(), State()
    for _, item in rounds:
        if isinstance(item, RecordError):
            raise item
        reason = machine.advance(state, item.event)
        if reason is not None:
            return reason
    return StopReason.TASK_COMPLETE
