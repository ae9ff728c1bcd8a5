"""The verdicts as the CLI prints them: a text report, and JSON with its columns decoded."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from ledger.analysis.budget_in_force import BudgetInForce, budget_lines
from ledger.analysis.verdicts import MISMATCH, READY, STAY, Verdicts, count_noun

STAY_SQL = "select task_class from task_classes where verdict = 'stay_on_paid_path'"


def report_text(
    verdicts: Verdicts, budgets: list[BudgetInForce] | None = None, db_path: str = "DB"
) -> str:
    """``agent-ledger paid-path``'s readable report: the budgets the sessions were folded
    under (a replay stop is judged under them), then per class the verdict and its evidence."""
    settings = verdicts.settings
    classes = verdicts.classes
    staying = verdicts.staying
    lines = [
        f"{count_noun(len(classes), 'task class')}: {len(classes) - len(staying)} ready, "
        f"{len(staying)} stay on the paid path "
        f"(tolerance: {count_noun(settings.tolerance, 'round')}, or steps; at least "
        f"{count_noun(settings.min_sessions, 'session')} with a recorded stop per class)",
    ]
    lines += budget_lines(budgets or [], db_path)
    if not classes:
        lines.append("No sessions in the database: nothing can be judged ready.")
    for c in classes:
        lines += ["", f"{c['task_class'] or '(no task class)'}: {c['verdict']}"]
        lines.append(
            f"  {count_noun(c['sessions'], 'session')}; {c['checked_sessions']} with a "
            f"recorded stop: {c['matches']} match, {c['mismatches']} mismatch"
        )
        lines.append(f"  replay stops: {_counts_text(c['stop_reasons'])}")
        for reason in json.loads(c["reasons"]):
            lines.append(f"  - {reason}")
    if staying:
        lines += ["", f"In SQL: {STAY_SQL}"]
    return "\n".join(lines)


def _counts_text(counts_json: str) -> str:
    counts = json.loads(counts_json)
    return ", ".join(f"{k} {n}" for k, n in counts.items()) or "none"


JSON_COLUMNS = (
    "reasons", "unknown_vendor_stops", "unmetered_caps", "stop_reasons", "recorded_stops",
    "meter_coverage",
)


def report_json(verdicts: Verdicts, budgets: list[BudgetInForce] | None = None) -> dict[str, Any]:
    """``agent-ledger paid-path --json``: the budgets in force, and the ``task_classes`` rows
    with their JSON decoded, each with its parity mismatches spelled out."""
    mismatches: dict[str, list[dict[str, str]]] = defaultdict(list)
    for p in verdicts.parity:
        if p["parity"] == MISMATCH:
            mismatches[p["task_class"]].append(
                {"session_id": p["session_id"], "detail": p["parity_detail"]}
            )
    classes = []
    for row in verdicts.classes:
        c = dict(row)
        for column in JSON_COLUMNS:
            c[column] = json.loads(c[column])
        c["reason_kinds"] = [k for k in c["reason_kinds"].split(",") if k]
        c["parity_mismatches"] = mismatches[c["task_class"]]
        classes.append(c)
    return {
        "settings": {
            "tolerance": verdicts.settings.tolerance,
            "min_sessions": verdicts.settings.min_sessions,
        },
        "budgets": [b.to_dict() for b in budgets or []],
        "ready": [c["task_class"] for c in classes if c["verdict"] == READY],
        STAY: verdicts.staying,
        "task_classes": classes,
    }
