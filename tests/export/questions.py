"""The dashboard's and the README's questions as SQL that SQLite, DuckDB and ClickHouse all
run unchanged over tables (or views) named as the ledger's (docs/export.md shows each).

Every value is compared exactly (``==``). Money is summed as ``cost_nusd``, whole nanodollars
(migration 015): integer sums are exact in every engine, where sums of the float ``cost_usd``
differ in their last bits (each engine adds in its own order).
"""

from __future__ import annotations

from typing import Any

QUESTIONS = {
    "paid_path": (
        "select task_class, reasons from task_classes "
        "where verdict = 'stay_on_paid_path' order by task_class nulls first"
    ),
    "retry_storms": (
        "select session_id, task_class, start_idx, length, key from incidents "
        "where kind = 'retry_storm' order by session_id, start_idx"
    ),
    "no_progress_runs": (
        "select session_id, task_class, start_idx, length, output_tokens from incidents "
        "where kind = 'no_progress' order by session_id, start_idx"
    ),
    "unknown_vendor_stops": (
        "select vendor_stop, count(*) as sessions from sessions "
        "where stop_reason = 'unknown_vendor' group by vendor_stop "
        "order by vendor_stop nulls first"
    ),
    "spend_per_class": (
        "select task_class, count(*) as sessions, sum(cost_nusd) as nusd, "
        "sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens "
        "from sessions group by task_class order by task_class nulls first"
    ),
    "spend_per_incident_kind": (
        "select kind, count(*) as incidents, sum(cost_nusd) as nusd from incidents "
        "group by kind order by kind"
    ),
    "stop_reasons_per_class": (
        "select task_class, stop_reason, count(*) as sessions from sessions "
        "group by task_class, stop_reason "
        "order by task_class nulls first, stop_reason nulls first"
    ),
    "steps_per_action": (
        "select action, count(*) as steps, sum(tool_error) as tool_errors from steps "
        "group by action order by action nulls first"
    ),
}

#: Questions listing sessions (a session id per row), and how many leading columns of the
#: others are their group key (the rest are counts and sums).
LISTINGS = {"retry_storms", "no_progress_runs"}
GROUP_KEYS = {"unknown_vendor_stops": 1, "spend_per_class": 1, "spend_per_incident_kind": 1,
              "stop_reasons_per_class": 2, "steps_per_action": 1}

Rows = list[tuple[Any, ...]]


def combined(name: str, answers: list[Rows]) -> Rows:
    """Several databases' answers to one question as one database of them all would give:
    listings side by side, groups added up (a NULL sum is no sum)."""
    if name in LISTINGS:
        return sorted((r for rows in answers for r in rows), key=repr)
    keys = GROUP_KEYS[name]
    totals: dict[tuple[Any, ...], list[Any]] = {}
    for rows in answers:
        for row in rows:
            got = totals.setdefault(row[:keys], [None] * (len(row) - keys))
            for i, value in enumerate(row[keys:]):
                got[i] = value if got[i] is None else got[i] + (value or 0)
    return [(*k, *v) for k, v in totals.items()]
