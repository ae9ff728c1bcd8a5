"""The verdicts as the CLI prints them: a text report, and JSON with its columns decoded."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from ledger.analysis.budget_in_force import BudgetInForce, budget_lines
from ledger.analysis.verdicts import MISMATCH, READY, STAY, Verdicts, count_noun
from ledger.core.money import usd
from ledger.db.stored import Spend

STAY_SQL = "select task_class from task_classes where verdict = 'stay_on_paid_path'"


def report_text(
    verdicts: Verdicts, budgets: list[BudgetInForce] | None = None, db_path: str = "DB",
    spend: Mapping[str, Spend] | None = None,
) -> str:
    """``agent-ledger paid-path``'s readable report: the budgets the sessions were folded
    under (a replay stop is judged under them), then per class the verdict, its evidence and
    (given the classes' ``spend``) what the class spent and its share of all the spend."""
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
        money = spend_of(c["task_class"], spend or {})
        if money["priced_sessions"]:
            lines.append(
                f"  spend: {usd(money['cost_usd'])}, {100 * money['share_of_spend']:.1f}% of "
                f"all ({money['priced_sessions']} of {money['sessions']} sessions priced)"
            )
        for reason in json.loads(c["reasons"]):
            lines.append(f"  - {reason}")
    if staying:
        lines += ["", f"In SQL: {STAY_SQL}"]
    return "\n".join(lines)


def spend_of(task_class: str, spend: Mapping[str, Spend]) -> dict[str, Any]:
    """A class's spend, its share of every class's (None where nothing was spent), and how
    many of its sessions had a cost."""
    total = sum(s.cost_usd for s in spend.values())
    mine = spend.get(task_class, Spend(0.0, 0, 0))
    return {
        "cost_usd": mine.cost_usd if mine.priced else None,
        "share_of_spend": mine.cost_usd / total if total else None,
        "priced_sessions": mine.priced,
        "sessions": mine.sessions,
    }


def _counts_text(counts_json: str) -> str:
    counts = json.loads(counts_json)
    return ", ".join(f"{k} {n}" for k, n in counts.items()) or "none"


JSON_COLUMNS = (
    "reasons", "unknown_vendor_stops", "unmetered_caps", "stop_reasons", "recorded_stops",
    "meter_coverage",
)


def report_json(
    verdicts: Verdicts, budgets: list[BudgetInForce] | None = None,
    spend: Mapping[str, Spend] | None = None,
) -> dict[str, Any]:
    """``agent-ledger paid-path --json``: the budgets in force, and the ``task_classes`` rows
    with their JSON decoded, each with its parity mismatches spelled out and its spend
    (``spend_of``)."""
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
        c["spend"] = spend_of(c["task_class"], spend or {})
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
