"""``agent-ledger leftovers``: second control planes left in a code base."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import click

from ledger.cli.options import (
    EXIT_STRICT,
    ledger_database,
)


@click.command(name="leftovers")
@click.argument("repo_path", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--db",
    "db_path",
    type=click.Path(dir_okay=False),
    help="Also write the findings to the leftovers table of this ledger database.",
)
@click.option(
    "--patterns",
    "patterns_file",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML file that extends or replaces the categories and their patterns.",
)
@click.option(
    "-o",
    "--output",
    help="Where to write the checklist (default: REPO_PATH/leftovers.md; - for standard output).",
)
@click.option(
    "--max-file-bytes",
    type=click.IntRange(min=1),
    default=2 * 1024 * 1024,
    show_default=True,
    help="Larger files are counted, not read.",
)
@click.option("--strict", is_flag=True, help="Exit with code 3 if any leftover was found.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def leftovers_command(
    repo_path: str,
    db_path: str | None,
    patterns_file: str | None,
    output: str | None,
    max_file_bytes: int,
    strict: bool,
    as_json: bool,
) -> None:
    """Find second control planes in the code base REPO_PATH: places that would restart the
    vendor loop without the budget.

    Searches every text file (not .git, node_modules, binary or larger files) for seed 000's
    patterns and its six leftovers: IDE extensions, CI retries, resume webhooks, cached
    continue prompts, file watchers, dashboards on vendor counters. Writes leftovers.md, a
    checklist grouped by category with what to do about each (delete it, or pass the same
    LoopBudget into it), and with --db the leftovers table (this repository's rows replaced).

    \b
    Example:
        agent-ledger leftovers .
        agent-ledger leftovers ../service --db ledger.db --output service-leftovers.md
        agent-ledger leftovers . --patterns leftovers.toml --strict --json
    """
    from ledger.analysis.leftovers import PatternsError, to_markdown
    from ledger.analysis.scan import scan, store_findings

    if as_json and output == "-":
        raise click.UsageError("--json and --output - both write to standard output")
    try:
        patterns = _leftover_patterns(patterns_file)
    except PatternsError as exc:
        raise click.ClickException(str(exc)) from None
    if db_path:
        ledger_database(db_path, new_ok=True)
    target = None if output == "-" else Path(output or Path(repo_path) / "leftovers.md")
    result = scan(repo_path, patterns, max_file_bytes, exclude=target)
    for note in result.unreadable:
        click.echo(f"{note}; not searched", err=True)
    text = to_markdown(result.repo, result.findings, result.categories, result.tally)
    try:
        if target is None:
            click.echo(text, nl=False)
        else:
            target.write_text(text, encoding="utf-8")
        if db_path:
            store_findings(db_path, result)
    except OSError as exc:
        raise click.ClickException(f"cannot write: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise click.ClickException(f"{db_path}: {exc}") from None
    if as_json:
        click.echo(json.dumps({
            "repo": result.repo,
            "searched": result.tally.to_dict(),
            "findings": [f.to_dict() for f in result.findings],
        }, indent=2))
    elif target is not None:
        counts = Counter(f.category for f in result.findings)
        listed = ", ".join(
            f"{c.name} {counts[c.name]}" for c in result.categories if c.name in counts
        )
        click.echo(
            f"{result.tally.files} files searched, {len(result.findings)} leftovers found"
            + (f" ({listed})" if listed else "")
        )
        also = f" and the leftovers table of {db_path}" if db_path else ""
        click.echo(f"wrote {target}{also}")
    if strict and result.findings:
        sys.exit(EXIT_STRICT)


def _leftover_patterns(path: str | None) -> Any:
    import tomllib

    from ledger.analysis.leftovers import Patterns, PatternsError, load_categories

    if path is None:
        return Patterns()
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise PatternsError(f"{path}: not a valid TOML patterns file: {exc}") from None
    return load_categories(data, path)
