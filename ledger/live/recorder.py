"""Recording a session as it runs: one native event per call, and the budget enforced live.

One state machine, two drivers. Each call serialises one native event, reads that line back
with the same parser the ingest uses (:func:`ledger.formats.seed_dialects.native_record`),
appends it, and advances the same :class:`~ledger.core.budget.Machine` the replay advances, on
the same event. So the decision taken live is, by construction, the decision a later
``agent-ledger replay`` or ``ingest`` of the file takes, at the same event;
``tests/live/test_recorder.py`` checks it on random sessions and budgets.

The ledger never holds a secret: every string of a line (the free text, task class, tool,
detail, observation, vendor stop string, and any other field) is redacted with the ingest's
redactor before it is written. The no-progress rule
therefore hashes redacted observations, live and in the replay alike.

Time: ``elapsed_s`` is read from a monotonic clock (``time.monotonic``, injectable) and
written at full precision, so the replay decides on exactly the value the live gate saw;
``ts`` is the UTC wall-clock time, for people.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from msgspec.structs import replace

from ledger.config.prices import library_book
from ledger.core.budget import Budget, Machine, State
from ledger.core.events import Event
from ledger.core.fold import families_for
from ledger.core.pricing import PriceBook, price_event
from ledger.core.reasons import StopReason
from ledger.core.redact import redact, redact_json
from ledger.core.vendors import DEFAULT_VENDOR_MAP
from ledger.formats.seed_dialects import NATIVE, Record, RecordError, native_record, parse_json
from ledger.ingest.files import LedgerPathError, sniff
from ledger.live.append import append_line
from ledger.live.deadline import DEFAULT_GRACE, ToolRun, run_with_deadline

#: Free-text fields, which must be strings (every string of a line is redacted before it is
#: written, whatever its field).
TEXT_FIELDS = ("task_class", "tool", "detail", "observation", "vendor_stop", "model")

Clock = Callable[[], float]
Now = Callable[[], datetime]
Redactor = Callable[[str], tuple[str, int]]


class BudgetExceeded(RuntimeError):
    """The budget stopped the session: refuse the pending action and fail closed.

    ``str(exc)`` is the stop detail (``steps 9 > 8``: seed 002's messages); ``reason`` is the
    :class:`StopReason`, ``at`` the index of the event that tripped it, as ``stop_at`` in the
    replay.
    """

    def __init__(
        self, reason: StopReason, detail: str, at: int | None = None, session: str | None = None
    ) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.at = at
        self.session = session


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO-8601 in UTC with milliseconds and a ``Z``, as in the README's examples."""
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def new_session_id(moment: datetime | None = None) -> str:
    """A time-sortable, unique session id: ``20261129T220000-1a2b3c4d``."""
    return f"{(moment or utc_now()):%Y%m%dT%H%M%S}-{secrets.token_hex(4)}"


def native_line(
    fields: Mapping[str, Any], redactor: Redactor = redact
) -> tuple[bytes, Record, int]:
    """One native event as a ledger line, the record the reader will make of it, and the
    number of secrets redacted. ``None`` values are left out.

    Raises :class:`~ledger.formats.seed_dialects.RecordError` (a ``ValueError``) for an event the
    reader would put aside, so nothing unreadable is ever written.
    """
    obj: dict[str, Any] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if key in TEXT_FIELDS and not isinstance(value, str):
            raise RecordError(f"field {key!r} must be a string, got {type(value).__name__}")
        obj[key] = value
    obj, found = redact_json(obj, redactor)  # every string, whatever its field
    try:
        raw = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError("lone surrogate in a string (not valid Unicode)") from None
    return raw + b"\n", native_record(parse_json(raw)), found


def prepare_ledger(path: Path) -> None:
    """Make ``path`` ready for native events: create its folder, and refuse a file that holds
    another dialect (one file, one dialect)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.stat().st_size == 0:
        return
    dialect = sniff(path).dialect
    if dialect not in (None, NATIVE):
        raise LedgerPathError(
            f"{path}: a {dialect} ledger; native events go to a file of their own"
        )


def tool_names(calls: Sequence[Any]) -> str | None:
    """The names of a round's tool calls (strings, ``{"name": ...}`` or objects with ``.name``)."""
    names = []
    for call in calls:
        name = call if isinstance(call, str) else (
            call.get("name") if isinstance(call, Mapping) else getattr(call, "name", None)
        )
        if isinstance(name, str):
            names.append(name)
    return ",".join(names) or None


class Recorder:
    """Writes one session's events to a native ledger and enforces the budget as it goes.

    Use :func:`open_session` (it writes the ``start`` event). Thread-safe: events of one
    recorder reach the file and the machine in the same order.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        session: str | None = None,
        task_class: str | None = None,
        budget: Budget | None = None,
        vendor_map: Mapping[str, str] | None = None,
        prices: PriceBook | None = None,
        fsync: bool = False,
        clock: Clock = time.monotonic,
        started_at: float | None = None,
        now: Now = utc_now,
        redactor: Redactor = redact,
    ) -> None:
        self.path = Path(path)
        prepare_ledger(self.path)
        self.session = session or new_session_id(now())
        self.task_class = task_class
        self.budget = budget or Budget()
        vendors = DEFAULT_VENDOR_MAP if vendor_map is None else vendor_map
        self.machine = Machine(self.budget, families_for(NATIVE), vendors)
        #: Prices a round given by its model and tokens, as an ingest with the same prices does.
        self.prices = library_book() if prices is None else prices
        self.state = State()
        self.fsync = fsync
        self.redactions = 0
        self.closed = False
        self._clock, self._now, self._redact = clock, now, redactor
        self.started_at = clock() if started_at is None else started_at
        self._lock = threading.Lock()

    # -- time ------------------------------------------------------------------------------

    def elapsed(self) -> float:
        """Seconds since the session started, by the monotonic clock."""
        return self._clock() - self.started_at

    def remaining_seconds(self) -> float | None:
        """Wall-clock budget left (None: no cap); 0 once the session has stopped."""
        if self.state.stopped:
            return 0.0
        if self.budget.max_seconds is None:
            return None
        return max(0.0, self.budget.max_seconds - self.elapsed())

    # -- events ----------------------------------------------------------------------------

    def write(self, kind: str, **fields: Any) -> Event:
        """Append one event of type ``kind`` and advance the machine; never raises for the
        budget (see :meth:`enforce`). Returns the event as the reader reads it."""
        with self._lock:
            line, record, found = native_line(
                {
                    "ts": iso(self._now()),
                    "session": self.session,
                    "type": kind,
                    "task_class": self.task_class if self.state.events == 0 else None,
                    **fields,
                    "elapsed_s": self.elapsed(),
                },
                self._redact,
            )
            append_line(self.path, line, self.fsync)
            self.redactions += found
            price_event(record.event, self.prices, self.state)
            self.machine.advance(self.state, record.event)
            return record.event

    def enforce(self, event: Event) -> None:
        """Raise :class:`BudgetExceeded` if the session has stopped and ``event`` is a step.

        Once stopped, a session stays stopped: every later step raises the same reason (it is
        still written, so the ledger shows what was attempted after the stop).
        """
        state = self.state
        if event.is_step and state.stop_reason is not None:
            raise BudgetExceeded(
                state.stop_reason, state.stop_detail or "", state.stop_at, self.session
            )

    def start(self) -> None:
        self.write("start")

    def round(
        self,
        *,
        tool_calls: int | Sequence[Any] | None = None,
        output_tokens: int | None = None,
        observation: str | None = None,
        tool_error: bool | None = None,
        vendor_stop: str | None = None,
        tool: str | None = None,
        detail: str | None = None,
        model: str | None = None,
        input_tokens: int | None = None,
        cache_creation_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        reasoning_tokens: int | None = None,
        cost: float | None = None,
    ) -> None:
        """Record one model round (seed 000); ``None`` means "not measured".

        ``tool_calls`` is a count, or the calls themselves: they are counted and their names
        become ``tool`` (their arguments are not written). For ``max_cost``, give the round's
        ``cost`` in US dollars, or its ``model`` and tokens (``input_tokens`` and
        ``output_tokens`` at least) to price it (see ``docs/cost.md``).
        """
        if tool_calls is not None and not isinstance(tool_calls, int):
            tool = tool or tool_names(tool_calls)
            tool_calls = len(tool_calls)
        self.enforce(self.write(
            "round", tool=tool, detail=detail, tool_calls=tool_calls,
            output_tokens=output_tokens, observation=observation, tool_error=tool_error,
            vendor_stop=vendor_stop, model=model, input_tokens=input_tokens,
            cache_creation_tokens=cache_creation_tokens, cache_read_tokens=cache_read_tokens,
            reasoning_tokens=reasoning_tokens, cost=cost,
        ))

    def action(
        self,
        action: str,
        detail: str | None = None,
        *,
        tool: str | None = None,
        observation: str | None = None,
        tool_error: bool | None = None,
    ) -> None:
        """Record one action checkpoint (seed 002): ``think``, ``read``, ``write`` or ``retry``."""
        self.enforce(self.write(
            "action", action=action, tool=tool, detail=detail, observation=observation,
            tool_error=tool_error,
        ))

    def close(self, outcome: StopReason | str | None = None) -> None:
        """Record the end of the session with its own outcome (a stop reason), if known."""
        self.write("end", outcome=StopReason(outcome).value if outcome else None)
        self.closed = True

    def run(
        self,
        args: Sequence[str] | str,
        *,
        action: str = "read",
        tool: str | None = None,
        grace: float = DEFAULT_GRACE,
        **popen: Any,
    ) -> ToolRun:
        """Run a tool's subprocess under the wall-clock budget left, then record it.

        A tool whose step the budget would refuse (the session has stopped, or this action
        would trip a cap) is not started. Otherwise it runs in its own process group, and when
        the wall-clock budget runs out the whole group is killed (SIGTERM, then SIGKILL after
        ``grace`` seconds). Either way one ``action`` event records the outcome (``tool_error``
        if the tool failed or was killed), and :class:`BudgetExceeded` is raised if the
        session is stopped. ``popen`` goes to :class:`subprocess.Popen`
        (``capture_output=True``, ``text=True``, ``cwd``...).
        """
        name = tool or _command_name(args)
        refused = self._refusal(action)
        if refused is None:
            result = run_with_deadline(args, self.remaining_seconds(), grace, **popen)
            refused = "no wall-clock budget left"
        else:
            result = ToolRun(args, None, None, None, 0.0)
        if result.returncode is None:
            detail, error = f"{name}: not started ({refused})", None
        else:
            detail, error = f"{name}: {result.outcome}", not result.ok
        self.action(action, detail, tool=name, tool_error=error)
        return result

    def _refusal(self, action: str) -> str | None:
        """Why the budget would refuse one more ``action`` now (None: it would not)."""
        if self.state.stopped:
            return "session stopped"
        probe = replace(self.state)
        if self.machine.advance(probe, Event(action, elapsed_s=self.elapsed())):
            return probe.stop_detail
        return None

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the session: with the stop reason if the budget stopped it, else without an
        outcome (only the caller knows whether the task was verified complete)."""
        if self.closed:
            return
        reason = None
        if isinstance(exc, BudgetExceeded) and exc.session == self.session:
            reason = exc.reason
        self.close(reason)


def open_session(
    path: str | Path,
    task_class: str | None = None,
    budget: Budget | None = None,
    **options: Any,
) -> Recorder:
    """Start recording a session into the native ledger at ``path``: writes its ``start``.

    ``options`` go to :class:`Recorder` (``session``, ``vendor_map``, ``fsync``, ``clock``...).
    """
    recorder = Recorder(path, task_class=task_class, budget=budget, **options)
    recorder.start()
    return recorder


def _command_name(args: Sequence[str] | str) -> str:
    first = args if isinstance(args, str) else (args[0] if args else "")
    return Path(str(first).split(" ", 1)[0]).name or "tool"
