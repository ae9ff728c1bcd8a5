"""The budget state machine: one pure, deterministic machine for both seeds.

Two families of caps, each with its own seed's boundary:

* the *loop* caps of seed 000 (``max_rounds``, ``max_tool_calls``, ``max_output_tokens``,
  ``max_consecutive_tool_errors``, ``no_progress_rounds`` and the fail-closed vendor check) are
  checked with ``>=`` *after* a step has been applied, in seed 000's order; ``max_cost`` (USD,
  the paid agents' own money cap) joins them, checked after the round that spends it;
* the *gate* caps of seed 002 (``max_steps``, ``max_writes``, ``max_seconds`` and the retry
  near the step ceiling) are checked with ``>`` when a step is *taken*, in seed 002's order.

A dialect is held to its own seed's family (a seed 002 ledger is never cut by ``max_rounds``);
native events are held to both. The first cap to trip is the session's stop; events after it
are still counted, so the counters always describe the whole log.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from msgspec import Struct
from msgspec.structs import asdict, replace

from ledger.core.events import MARKERS, ROUND, Event, observation_hash
from ledger.core.reasons import SEED_VENDOR_MAP, StopReason

LOOP = "loop"
GATE = "gate"
FAMILIES = frozenset({LOOP, GATE})

_UNKNOWN = StopReason.UNKNOWN_VENDOR.value
OFF_WORDS = frozenset({"off", "none", "null", ""})
#: Keys measured in fractions (seconds, dollars); every other key is a whole count.
FRACTIONAL = frozenset({"max_seconds", "max_cost"})
INF = float("inf")


class BudgetError(ValueError):
    """A budget key or value that cannot be used."""


class Budget(Struct, frozen=True, dict=True):
    """Caps in force. ``None`` switches a cap off. Defaults are the seeds' own.

    (A msgspec struct, as the fold's other records: a dataclass costs every process 0.5 to
    0.9 ms to make and imports ``dataclasses``; ``dict``: room for the cached values below.)
    """

    # Seed 000
    max_rounds: int | None = 12
    max_tool_calls: int | None = 24
    max_output_tokens: int | None = 32_000
    max_consecutive_tool_errors: int | None = 3
    no_progress_rounds: int | None = 2
    #: US dollars: seed 000's "runaway bill" as a cap (no seed default: off).
    max_cost: float | None = None
    # Seed 002
    max_steps: int | None = 8
    max_writes: int | None = 2
    max_seconds: float | None = 45.0

    def __post_init__(self) -> None:
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise BudgetError(f"{name} must be a number or 'off', not {value!r}")
            if name not in FRACTIONAL and not isinstance(value, int):
                raise BudgetError(f"{name} must be a whole number, not {value!r}")
            if value != value or value in (INF, -INF):  # NaN never trips; inf is 'off'
                raise BudgetError(f"{name} must be a finite number or 'off', not {value!r}")
            if value < 0:
                raise BudgetError(f"{name} must be 0 or more, not {value!r}")
        if self.no_progress_rounds is not None and self.no_progress_rounds < 1:
            raise BudgetError("no_progress_rounds must be 1 or more (or 'off')")

    @classmethod
    def keys(cls) -> list[str]:
        return list(cls.__struct_fields__)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], base: Budget | None = None) -> Budget:
        """Build a budget from ``{key: value}``; values may be numbers or strings ('off')."""
        unknown = sorted(set(values) - set(cls.keys()))
        if unknown:
            raise BudgetError(
                f"unknown budget key {unknown[0]!r}; known keys: {', '.join(cls.keys())}"
            )
        return replace(base or cls(), **{k: _coerce(k, v) for k, v in values.items()})

    @classmethod
    def from_assignments(cls, pairs: Iterable[str], base: Budget | None = None) -> Budget:
        """Parse ``KEY=VALUE`` strings, as given to ``--budget``."""
        values: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                raise BudgetError(f"expected KEY=VALUE, got {pair!r}")
            values[key.strip()] = value.strip()
        return cls.from_mapping(values, base)

    # A budget is frozen, so its dict, JSON and digest are worked out once: every session's
    # row and saved state carry them (asdict three times per session touched by a batch cost
    # about 0.2 us per event).

    def to_dict(self) -> dict[str, int | float | None]:
        return dict(self._values)  # a copy: the caller may change it

    @cached_property
    def _values(self) -> dict[str, int | float | None]:
        return asdict(self)

    def to_json(self) -> str:
        return self._json

    @cached_property
    def _json(self) -> str:
        return json.dumps(self._values, sort_keys=True)

    @cached_property
    def digest(self) -> str:
        """A short, stable name for this budget, stored with every session."""
        return hashlib.sha256(self._json.encode()).hexdigest()[:12]


def _coerce(key: str, value: Any) -> int | float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in OFF_WORDS):
        return None
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            number = float(text)
        except ValueError:
            raise BudgetError(f"{key} must be a number or 'off', not {value!r}") from None
        if key in FRACTIONAL:
            return number
        if not number.is_integer() or not text.lstrip("+-").isdigit():
            raise BudgetError(f"{key} must be a whole number, not {value!r}")
        return int(text)
    if key in FRACTIONAL and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


class State(Struct):
    """Counters after the last event applied. Plain data, so it can be saved and resumed."""

    events: int = 0
    rounds: int = 0
    steps: int = 0
    tool_calls: int = 0
    output_tokens: int = 0
    cost: float = 0.0  # USD, over the rounds that carried a cost
    price_source: str | None = None  # who priced its rounds (ledger.core.pricing.note_source)
    tool_errors: int = 0
    consecutive_tool_errors: int = 0
    writes: int = 0
    elapsed_s: float | None = None
    last_observation_hash: str | None = None
    observation_repeats: int = 0
    stop_reason: StopReason | None = None
    stop_at: int | None = None
    stop_detail: str | None = None

    @property
    def stopped(self) -> bool:
        return self.stop_reason is not None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)  # every field is a scalar: a shallow copy is a copy
        data["stop_reason"] = self.stop_reason.value if self.stop_reason else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> State:
        state = cls(**{k: v for k, v in data.items() if k in _STATE_FIELDS})
        if state.stop_reason is not None:
            state.stop_reason = StopReason(state.stop_reason)
        return state


_STATE_FIELDS = frozenset(State.__struct_fields__)


class Machine:
    """Applies events to a :class:`State` and decides, after each, whether the loop stops."""

    def __init__(
        self,
        budget: Budget | None = None,
        families: Iterable[str] = FAMILIES,
        vendor_map: Mapping[str, str] = SEED_VENDOR_MAP,
    ) -> None:
        self.budget = budget or Budget()
        self.families = frozenset(families)
        if not self.families <= FAMILIES:
            raise ValueError(f"unknown cap family in {sorted(self.families)}")
        self.vendor_map = vendor_map
        # Looked up once here, not per event.
        self._loop = LOOP in self.families
        self._gate = GATE in self.families

    def advance(self, state: State, event: Event) -> StopReason | None:
        """Apply ``event`` to ``state`` in place; return the reason if this event stops the loop.

        Only the first stop is returned and recorded; later events are counted but cannot stop
        the session again.
        """
        apply(state, event)
        if state.stop_reason is not None:  # stopped (not the property: this runs per event)
            return None
        found = self.check(state, event)
        if found is not None:
            state.stop_reason, state.stop_detail = found
            state.stop_at = state.events
            return state.stop_reason
        return None

    def check(self, state: State, event: Event) -> tuple[StopReason, str] | None:
        """The stop rule that ``state`` trips after ``event``, with a readable detail."""
        if self._loop:
            found = self._check_loop(state, event)
            if found:
                return found
        if self._gate and event.is_step:
            return self._check_gate(state, event)
        return None

    def _check_loop(self, state: State, event: Event) -> tuple[StopReason, str] | None:
        """Seed 000's ``should_stop``, in its order, with its ``>=`` boundary."""
        vendor = event.vendor_stop
        if vendor and self.vendor_map.get(vendor, _UNKNOWN) == _UNKNOWN:
            return StopReason.UNKNOWN_VENDOR, f"unmapped vendor stop {vendor!r}"
        # Each cap is checked after an event that carries its meter (in a seed 000 trace every
        # round carries them all), so a cap of 0 cannot trip on an event that measured nothing.
        b = self.budget
        if event.action == ROUND:
            if b.max_rounds is not None and state.rounds >= b.max_rounds:
                return StopReason.MAX_ROUNDS, f"rounds {state.rounds} >= {b.max_rounds}"
            if b.max_tool_calls is not None and state.tool_calls >= b.max_tool_calls:
                return (
                    StopReason.MAX_TOOL_CALLS,
                    f"tool calls {state.tool_calls} >= {b.max_tool_calls}",
                )
            if b.max_output_tokens is not None and state.output_tokens >= b.max_output_tokens:
                return (
                    StopReason.MAX_OUTPUT_TOKENS,
                    f"output tokens {state.output_tokens} >= {b.max_output_tokens}",
                )
            if b.max_cost is not None and event.cost is not None and state.cost >= b.max_cost:
                return StopReason.MAX_COST, f"cost ${state.cost:.4f} >= ${b.max_cost:g}"
        cap = b.max_consecutive_tool_errors
        if (
            cap is not None
            and event.tool_error is not None
            and state.consecutive_tool_errors >= cap
        ):
            return (
                StopReason.TOOL_ERROR_BUDGET,
                f"consecutive tool errors {state.consecutive_tool_errors} >= {cap}",
            )
        n = b.no_progress_rounds
        if n is not None and state.observation_repeats >= n and event.has_observation:
            return (
                StopReason.NO_PROGRESS,
                f"same observation {state.observation_repeats} times in a row",
            )
        return None

    def _check_gate(self, state: State, event: Event) -> tuple[StopReason, str] | None:
        """Seed 002's ``AgentBudget._enforce``, in its order, with its ``>`` boundary."""
        b = self.budget
        if b.max_steps is not None and state.steps > b.max_steps:
            return StopReason.MAX_STEPS, f"steps {state.steps} > {b.max_steps}"
        if b.max_writes is not None and state.writes > b.max_writes:
            return StopReason.MAX_WRITES, f"writes {state.writes} > {b.max_writes}"
        elapsed = state.elapsed_s
        if b.max_seconds is not None and elapsed is not None and elapsed > b.max_seconds:
            return StopReason.MAX_SECONDS, f"elapsed {elapsed:.1f}s > {b.max_seconds}s"
        if (
            event.action == "retry"
            and b.max_steps is not None
            and state.steps >= b.max_steps - 1
        ):
            return StopReason.RETRY_NEAR_CEILING, "retry blocked near step ceiling"
        return None


def apply(state: State, event: Event) -> None:
    """Seed 000's ``apply_round`` and seed 002's counter updates, for one event.

    An event that continues the current round (``same_round``) adds its tool calls, output
    tokens, observation and tool error without counting a new round or step.
    """
    state.events += 1
    if event.elapsed_s is not None:
        state.elapsed_s = event.elapsed_s
    action = event.action
    if action in MARKERS:
        return
    if not event.same_round:  # Event.is_step, for an event that is not a marker
        state.steps += 1
        if action == ROUND:
            state.rounds += 1
        elif action == "write":
            state.writes += 1
    if action == ROUND:
        state.tool_calls += event.tool_calls or 0
        state.output_tokens += event.output_tokens or 0
        if event.cost is not None:  # rounded: 0.7 + 0.1 must reach a cap of 0.8
            state.cost = round(state.cost + event.cost, 12)
    # The observation's hash: given (a replay of stored rows keeps the hash, not the text),
    # else seed 000's hash of the text; None if the event carries no observation.
    digest = event.observation_hash
    if digest is None and event.observation is not None:
        digest = observation_hash(event.observation)
    if digest is not None:
        if digest == state.last_observation_hash:
            state.observation_repeats += 1
        else:
            state.last_observation_hash = digest
            state.observation_repeats = 1
    if event.tool_error is not None:
        if event.tool_error:
            state.tool_errors += 1
            state.consecutive_tool_errors += 1
        else:
            state.consecutive_tool_errors = 0
