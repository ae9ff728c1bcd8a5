"""Stop reasons: one enum of stable string values, and the decision table that explains them.

The values are a public contract: they are stored in the database, printed by the CLI and
matched by users' SQL. Never rename one; add new reasons at the end.
"""

from __future__ import annotations

from enum import StrEnum

from msgspec import Struct


class StopReason(StrEnum):
    # Seed 000: the loop budget.
    TASK_COMPLETE = "task_complete"
    MAX_ROUNDS = "max_rounds"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_OUTPUT_TOKENS = "max_output_tokens"
    USER_CANCEL = "user_cancel"
    TOOL_ERROR_BUDGET = "tool_error_budget"
    NO_PROGRESS = "no_progress"
    UNKNOWN_VENDOR = "unknown_vendor"
    # Seed 002: the client-side gate.
    MAX_STEPS = "max_steps"
    MAX_WRITES = "max_writes"
    MAX_SECONDS = "max_seconds"
    RETRY_NEAR_CEILING = "retry_near_ceiling"
    # Issue 19: money, in seed 000's loop family.
    MAX_COST = "max_cost"

    def __str__(self) -> str:  # so f-strings and click.echo print the stable value
        return self.value


#: Marker used in vendor maps for strings that mean "the loop goes on" (a tool call was
#: requested, a turn was paused): not a stop, and not an unknown vendor string either.
CONTINUE = "continue"

#: Seed 000's VENDOR_STOP_MAP, exactly. The machine's default map extends it (see vendors.py).
SEED_VENDOR_MAP: dict[str, str] = {
    "completed": "task_complete",
    "max_iterations": "max_rounds",
    "tool_limit": "max_tool_calls",
    "length": "max_output_tokens",
    "cancelled": "user_cancel",
    "empty_assistant": "no_progress",
}


class Decision(Struct, frozen=True):
    """One row of the decision table: what to observe, what to do, when to fail closed."""

    reason: StopReason
    seed: str
    must_observe: str
    safe_action: str
    fail_closed_if_missing: str
    description: str


DECISION_TABLE: tuple[Decision, ...] = (
    Decision(
        StopReason.TASK_COMPLETE, "000",
        "Model or tool reports a terminal, verified result",
        "Return the diff and close the loop",
        "No verifier, only a chatty summary",
        "The session ran to its end without tripping any cap. Check recorded_stop: a complete "
        "with no terminal signal from the vendor is not a verified completion.",
    ),
    Decision(
        StopReason.MAX_ROUNDS, "000",
        "Round counter in your process",
        "Stop, emit partial log, do not retry blindly",
        "Host has no round counter",
        "The number of model rounds reached max_rounds.",
    ),
    Decision(
        StopReason.MAX_TOOL_CALLS, "000",
        "Tool dispatcher increment",
        "Stop and require a human or a smaller task",
        "Tools fire outside your dispatcher",
        "The number of tool calls reached max_tool_calls.",
    ),
    Decision(
        StopReason.MAX_OUTPUT_TOKENS, "000",
        "Tokenizer or vendor usage field you trust",
        "Stop and split the task",
        "Usage field is absent or delayed",
        "Output tokens summed over the rounds reached max_output_tokens.",
    ),
    Decision(
        StopReason.USER_CANCEL, "000",
        "A cancel signal from the user or the vendor runtime",
        "Stop at once and keep the partial log",
        "Cancels are not recorded in the log",
        "The vendor or the user cancelled the run (recorded stop only: the budget never "
        "produces it).",
    ),
    Decision(
        StopReason.TOOL_ERROR_BUDGET, "000",
        "Consecutive tool failures",
        "Stop and surface the last stderr",
        "Errors are swallowed as empty tool results",
        "Consecutive tool errors reached max_consecutive_tool_errors.",
    ),
    Decision(
        StopReason.NO_PROGRESS, "000",
        "Repeated observation hashes",
        "Stop and ask for a narrower instruction",
        "You only log model text, not observations",
        "The last no_progress_rounds observations were identical.",
    ),
    Decision(
        StopReason.UNKNOWN_VENDOR, "000",
        "Unmapped vendor stop string",
        "Keep paid path; do not guess",
        "You alias it to task_complete",
        "The vendor sent a stop string that the vendor map does not know. Fails closed.",
    ),
    Decision(
        StopReason.MAX_STEPS, "002",
        "Client step counter (every model call and tool action is a step)",
        "Raise BudgetExceeded and refuse the pending action",
        "Steps are counted by the model, not the client",
        "A step was taken beyond max_steps.",
    ),
    Decision(
        StopReason.MAX_WRITES, "002",
        "Write actions classified by the client",
        "Refuse the write and open the ledger",
        "Tools are not classified, so writes go uncounted",
        "A write was taken beyond max_writes.",
    ),
    Decision(
        StopReason.MAX_SECONDS, "002",
        "Monotonic wall clock since the session started",
        "Kill the process; do not ask the model for more time",
        "No elapsed time in the log, or no OS-level timeout around shell tools",
        "A step was taken after more than max_seconds of wall-clock time.",
    ),
    Decision(
        StopReason.RETRY_NEAR_CEILING, "002",
        "A retry action with at most one step left",
        "Do not retry; raise BudgetExceeded",
        "Retries are not classified apart from first attempts",
        "A retry was attempted when steps >= max_steps - 1.",
    ),
    Decision(
        StopReason.MAX_COST, "000",
        "A usage field and a price you trust (or the vendor's own cost per round)",
        "Stop and report the spend",
        "The model has no price or the log has no usage",
        "The cost summed over the rounds reached max_cost (US dollars), checked after the "
        "round that spent it.",
    ),
)

DECISIONS: dict[StopReason, Decision] = {d.reason: d for d in DECISION_TABLE}
