"""The fold: events in, rows out. Pure: no files, no database.

A :class:`Session` carries the budget machine's :class:`State` plus what the tables need
(timestamps, the recorded vendor stop, open retry and repeated-observation runs). It can be
saved and resumed (``to_resume``/``from_resume``), so a session that continues across two
ingests ends up exactly as if it had been folded in one go.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from msgspec import field

from ledger.core.actions import ActionMap
from ledger.core.budget import GATE, LOOP, Budget, Machine, State
from ledger.core.events import METERS, ROUND, TOKEN_METERS, Event, meters_of
from ledger.core.pricing import PriceBook, price_event
from ledger.core.reasons import CONTINUE, StopReason
from ledger.core.task_classes import TaskClasses
from ledger.core.vendors import TOOL_ERROR_STOPS, classify
from ledger.formats.seed_dialects import DIALECTS, TRACE
from ledger.formats.seed_dialects import GATE as GATE_DIALECT

DETAIL_MAX = 500
TOOL_MAX = 200
EXCERPT_MAX = 200
MEMO_CHARS = 200  # texts up to this long are redacted once per fold and remembered
MEMO_ENTRIES = 4096

MODELS_MAX = 8  # the models a session row names, at most
RECENT_KEYS = 128  # record keys a session remembers, for a record repeated in one file

INCIDENT_LENGTH = 2  # a run of retries or of one observation is an incident from its second
RETRY_STORM = "retry_storm"
NO_PROGRESS = "no_progress"
UNKNOWN_VENDOR = "unknown_vendor"
UNCLASSIFIED_TOOL = "unclassified_tool"
WRITE_METER = "write_classification"
_UNKNOWN_VENDOR_STOP = StopReason.UNKNOWN_VENDOR.value  # (an enum's .value is a slow lookup)

Redactor = Callable[[str], tuple[str, int]]

#: The columns of a ``steps`` row, in the order :meth:`Fold.step` gives their values. Rows are
#: tuples, not dicts: the store binds them as they are (a dict per event, and taking its values
#: out again in column order, cost about 1 us per event).
STEP_COLUMNS = (
    "session_id", "idx", "action", "tool", "detail", "tool_calls", "output_tokens",
    "tool_error", "observation_hash", "vendor_stop", "outcome", "ts", "elapsed_s",
    "total_rounds", "total_steps", "total_tool_calls", "total_output_tokens",
    "consecutive_errors", "total_writes", "stop_reason", "after_stop", "source_id",
    "source_line", "source_offset", "same_round",
    "input_tokens", "cache_creation_tokens", "cache_read_tokens", "reasoning_tokens", "model",
    "record_key", "cost_usd", "total_cost_usd",
)
StepRow = tuple[Any, ...]


def families_for(dialect: str) -> frozenset[str]:
    """Each dialect is held to the caps its own seed defines; native events to all of them."""
    if dialect == TRACE:
        return frozenset({LOOP})
    if dialect == GATE_DIALECT:
        return frozenset({GATE})
    return frozenset({LOOP, GATE})


class Run(msgspec.Struct, gc=False):
    """An open run of repeated retries or repeated observations (a ``Struct``: every
    observation that does not repeat the last one starts a run, and a ``Struct`` is made in
    90 ns against a dataclass's 230)."""

    key: str
    start: int
    end: int
    length: int
    detail: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    output_tokens: int = 0
    tool_calls: int = 0
    blocked: bool = False
    #: The session's spend after the run's first event, and what it has spent since, up to
    #: the run's last event (the rounds between its events included).
    cost_base: float = 0.0
    cost: float = 0.0


class Session(msgspec.Struct):
    session_id: str
    source_id: str
    source_path: str
    dialect: str
    task_class: str | None
    budget: Budget = field(default_factory=Budget)
    task: str | None = None
    state: State = field(default_factory=State)
    started_at: str | None = None
    ended_at: str | None = None
    t0: float | None = None
    vendor_stop: str | None = None
    recorded_stop: str | None = None
    redactions: int = 0
    retry: Run | None = None
    repeat: Run | None = None
    meters: list[str] = field(default_factory=list)
    parent_session_id: str | None = None  # a sub-agent's session links to its parent's
    #: Tool calls the action map did not name: while there are any, the session's write
    #: classification is incomplete, so it does not carry that meter.
    unclassified: int = 0
    #: Token totals beside ``state.output_tokens`` (None: no event carried the count), and the
    #: models that answered, in the order they first did.
    input_tokens: int | None = None
    cache_creation_tokens: int | None = None
    cache_read_tokens: int | None = None
    reasoning_tokens: int | None = None
    models: list[str] = field(default_factory=list)
    #: The sources whose records the session holds (its owner first; more when copies of it
    #: are in several files), and the keys of its last records (see ledger/ingest/source.py).
    sources: list[str] = field(default_factory=list)
    recent: dict[str, int] = field(default_factory=dict)  # insertion-ordered, oldest first
    #: The record keys of its first and its last event folded, and how many events with a
    #: key it holds: a file continues the session exactly only where it has read just these,
    #: once each (see ledger/ingest/source.py).
    first_key: str | None = None
    last_key: str | None = None
    keyed: int = 0
    #: The model of the round now open: its continuations are priced at it.
    round_model: str | None = None

    def row(self) -> dict[str, Any]:
        """The ``sessions`` row as it stands now."""
        s = self.state
        reason = s.stop_reason or StopReason.TASK_COMPLETE
        return {
            "session_id": self.session_id,
            "task_class": self.task_class,
            "task": self.task,
            "dialect": self.dialect,
            "source_id": self.source_id,
            "source_path": self.source_path,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "stop_reason": reason.value,
            "stop_at": s.stop_at,
            "stop_detail": s.stop_detail,
            "recorded_stop": self.recorded_stop,
            "vendor_stop": self.vendor_stop,
            "events": s.events,
            "rounds": s.rounds,
            "steps": s.steps,
            "tool_calls": s.tool_calls,
            "output_tokens": s.output_tokens,
            "tool_errors": s.tool_errors,
            "writes": s.writes,
            "elapsed_s": s.elapsed_s,
            "events_after_stop": s.events - s.stop_at if s.stop_at else 0,
            "redactions": self.redactions,
            "meters": ",".join(self.meters),
            "budget": self.budget.to_json(),
            "budget_digest": self.budget.digest,
            "parent_session_id": self.parent_session_id,
            # Money: None where no round carried a cost (the log gave none, nobody priced it).
            "cost_usd": s.cost if "cost" in self.meters else None,
            "price_source": s.price_source,
            "input_tokens": self.input_tokens,
            "cache_creation_tokens": self.cache_creation_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "models": ",".join(self.models) or None,
        }

    def open_incidents(self) -> list[dict[str, Any]]:
        """Rows for runs still open (they may grow with the next event)."""
        return [r for r in (_retry_row(self), _repeat_row(self)) if r is not None]

    def to_resume(self) -> dict[str, Any]:
        # A shallow copy (this runs for every session a batch touches), its records and
        # containers copied below.
        data = msgspec.structs.asdict(self)
        data["budget"] = self.budget.to_dict()
        data["state"] = self.state.to_dict()
        for key in ("retry", "repeat"):
            run = data[key]
            if run is not None:
                data[key] = {name: getattr(run, name) for name in _RUN_FIELDS}
        for key in ("meters", "models", "sources"):
            data[key] = list(data[key])
        data["recent"] = dict(self.recent)
        return data

    @classmethod
    def from_resume(cls, data: Mapping[str, Any]) -> Session:
        data = dict(data)
        data["state"] = State.from_dict(data["state"])
        data["budget"] = Budget.from_mapping(data["budget"])
        for key in ("retry", "repeat"):
            if data.get(key):
                data[key] = Run(**data[key])
        return cls(**data)


_RUN_FIELDS = Run.__struct_fields__


class Fold:
    """Folds events into sessions under one budget, one vendor map and one action map (the
    importers class tool calls with ``actions``; an empty map leaves every tool unclassified)."""

    def __init__(
        self,
        budget: Budget,
        vendor_map: Mapping[str, str],
        redact: Redactor,
        prices: PriceBook | None = None,
        actions: ActionMap | None = None,
        task_classes: TaskClasses | None = None,
    ) -> None:
        self.budget = budget
        self.task_classes = task_classes or TaskClasses()  # the budget file's folder rules
        self.prices = prices  # prices a round that gives its model and tokens but no cost
        self.vendor_map = vendor_map
        self.redact = redact
        self.actions = actions or ActionMap()
        self._redacted: dict[str, tuple[str, int]] = {}
        #: The remembered texts in which redaction found nothing, each to the one copy of it
        #: the fold gives out: :meth:`step` looks them up instead of calling :meth:`clean` (a
        #: dict lookup, not a method call, for most of its texts). The one copy matters: the
        #: rows repeat it, and a worker's rows are marshalled with back-references.
        self._plain: dict[str, str] = {}
        self.redactions = 0  # secrets redacted in all the text it gave out to be stored
        self._machines = {
            fam: Machine(budget, fam, vendor_map)
            for fam in {families_for(d) for d in ("native", TRACE, GATE_DIALECT)}
        }
        #: Each dialect's machine, filled in as dialects are met (an imported dialect is not
        #: one of the seeds': looking its families up again cost a frozenset per event).
        self._machine_of = {d: self._machines[families_for(d)] for d in DIALECTS}

    def new_session(self, session_id: str, **kwargs: Any) -> Session:
        return Session(session_id, budget=self.budget, **kwargs)

    def clean(self, session: Session, text: str | None, limit: int = DETAIL_MAX) -> str | None:
        """Redact secrets and cut to ``limit`` characters, counting redactions on the session."""
        if text is None:
            return None
        # Tool names, intents and vendor strings repeat on most events; redaction is pure, so
        # short texts are redacted once and remembered (a bounded memo, cleared when full).
        known = self._redacted.get(text)
        if known is None:
            known = self.redact(text)
            if len(text) <= MEMO_CHARS:
                if len(self._redacted) >= MEMO_ENTRIES:
                    self._redacted.clear()
                    self._plain.clear()
                self._redacted[text] = known
                if not known[1]:
                    self._plain[text] = known[0]  # (step's limits are MEMO_CHARS or more)
        cleaned, found = known
        if found:
            session.redactions += found
            self.redactions += found
        if len(cleaned) > limit:
            cleaned = cleaned[: limit - 1] + "…"
        return cleaned

    def redact_aside(self, text: str) -> str:
        """Redact a text that is stored apart from any session (a line put aside, its
        reason), counting its secrets."""
        cleaned, found = self.redact(text)
        self.redactions += found
        return cleaned

    def step(
        self, session: Session, event: Event, line: int | None, offset: int | None
    ) -> tuple[StepRow, list[dict[str, Any]]]:
        """Apply one event; return its ``steps`` row (values in :data:`STEP_COLUMNS` order)
        and any incident rows it closes."""
        state = session.state
        if event.elapsed_s is None and event.at is not None:
            if session.t0 is None:
                session.t0 = event.at
            event.elapsed_s = round(event.at - session.t0, 3)
        if event.tool_error is None and event.vendor_stop in TOOL_ERROR_STOPS:
            event.tool_error = True  # an invalid tool call: fails closed, and a tool error
        model = event.model  # as logged (a continuation of a round names none)
        if event.action == ROUND and not event.same_round:
            session.round_model = model
        if self.prices is not None and event.action == ROUND:  # (only rounds are priced)
            self._price(session, event)
        if event.unclassified:
            session.unclassified += 1
            if WRITE_METER in session.meters:
                session.meters = [m for m in session.meters if m != WRITE_METER]
        if len(session.meters) < len(METERS):  # once a session has every meter, it keeps them
            carried = meters_of(event)
            if session.unclassified:
                carried.discard(WRITE_METER)
            if not carried.issubset(session.meters):
                session.meters = sorted(carried.union(session.meters), key=METERS.index)
        machine = self._machine_of.get(session.dialect)
        if machine is None:
            machine = self._machine_of[session.dialect] = self._machines[
                families_for(session.dialect)
            ]
        reason = machine.advance(state, event)
        if reason is not None:  # the detail may quote the vendor stop string
            state.stop_detail = self.clean(session, state.stop_detail)
        ts = event.ts
        if ts:
            session.started_at = session.started_at or ts
            session.ended_at = ts
        # Neither None nor a text known to be plain needs cleaning: testing here saves a call
        # for most fields of most events.
        plain = self._plain
        detail = event.detail
        if detail is not None:
            detail = plain.get(detail) or self.clean(session, detail)
        vendor_stop = event.vendor_stop
        vendor = None if vendor_stop is None else self.clean(session, vendor_stop)
        tool = event.tool
        if tool is not None:
            tool = plain.get(tool) or self.clean(session, tool, TOOL_MAX)
        action = event.action
        if action == "start":
            # A new turn: the last turn's terminal signal no longer says how the log ends.
            session.recorded_stop = session.vendor_stop = None
        outcome = recorded = event.outcome
        if not recorded and vendor_stop:
            recorded = _reason_value(classify(vendor_stop, self.vendor_map))
        if recorded is not None and recorded != CONTINUE:
            session.recorded_stop = recorded
            session.vendor_stop = vendor
        observed = event.has_observation
        incidents = self._track_runs(session, event, tool, detail, reason, observed)
        idx = state.events
        if recorded == _UNKNOWN_VENDOR_STOP:
            incidents.append(_incident(session, UNKNOWN_VENDOR, Run(
                vendor or "", idx, idx, 1, detail, ts, ts,
                event.output_tokens or 0, event.tool_calls or 0,
            )))
        if event.unclassified:
            incidents.append(_incident(session, UNCLASSIFIED_TOOL, Run(
                tool or "", idx, idx, 1, detail, ts, ts,
                blocked=reason is not None,
            )))
        if (event.input_tokens is not None or event.cache_read_tokens is not None
                or event.cache_creation_tokens is not None or event.reasoning_tokens is not None):
            _add_tokens(session, event)
        if model is not None:
            model = plain.get(model) or self.clean(session, model, TOOL_MAX)
            if model not in session.models and len(session.models) < MODELS_MAX:
                session.models.append(model)
        tool_error = event.tool_error
        stop_at = state.stop_at
        # Flags as the ints 1 and 0 (SQLite binds a bool through an adapter search), by a
        # conditional rather than int(): a call for each, on every event.
        row = (
            session.session_id,
            idx,
            action,
            tool,
            detail,
            event.tool_calls,
            event.output_tokens,
            None if tool_error is None else 1 if tool_error else 0,
            state.last_observation_hash if observed else None,
            vendor,
            outcome,
            ts,
            event.elapsed_s,
            state.rounds,
            state.steps,
            state.tool_calls,
            state.output_tokens,
            state.consecutive_tool_errors,
            state.writes,
            None if reason is None else reason.value,
            1 if stop_at is not None and idx > stop_at else 0,
            session.source_id,
            line,
            offset,
            1 if event.same_round else 0,
            event.input_tokens,
            event.cache_creation_tokens,
            event.cache_read_tokens,
            event.reasoning_tokens,
            model,
            event.key,
            event.cost,
            state.cost if "cost" in session.meters else None,
        )
        return row, incidents

    def _price(self, session: Session, event: Event) -> None:
        """Price a round; a continuation of one (a later line of the same streamed response,
        adding the output tokens the first line had not counted yet) at its round's model."""
        assert self.prices is not None
        if event.model is None and event.same_round and event.cost is None:
            if session.round_model is None:
                return
            event.model = session.round_model
            price_event(event, self.prices, session.state)
            event.model = None
        elif event.model is not None or event.cost is not None:
            price_event(event, self.prices, session.state)

    def _track_runs(
        self,
        session: Session,
        event: Event,
        tool: str | None,
        detail: str | None,
        reason: StopReason | None,
        observed: bool,
    ) -> list[dict[str, Any]]:
        closed: list[dict[str, Any]] = []
        idx = session.state.events
        # Retry storms: consecutive retry events of the same tool or intent.
        if event.action == "retry":
            key = tool or detail or ""  # redacted, as stored
            run = session.retry
            if run is not None and run.key == key and run.end == idx - 1:
                run.end, run.length, run.ended_at = idx, run.length + 1, event.ts
                _spent(run, session.state)
            else:
                if run is not None and run.length >= INCIDENT_LENGTH:
                    closed.append(_incident(session, RETRY_STORM, run))
                run = session.retry = _opened(key, detail, event, session.state)
            run.blocked = run.blocked or reason is StopReason.RETRY_NEAR_CEILING
        elif session.retry is not None:
            if session.retry.length >= INCIDENT_LENGTH:
                closed.append(_incident(session, RETRY_STORM, session.retry))
            session.retry = None
        # No-progress runs: the same observation hash seen again (events without one skip).
        if observed:
            state = session.state
            run = session.repeat
            if run is not None and state.observation_repeats > 1:
                run.end, run.length, run.ended_at = idx, state.observation_repeats, event.ts
                _spent(run, state)
                run.output_tokens += event.output_tokens or 0
                run.tool_calls += event.tool_calls or 0
                if run.detail is None:
                    # The run has just become an incident: its excerpt is the repeated
                    # observation (the same text: the same hash), redacted only now.
                    run.detail = self.clean(session, event.observation, EXCERPT_MAX)
            else:
                if run is not None and run.length >= INCIDENT_LENGTH:
                    closed.append(_incident(session, NO_PROGRESS, run))
                session.repeat = _opened(state.last_observation_hash or "", None, event, state)
        return closed


def _opened(key: str, detail: str | None, event: Event, state: State) -> Run:
    """A run starting at ``event`` (already applied to ``state``). As with its tokens and tool
    calls, what it costs is what was spent after its first event (the first sight of an
    observation is progress, its repeats are not), up to its last."""
    idx = state.events
    return Run(key, idx, idx, 1, detail, event.ts, event.ts, cost_base=state.cost)


def _spent(run: Run, state: State) -> None:
    """The run's span now ends at the event just applied: what it has spent so far."""
    run.cost = round(state.cost - run.cost_base, 12)


def _add_tokens(session: Session, event: Event) -> None:
    """Add an event's token counts to its session's totals (a count the event lacks is left)."""
    for name in TOKEN_METERS:
        value = getattr(event, name)
        if value is not None:
            setattr(session, name, (getattr(session, name) or 0) + value)


def _retry_row(session: Session) -> dict[str, Any] | None:
    run = session.retry
    if run is None or run.length < INCIDENT_LENGTH:
        return None
    return _incident(session, RETRY_STORM, run)


def _repeat_row(session: Session) -> dict[str, Any] | None:
    run = session.repeat
    if run is None or run.length < INCIDENT_LENGTH:
        return None
    return _incident(session, NO_PROGRESS, run)


def _incident(session: Session, kind: str, run: Run) -> dict[str, Any]:
    return {
        "session_id": session.session_id,
        "kind": kind,
        "start_idx": run.start,
        "end_idx": run.end,
        "length": run.length,
        "key": run.key,
        "detail": run.detail,
        "output_tokens": run.output_tokens,
        "tool_calls": run.tool_calls,
        "blocked": int(run.blocked),
        "cost_usd": run.cost if "cost" in session.meters else None,
        "task_class": session.task_class,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
    }


def _reason_value(found: StopReason | str | None) -> str | None:
    return found.value if isinstance(found, StopReason) else found
