"""``agent-ledger record``: one event appended to a ledger, the budget enforced."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from ledger.cli.options import (
    EXIT_BUDGET,
    budget_options,
    make_options,
    utf8_text,
)
from ledger.core.reasons import StopReason
from ledger.ingest.files import LedgerPathError

RECORD_FIELDS = {
    "action": ("action",),
    "tool_calls": ("round",),
    "output_tokens": ("round",),
    "model": ("round",),
    "input_tokens": ("round",),
    "cache_creation_tokens": ("round",),
    "cache_read_tokens": ("round",),
    "reasoning_tokens": ("round",),
    "cost": ("round",),
    "vendor_stop": ("round",),
    "observation": ("round", "action"),
    "tool_error": ("round", "action"),
    "outcome": ("end",),
}


@click.command(name="record")
@click.argument("ledger_path", type=click.Path(dir_okay=False))
@click.option("--session", "session_id", required=True, help="Session id (one per agent run).")
@click.option(
    "--type", "kind", type=click.Choice(["start", "round", "action", "end"]),
    help="Event type (default: action, when --action is given).",
)
@click.option("--action", type=click.Choice(["think", "read", "write", "retry"]),
              help="Action class of an action event.")
@click.option("--detail", help="Short detail (secrets are redacted).")
@click.option("--tool", help="Tool name.")
@click.option("--tool-calls", type=click.IntRange(min=0), help="Round: number of tool calls.")
@click.option("--output-tokens", type=click.IntRange(min=0), help="Round: output tokens.")
@click.option("--model", help="Round: the model, which prices the round with its tokens.")
@click.option("--input-tokens", type=click.IntRange(min=0),
              help="Round: prompt tokens not read from or written to a cache.")
@click.option("--cache-creation-tokens", type=click.IntRange(min=0),
              help="Round: prompt tokens written to a cache.")
@click.option("--cache-read-tokens", type=click.IntRange(min=0),
              help="Round: prompt tokens read from a cache.")
@click.option("--reasoning-tokens", type=click.IntRange(min=0),
              help="Round: the part of the output tokens spent reasoning.")
@click.option("--cost", type=click.FloatRange(min=0),
              help="Round: what it cost in US dollars (wins over pricing its tokens).")
@click.option("--observation", help="What the tool or model observed (for the no-progress rule).")
@click.option("--observation-file", type=click.File("r", encoding="utf-8"),
              help="Read the observation from a file ('-' for standard input).")
@click.option("--tool-error/--no-tool-error", default=None, help="The tool failed / succeeded.")
@click.option("--vendor-stop", help="Round: the vendor's raw stop string.")
@click.option("--outcome", type=click.Choice([r.value for r in StopReason]),
              help="End: the session's own outcome.")
@click.option(
    "--task-class",
    callback=utf8_text,
    help="Task class (the first event that names one sets it).",
)
@budget_options
@click.option("--fsync", is_flag=True, help="Flush the event to disk before deciding.")
@click.option("--json", "as_json", is_flag=True, help="Print the session's row as JSON.")
def record_command(
    ledger_path: str,
    session_id: str,
    kind: str | None,
    observation_file: Any,
    task_class: str | None,
    budget_pairs: tuple[str, ...],
    budget_file: str | None,
    vendor_map: str | None,
    prices: str | None,
    fsync: bool,
    as_json: bool,
    **fields: Any,
) -> None:
    """Append one native event to LEDGER_PATH, replay the session so far, gate on the budget.

    The session's events up to this one are replayed through the budget, exactly as ingest
    would; if the session is stopped and this event is a step, the stop reason is printed and
    the exit code is 5. Elapsed time is measured from the session's first timestamp. Give the
    same --budget to every call of a session (and to ingest).

    \b
    Example:
        agent-ledger record run.jsonl --session s1 --action read --detail "open main.py"
        agent-ledger record run.jsonl --session s1 --type round --tool-calls 2 \\
            --output-tokens 350 --observation "$(cat out.txt)" --budget max_rounds=20
        agent-ledger record run.jsonl --session s1 --type round --model claude-opus-4-6 \\
            --input-tokens 1200 --cache-read-tokens 40000 --output-tokens 350 \\
            --budget max_cost=5
        agent-ledger record run.jsonl --session s1 --type end --outcome task_complete
    """
    from ledger.formats.seed_dialects import RecordError
    from ledger.ingest.replay import replay_session
    from ledger.live.append import append_line
    from ledger.live.recorder import iso, native_line, prepare_ledger, utc_now

    options = make_options(budget_pairs, budget_file, vendor_map, prices)
    kind = kind or ("action" if fields["action"] else None)
    if kind is None:
        raise click.UsageError("give --type, or --action for an action event")
    if observation_file is not None:
        if fields["observation"] is not None:
            raise click.UsageError("give --observation or --observation-file, not both")
        fields["observation"] = observation_file.read()
    for name, kinds in RECORD_FIELDS.items():
        if fields[name] is not None and kind not in kinds:
            option = "--" + name.replace("_", "-")
            raise click.UsageError(f"{option} does not go with --type {kind}")
    if kind == "action" and not fields["action"]:
        raise click.UsageError("an action event needs --action")
    event = {
        "ts": iso(utc_now()), "session": session_id, "type": kind, "task_class": task_class,
        **fields,
    }
    path = Path(ledger_path)
    try:
        prepare_ledger(path)
        line, record, _ = native_line(event)
        _, end = append_line(path, line, fsync)
        session = replay_session(path, session_id, options, end)
    except (LedgerPathError, RecordError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    row = session.row() if session is not None else {}
    if as_json:
        click.echo(json.dumps(row, indent=2))
    state = session.state if session is not None else None
    if state is not None and state.stopped and record.event.is_step:
        if not as_json:
            click.echo(state.stop_reason)
        click.echo(
            f"budget exceeded: {state.stop_detail} (session {session_id}, event "
            f"{state.stop_at})",
            err=True,
        )
        sys.exit(EXIT_BUDGET)
