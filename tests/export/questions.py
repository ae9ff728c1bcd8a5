"""The dashboard's and the README's questions as SQL that SQLite, DuckDB and ClickHouse all
run unchanged over tables (or views) named as the ledger's (docs/export.md shows each).

Every value is compared exactly but sums of dollars (floating point): each engine adds them in
its own order, so the last bits of a sum may differ; those are compared to 1e-12 relative.
(Rounding in SQL does not help: the engines round a half differently.)
"""

from __future__ import annotations

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
        "select task_class, count(*) as sessions, sum(cost_usd) as usd, "
        "sum(input_tokens) as input_tokens, sum(output_tokens) as output_tokens "
        "from sessions group by task_class order by task_class nulls first"
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
