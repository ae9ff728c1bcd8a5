# Seed 000's test_loop_budget.py, verbatim but for the import line (ledger.compat).
# ruff: noqa: I001  (the seed's own layout, kept as it is)
# test_loop_budget.py — labeled unexecuted until you point it at a real trace
from ledger.compat.loop_budget import LoopBudget, LoopState, StopReason, apply_round, should_stop

def test_unknown_vendor_fails_closed():
    state = LoopState(vendor_stop="policy_hidden_v3")
    assert should_stop(LoopBudget(), state) is StopReason.UNKNOWN_VENDOR

def test_repeated_observation_is_no_progress():
    budget = LoopBudget(no_progress_rounds=2)
    state = LoopState()
    apply_round(state, tools=1, tokens=10, observation="same", tool_error=False)
    apply_round(state, tools=1, tokens=10, observation="same", tool_error=False)
    assert should_stop(budget, state) is StopReason.NO_PROGRESS
