"""Migration verdicts: which task classes may leave the paid agent, and why the others may not.

Seed 000's cutover plan, steps 4 and 5, as pure functions over plain ``sessions`` rows:

* **parity** (step 5): a session whose log carries its own stop (``recorded_stop``) is checked
  against the replay under the budget: the stop reason must agree, and where the replay stops
  must be within ``tolerance`` rounds (or steps) of where the log ended. Tool calls are
  compared and reported too.
* **meter coverage** (step 4, and the decision table's "fail closed if missing"): every cap in
  force needs a meter the log carries; a cap whose meter is absent cannot be honoured.
* **verdict**: a task class is ``ready`` only when nothing fails closed; otherwise it must
  ``stay_on_paid_path``, with every reason listed.

Nothing here reads a file or a database: :mod:`ledger.db.verdict_tables` feeds it rows and writes
what it returns.

One module, over 500 lines: parity, coverage and judgement are the three steps of one verdict
and share their rules and group facts; the report of a verdict is :mod:`verdict_report`.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from operator import itemgetter
from typing import Any

from msgspec import Struct, field  # (records: an ingest makes them for a fiftieth of a dataclass)

from ledger.core.actions import action_map_entry
from ledger.core.budget import GATE, LOOP
from ledger.core.events import METERS
from ledger.core.fold import families_for
from ledger.core.reasons import DECISIONS, StopReason
from ledger.core.vendors import fails_closed_on_purpose

Row = Mapping[str, Any]

MATCH = "match"
MISMATCH = "mismatch"
NO_RECORDED_STOP = "no_recorded_stop"

READY = "ready"
STAY = "stay_on_paid_path"

ROUNDS = "rounds"
STEPS = "steps"

# Reason kinds, in the order a class's reasons are listed.
UNKNOWN_VENDOR = "unknown_vendor"
UNCLASSIFIED_TOOL = "unclassified_tool"
MISSING_METER = "missing_meter"
REPLAY_MISMATCH = "replay_mismatch"
NO_TERMINAL_SIGNAL = "no_terminal_signal"
TOO_FEW_SESSIONS = "too_few_sessions"

EXAMPLES = 5  # session ids named in a reason before "and N more"


class SettingsError(ValueError):
    """A tolerance or minimum that cannot be used."""


class Settings(Struct, frozen=True):
    """How strict the verdicts are.

    ``tolerance``: how many rounds (or steps) the replay may stop before the log's end and still
    match (seed 000: "within a one-round tolerance"). ``min_sessions``: how many sessions of a
    class must carry a recorded stop, so that the replay could be checked, before the class can
    be judged ready (at least 1: without replay evidence nothing is ready).
    """

    tolerance: int = 1
    min_sessions: int = 3

    def __post_init__(self) -> None:
        if isinstance(self.tolerance, bool) or not isinstance(self.tolerance, int):
            raise SettingsError(f"tolerance must be a whole number, not {self.tolerance!r}")
        if isinstance(self.min_sessions, bool) or not isinstance(self.min_sessions, int):
            raise SettingsError(f"min_sessions must be a whole number, not {self.min_sessions!r}")
        if self.tolerance < 0:
            raise SettingsError(f"tolerance must be 0 or more, not {self.tolerance}")
        if self.min_sessions < 1:
            raise SettingsError(f"min_sessions must be 1 or more, not {self.min_sessions}")


# --- meters ------------------------------------------------------------------------------


class Rule(Struct, frozen=True):
    """A stop rule of the budget, the cap that sets it, and the meter it needs.

    ``meters`` are alternatives: any one of them lets the rule be honoured.
    """

    reason: StopReason
    cap: str
    family: str
    meters: tuple[str, ...]

    @property
    def meter(self) -> str:
        return " or ".join(self.meters)


#: Every rule the budget machine applies, with its meter (seed 000's decision table, seed 002's
#: gate). The retry rule hangs on ``max_steps`` and needs retries told apart from first tries.
RULES: tuple[Rule, ...] = (
    Rule(StopReason.MAX_ROUNDS, "max_rounds", LOOP, ("round_counter",)),
    Rule(StopReason.MAX_TOOL_CALLS, "max_tool_calls", LOOP, ("tool_calls",)),
    Rule(StopReason.MAX_OUTPUT_TOKENS, "max_output_tokens", LOOP, ("output_tokens",)),
    Rule(StopReason.TOOL_ERROR_BUDGET, "max_consecutive_tool_errors", LOOP, ("tool_errors",)),
    Rule(StopReason.NO_PROGRESS, "no_progress_rounds", LOOP, ("observations",)),
    Rule(StopReason.MAX_STEPS, "max_steps", GATE, ("round_counter", "write_classification")),
    Rule(StopReason.MAX_WRITES, "max_writes", GATE, ("write_classification",)),
    Rule(StopReason.MAX_SECONDS, "max_seconds", GATE, ("elapsed_time",)),
    Rule(StopReason.RETRY_NEAR_CEILING, "max_steps", GATE, ("write_classification",)),
    Rule(StopReason.MAX_COST, "max_cost", LOOP, ("cost",)),
)

#: What to log so that a meter exists (native event fields; see the README's dialects).
INSTRUMENT: dict[str, str] = {
    "round_counter": "Log every model round (a native 'round' event) from a counter in your "
    "own process.",
    "tool_calls": "Log 'tool_calls' (a list or a count) on every round, from your tool "
    "dispatcher, so no tool fires uncounted.",
    "output_tokens": "Log 'output_tokens' on every round from a usage field you trust.",
    "tool_errors": "Log 'tool_error' (true or false) with every tool result; never swallow an "
    "error as an empty result.",
    "observations": "Log each tool result's 'observation' text, not only the model's text.",
    "elapsed_time": "Log 'ts' or 'elapsed_s' on every event, from a monotonic clock.",
    "write_classification": "Classify every tool action as think, read, write or retry (native "
    "'action' events), and register no unclassified tool; for real agent logs, name every "
    "tool in an --action-map file.",
    "cost": "Log 'cost' (US dollars) on every round, or its 'model' with 'input_tokens' and "
    "'output_tokens' from a usage field you trust, for a model with a price (the pinned "
    "price data, or --prices FILE for a private one).",
}


@lru_cache(maxsize=256)
def meter_set(meters: str | None) -> frozenset[str]:
    """``sessions.meters`` (comma-separated) as a set."""
    return frozenset(m for m in (meters or "").split(",") if m)


@lru_cache(maxsize=256)
def _caps(budget: str | None) -> dict[str, Any]:
    return json.loads(budget) if budget else {}


def rules_in_force(session: Row) -> tuple[Rule, ...]:
    """The rules that can stop this session: the cap is on in its budget, and its dialect is
    held to the cap's family (a trace is never cut by ``max_steps``)."""
    return _rules(session["dialect"], session.get("budget"))


@lru_cache(maxsize=256)
def _rules(dialect: str, budget: str | None) -> tuple[Rule, ...]:
    caps = _caps(budget)
    families = families_for(dialect)
    return tuple(r for r in RULES if r.family in families and caps.get(r.cap) is not None)


# --- parity ------------------------------------------------------------------------------


def parity(session: Row, tolerance: int = 1) -> dict[str, Any]:
    """Check the replay of one session against the log's own stop (seed 000, step 5).

    ``session`` is a ``sessions`` row plus ``stop_rounds``, ``stop_steps`` and
    ``stop_tool_calls``: the counters at the replay's stop (the ``steps`` row at ``stop_at``),
    ``None`` where the replay ran out without stopping.

    The recorded outcome is ``recorded_stop`` and where the log ended: its length in rounds (or,
    for logs without model rounds, in steps) and its tool calls. The replay's outcome is
    ``stop_reason`` and where it stops (the log's end if it ran out). They match when

    * the reasons agree. A recorded ``user_cancel`` agrees with a replay that runs to the cancel
      without a budget stop (a cancel is the user's decision, never the budget's). A recorded
      ``unknown_vendor`` agrees with nothing: an unmapped string is no known outcome to check
      the replay against, so it fails closed;
    * the replay stops at most ``tolerance`` rounds (or steps) before the log's end (it reads the
      log's own events, so it can never stop after it).

    Tool calls are compared and reported. Because the replay reads the log's own rounds, its
    count at the stop is the log's count less what the rounds after the stop made: a tool-call
    difference only ever comes with a round difference, and is judged with it.
    """
    meters = meter_set(session.get("meters"))
    unit = ROUNDS if "round_counter" in meters else STEPS
    stopped = session.get("stop_at") is not None
    logged = int(session[unit] or 0)
    logged_tools = int(session.get("tool_calls") or 0)
    replayed = int(session[f"stop_{unit}"]) if stopped else logged
    replayed_tools = int(session["stop_tool_calls"] or 0) if stopped else logged_tools
    recorded = session.get("recorded_stop")
    replay = session["stop_reason"]
    gap = logged - replayed
    clauses: list[str] = []

    if recorded is None:
        verdict = NO_RECORDED_STOP
        where = (
            f"stops with {_stop(session)} after {replayed} {unit}" if stopped
            else f"runs to the end ({logged} {unit})"
        )
        clauses.append(
            "the log carries no stop of its own (no end outcome, no vendor stop string), so "
            f"there is nothing to check the replay against; the replay {where}"
        )
    else:
        reason_ok, reason_clause = _compare_reasons(session, recorded, replay)
        count_ok = abs(gap) <= tolerance
        verdict = MATCH if reason_ok and count_ok else MISMATCH
        if verdict == MATCH or not reason_ok:
            clauses.append(reason_clause)
        if count_ok:
            if verdict == MATCH:
                clauses.append(f"{unit}: {logged} in the log, {replayed} at the replay's stop")
        else:
            clauses.append(
                f"{unit}: the log ends after {logged}, the replay stops after {replayed} "
                f"({gap} apart; tolerance {tolerance})"
            )
        if verdict == MATCH or logged_tools != replayed_tools:
            clauses.append(
                f"tool calls: {logged_tools} in the log, {replayed_tools} at the replay's stop"
            )
    return {
        "session_id": session["session_id"],
        "task_class": task_class_of(session),
        "dialect": session["dialect"],
        "parity": verdict,
        "recorded_stop": recorded,
        "vendor_stop": session.get("vendor_stop"),
        "replay_stop": replay,
        "stop_detail": session.get("stop_detail"),
        "unit": unit,
        "recorded_count": logged,
        "replay_count": replayed,
        "count_diff": gap,
        "recorded_tool_calls": logged_tools,
        "replay_tool_calls": replayed_tools,
        "tool_call_diff": logged_tools - replayed_tools,
        "tolerance": tolerance,
        "parity_detail": "; ".join(clauses),
        "meters": session.get("meters"),
        "budget_digest": session.get("budget_digest"),
    }


def _stop(session: Row) -> str:
    detail = session.get("stop_detail")
    return f"{session['stop_reason']} ({detail})" if detail else str(session["stop_reason"])


def _compare_reasons(session: Row, recorded: str, replay: str) -> tuple[bool, str]:
    complete = StopReason.TASK_COMPLETE.value
    if recorded == StopReason.UNKNOWN_VENDOR.value:
        raw = session.get("vendor_stop")
        return False, (
            f"the log's own stop is the unmapped vendor string {raw!r}: no known outcome to "
            "check the replay against (map it in a --vendor-map file)"
        )
    if recorded == StopReason.USER_CANCEL.value:
        if replay == complete:
            return True, (
                "the log was cancelled (user_cancel); the replay runs to the cancel without a "
                "budget stop"
            )
        return False, (
            f"the log was cancelled (user_cancel), but the replay stops before the cancel with "
            f"{_stop(session)}"
        )
    if recorded == replay:
        return True, f"stop reason {replay} on both"
    if recorded == complete:
        return False, (
            f"the log completed (task_complete), but the replay stops with {_stop(session)}: "
            "this budget would cut a session the paid runtime finished"
        )
    if replay == complete:
        return False, (
            f"the log stopped with {recorded}, but the replay runs past it to the end "
            "(task_complete): the paid runtime had a brake this budget lacks or sets looser"
        )
    return False, f"the log stopped with {recorded}, the replay with {_stop(session)}"


def task_class_of(session: Row) -> str:
    return session.get("task_class") or ""


# --- groups of alike sessions ------------------------------------------------------------

#: What a class's verdict reads of each session, in this order: its ``sessions`` row's
#: dialect, budget, meters, replay stop and recorded stop, and its ``session_parity`` row's
#: parity, id and detail. The first six tell sessions apart for the verdict.
FACTS = (
    "dialect", "budget", "meters", "stop_reason", "recorded_stop", "parity", "session_id",
    "parity_detail",
)
_KEY = len(FACTS) - 2
LISTED = 20  # session ids kept per group: the most any verdict row names


class Group(Struct):
    """Sessions of one task class alike in everything a verdict reads: how many, and the
    first ids (sorted) to name as examples.

    A class's verdict is computed from its groups, not from each session, so the database
    can hand over a class of any size as a few dozen groups of counts.
    """

    dialect: str
    budget: str | None
    meters: str | None
    stop_reason: str
    recorded_stop: str | None
    parity: str
    count: int = 0
    ids: list[str] = field(default_factory=list)
    first_detail: str = ""  # the first session's parity detail

    @property
    def silent(self) -> bool:
        """Ran out without a stop, and the log records no outcome of its own."""
        return self.stop_reason == StopReason.TASK_COMPLETE.value and self.recorded_stop is None


def group(facts: Iterable[Sequence[Any]]) -> list[Group]:
    """Group one class's sessions, given as tuples in :data:`FACTS` order sorted by id."""
    found: dict[tuple[Any, ...], Group] = {}
    for fact in facts:
        key = tuple(fact[:_KEY])
        entry = found.get(key)
        if entry is None:
            entry = found[key] = Group(*key, first_detail=fact[_KEY + 1] or "")
        entry.count += 1
        if len(entry.ids) < LISTED:
            entry.ids.append(fact[_KEY])
    return list(found.values())


def facts_of(session: Row, checked: Row) -> tuple[Any, ...]:
    """A session's :data:`FACTS` from its ``sessions`` row and its :func:`parity` row."""
    merged = {**session, **checked}
    return tuple(merged.get(name) for name in FACTS)


def _first(groups: Iterable[Group], limit: int) -> list[str]:
    """The first ``limit`` session ids of ``groups`` together, sorted."""
    return sorted(i for g in groups for i in g.ids)[:limit]


# --- meter coverage ----------------------------------------------------------------------


class Coverage(Struct):
    """One rule in force for a task class, and the sessions whose logs lack its meter."""

    task_class: str
    rule: Rule
    sessions: int = 0
    missing: int = 0
    examples: list[str] = field(default_factory=list)  # the first missing sessions, sorted

    def row(self) -> dict[str, Any]:
        decision = DECISIONS[self.rule.reason]
        return {
            "task_class": self.task_class,
            "rule": self.rule.reason.value,
            "cap": self.rule.cap,
            "meter": self.rule.meter,
            "sessions_in_force": self.sessions,
            "sessions_missing": self.missing,
            "honoured": int(not self.missing),
            "missing_sessions": _examples(self.examples, self.missing, limit=LISTED),
            "must_observe": decision.must_observe,
            "fail_closed_if_missing": decision.fail_closed_if_missing,
            "instrument": " Or: ".join(INSTRUMENT[m] for m in self.rule.meters),
        }


def coverage(task_class: str, groups: Sequence[Group]) -> list[Coverage]:
    """Per rule in force in a class: how many sessions, and which lack the rule's meter."""
    found: dict[Rule, Coverage] = {}
    lacking: dict[Rule, list[Group]] = defaultdict(list)
    for g in groups:
        carried = meter_set(g.meters)
        for rule in _rules(g.dialect, g.budget):
            entry = found.setdefault(rule, Coverage(task_class, rule))
            entry.sessions += g.count
            if carried.isdisjoint(rule.meters):
                entry.missing += g.count
                lacking[rule].append(g)
    for rule, entry in found.items():
        entry.examples = _first(lacking[rule], LISTED)
    return sorted(found.values(), key=lambda c: RULES.index(c.rule))


def _vendor_listed(raw: str, times: int) -> str:
    """A vendor stop string of a reason, saying when it is a real string the built-in map
    fails closed on purpose (not one nobody has seen)."""
    source = fails_closed_on_purpose(raw)
    known = f" (a known {source} string that fails closed on purpose)" if source else ""
    return f"{raw!r} x{times}{known}"


def _examples(ids: Sequence[str], total: int, limit: int = EXAMPLES) -> str:
    """The first ``limit`` of ``total`` session ids, and how many more there are."""
    shown = ", ".join(ids[:limit])
    return f"{shown} and {total - limit} more" if total > limit else shown


# --- verdicts ----------------------------------------------------------------------------


class Verdicts(Struct):
    """Everything one computation produces: the rows of the three verdict tables."""

    settings: Settings
    parity: list[dict[str, Any]] = field(default_factory=list)
    coverage: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def staying(self) -> list[str]:
        return [c["task_class"] for c in self.classes if c["verdict"] == STAY]


def compute(
    sessions: Sequence[Row], unknown_vendor: Iterable[Row], settings: Settings | None = None,
    unclassified: Iterable[Row] = (),
) -> Verdicts:
    """Parity, coverage and a verdict per task class.

    ``sessions``: rows as :func:`parity` takes them. ``unknown_vendor``: one row per unmapped
    vendor stop string seen (``incidents`` of kind ``unknown_vendor``: ``task_class``,
    ``session_id`` and the raw string as ``key``). ``unclassified``: one row per tool the
    action map did not name, per session (``task_class``, ``session_id``, the tool as ``key``
    and its ``calls``).
    """
    settings = settings or Settings()
    parity_rows = [parity(s, settings.tolerance) for s in sessions]
    unknown = by_task_class(unknown_vendor)
    tools = by_task_class(unclassified)
    by_class: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for session, checked in zip(sessions, parity_rows, strict=True):
        by_class[task_class_of(session)].append(facts_of(session, checked))
    verdicts = Verdicts(settings, parity_rows)
    for cls in sorted(by_class):
        groups = group(sorted(by_class[cls], key=itemgetter(_KEY)))
        covered = coverage(cls, groups)
        verdicts.coverage += [c.row() for c in covered]
        verdicts.classes.append(judge(cls, groups, covered, unknown[cls], settings, tools[cls]))
    verdicts.classes.sort(key=lambda c: (c["verdict"] != STAY, c["task_class"]))
    return verdicts


def by_task_class(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """Incident rows (unknown vendor stops, unclassified tools) by their task class."""
    found: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        found[task_class_of(row)].append(row)
    return found


def judge(
    task_class: str,
    groups: Sequence[Group],
    covered: Sequence[Coverage],
    unknown: Sequence[Row],
    settings: Settings,
    unclassified: Sequence[Row] = (),
) -> dict[str, Any]:
    """The ``task_classes`` row of one class: its evidence, verdict and every reason."""
    total = sum(g.count for g in groups)
    checked = sum(g.count for g in groups if g.parity != NO_RECORDED_STOP)
    mismatched = [g for g in groups if g.parity == MISMATCH]
    mismatches = sum(g.count for g in mismatched)
    silent = [g for g in groups if g.silent]
    silent_count = sum(g.count for g in silent)
    strings = Counter(u["key"] for u in unknown)
    reasons: list[tuple[str, str]] = []
    if strings:
        ids = sorted({u["session_id"] for u in unknown})
        listed = ", ".join(_vendor_listed(k, n) for k, n in sorted(strings.items()))
        reasons.append((UNKNOWN_VENDOR, (
            f"unknown vendor stops: {listed} in {count_noun(len(ids), 'session')} "
            f"({_examples(ids, len(ids))}); map each in a --vendor-map file once you know "
            "what it means"
        )))
    if unclassified:
        reasons.append((UNCLASSIFIED_TOOL, unclassified_reason(unclassified)))
    gaps = [c for c in covered if c.missing]
    for gap in gaps:
        rule = gap.rule
        reasons.append((MISSING_METER, (
            f"{_rule_name(rule)} is in force but its meter, {rule.meter}, is missing in "
            f"{gap.missing} of {gap.sessions} sessions ({_examples(gap.examples, gap.missing)}):"
            " the cap cannot be honoured there"
        )))
    if mismatched:
        first = min(mismatched, key=lambda g: g.ids[0])
        reasons.append((REPLAY_MISMATCH, (
            f"replay mismatches in {mismatches} of {count_noun(checked, 'session')} with a "
            f"recorded stop ({_examples(_first(mismatched, EXAMPLES), mismatches)}); e.g. "
            f"{first.ids[0]}: {first.first_detail}"
        )))
    if silent:
        reasons.append((NO_TERMINAL_SIGNAL, (
            f"completes with no terminal signal: {count_noun(silent_count, 'session')} ran out "
            f"without a stop and the log records no outcome "
            f"({_examples(_first(silent, EXAMPLES), silent_count)}); a complete "
            "needs a terminal, verified result"
        )))
    if checked < settings.min_sessions:
        reasons.append((TOO_FEW_SESSIONS, (
            f"too few sessions to judge: {checked} of {total} carry a recorded "
            f"stop to check the replay against; at least {settings.min_sessions} needed"
        )))
    meters: Counter[str] = Counter()
    stops: Counter[str] = Counter()
    recorded: Counter[str] = Counter()
    for g in groups:
        for meter in meter_set(g.meters):
            meters[meter] += g.count
        stops[g.stop_reason] += g.count
        if g.recorded_stop:
            recorded[g.recorded_stop] += g.count
    return {
        "task_class": task_class,
        "verdict": STAY if reasons else READY,
        "reason_kinds": ",".join(dict.fromkeys(kind for kind, _ in reasons)),
        "reasons": json.dumps([text for _, text in reasons]),
        "sessions": total,
        "checked_sessions": checked,
        "matches": checked - mismatches,
        "mismatches": mismatches,
        "no_recorded_stop": total - checked,
        "completes_without_signal": silent_count,
        "unknown_vendor_stops": _json_counts(strings),
        "unmetered_caps": json.dumps([_rule_name(g.rule) for g in gaps]),
        "stop_reasons": _json_counts(stops),
        "recorded_stops": _json_counts(recorded),
        "meter_coverage": json.dumps({m: meters[m] for m in _meter_order(meters)}),
        "tolerance": settings.tolerance,
        "min_sessions": settings.min_sessions,
    }


def unclassified_reason(rows: Sequence[Row]) -> str:
    """Why unclassified tools keep a class on the paid path, with the lines that class them."""
    calls: Counter[str] = Counter()
    for row in rows:
        calls[row["key"]] += int(row.get("calls") or 1)
    ids = sorted({row["session_id"] for row in rows})
    listed = ", ".join(f"{k!r} x{n}" for k, n in sorted(calls.items()))
    lines = "; ".join(action_map_entry(tool) for tool in sorted(calls))
    return (
        f"unclassified tools: {listed} in {count_noun(len(ids), 'session')} "
        f"({_examples(ids, len(ids))}): each call counted as a write (fail closed), and "
        "max_writes and the retry rule cannot be honoured there; class each under [tools] in "
        f"an --action-map file, e.g. {lines} (write until you know better)"
    )


def _rule_name(rule: Rule) -> str:
    """``max_rounds``; the retry rule, which hangs on max_steps, by its stop reason."""
    if rule.reason.value == rule.cap:
        return rule.cap
    return f"{rule.cap} ({rule.reason.value})"


def _vendor_listed(raw: str, times: int) -> str:
    """A vendor stop string of a reason, saying when it is a real string the built-in map
    fails closed on purpose (not one nobody has seen)."""
    source = fails_closed_on_purpose(raw)
    known = f" (a known {source} string that fails closed on purpose)" if source else ""
    return f"{raw!r} x{times}{known}"


def count_noun(n: int, noun: str) -> str:
    """``1 session``, ``2 sessions``, ``3 task classes``."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun}{'es' if noun.endswith('s') else 's'}"


def _json_counts(counts: Counter[str]) -> str:
    return json.dumps(dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))


def _meter_order(meters: Iterable[str]) -> list[str]:
    return sorted(meters, key=lambda m: METERS.index(m) if m in METERS else len(METERS))


# --- the report --------------------------------------------------------------------------
