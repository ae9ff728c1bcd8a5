"""Leftovers: second control planes that would restart the vendor loop without the budget.

Seed 000, "Leftovers after you leave the paid coding agent": walk the list before you revoke
the paid key, because each item can restart the vendor loop without your budget object, and
write the findings into ``leftovers.md``. "If rg still finds a resume path, that path is a
second control plane. Either delete it or pass the same LoopBudget into it."

The categories are the seed's two ``rg`` searches and the six kinds of leftover it names, each
with regular expressions (Python syntax, searched line by line; ``(?i:...)`` for a
case-insensitive part) and, optionally, the files it applies to. A TOML file extends or
replaces them (:func:`load_categories`).

Pure: text in, findings and Markdown out. The walk over a code base is :mod:`ledger.analysis.scan`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any

from ledger.core.redact import redact

EXCERPT_MAX = 200
MATCH_MAX = 200


class PatternsError(ValueError):
    """A patterns file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Category:
    """One kind of leftover: what it is, what to do about it, and how to find it."""

    name: str
    title: str
    description: str
    action: str
    patterns: tuple[str, ...]
    paths: tuple[str, ...] = ()  # globs; none: every file
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", _compile(self.name, self.patterns))

    def applies_to(self, path: str) -> bool:
        """Whether this category searches ``path`` (a relative POSIX path).

        A glob with a ``/`` matches the whole path, one without matches the file name (as in
        ``.gitignore``); ``*`` also matches ``/``.
        """
        if not self.paths:
            return True
        name = path.rsplit("/", 1)[-1]
        return any(fnmatchcase(path if "/" in g else name, g) for g in self.paths)


def _compile(name: str, patterns: tuple[str, ...]) -> re.Pattern[str]:
    if not patterns:
        raise PatternsError(f"category {name!r} has no patterns")
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise PatternsError(f"category {name!r}: bad pattern {pattern!r}: {exc}") from None
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.MULTILINE)


DELETE_OR_BUDGET = "Either delete it or pass the same LoopBudget into it."

#: The built-in categories: seed 000's two searches, then its six leftovers in its order.
CATEGORIES: tuple[Category, ...] = (
    Category(
        "loop_setting",
        "Vendor loop settings",
        "Settings of the vendor's hidden while-loop (seed 000's first rg search): a number that "
        "still bounds a loop you do not own.",
        "Delete the setting, or replace its number with the same LoopBudget the new host "
        "honours (a budget file loaded by one loop, not a second one).",
        (r"max_iterations|tool_limit|continue_on_error|agent.loop",),
    ),
    Category(
        "paid_agent_path",
        "Paths to the paid agent",
        "References to the paid agent's endpoint, key or resume path (seed 000's second rg "
        "search).",
        "Delete it once its task class has moved, keeping one break-glass path until two quiet "
        "days pass (seed 000 step 5); anything that stays must get the same LoopBudget.",
        (r"PAID_AGENT|CODING_AGENT_URL|RESUME_THREAD",),
    ),
    Category(
        "ide_extension",
        "IDE extensions",
        "IDE extensions that still call the paid agent when a test fails, bypassing your round "
        "cap entirely.",
        "Remove the extension's call to the paid agent (or the extension from the workspace "
        "recommendations), or route it through the host that enforces the budget.",
        (
            r"\bvscode\.(?:lm|chat)\.",
            r"\bonDid(?:EndTestRun|ChangeTestResults|EndTaskProcess)\b",
            r'"(?:github\.copilot|cursor|codeium|continue|cody|tabnine|windsurf|cline'
            r'|claude-dev|amazonQ)\.[\w.-]*"\s*:',
            r"(?i:[\"'](?:github\.copilot(?:-chat)?|continue\.continue|codeium\.codeium"
            r"|sourcegraph\.cody-ai|saoudrizwan\.claude-dev|rooveterinaryinc\.roo-cline"
            r"|tabnine\.tabnine-vscode|amazonwebservices\.amazon-q-vscode"
            r"|anthropic\.claude-code)[\"'])",
        ),
    ),
    Category(
        "ci_retry",
        "CI retries",
        "CI helpers that retry the same coding task on timeout, multiplying max_rounds without "
        "a shared counter.",
        "Remove the retry around the coding task, or give every attempt one shared budget "
        "(one counter across retries, not a fresh budget per attempt).",
        (
            r"\bnick-fields/retry\b|\bWandalen/wretry\.action\b",
            r"^[ \t]*-?[ \t]*retry:[ \t]*(?:\d|$)",
            r"\bretry_on:[ \t]*(?:timeout|any)\b",
            r"\bwhen:[^\n]*\b(?:stuck_or_timeout_failure|job_execution_timeout)\b",
            r"\bmax[_-]attempts\b|\bstop_after_attempt\b",
            r"(?i:\bretr(?:y|ies)\b[^\n]*\btime(?:d[ -])?out\b|\btime(?:d[ -])?out\b[^\n]*"
            r"\bretr(?:y|ies)\b)",
        ),
    ),
    Category(
        "resume_webhook",
        "Resume webhooks",
        "Webhooks that resume a thread after a tool result, with no copy of LoopState on the "
        "new host.",
        "Delete the resume path, or make it load the session's LoopState and the same "
        "LoopBudget before it continues.",
        (
            r"\bsubmit_tool_outputs\b|\bsubmitToolOutputs\b",
            r"\bprevious_response_id\b|\bpreviousResponseId\b",
            r"\bresume_thread\b|\bresumeThread\b|\bthread\.resume\b",
            r"\bCommand\(\s*resume\s*=",
            r"(?i:\bwebhooks?\b[^\n]*\b(?:resume|continue)\b|\b(?:resume|continue)\b[^\n]*"
            r"\bwebhooks?\b)",
            r"\bon_tool_result\b|\bonToolResult\b",
        ),
    ),
    Category(
        "continue_prompt",
        "Cached continue prompts",
        'Cached vendor "continue" prompts that force another completion after you already '
        "stopped locally.",
        "Delete the cached prompt: only the budgeted loop may ask for another round, and only "
        "while no stop reason is set.",
        (
            r"(?i:\bcontinue[_-]?prompt\b|\bauto[_-]?continue\b)",
            r"(?i:\bplease continue\b|\bkeep going\b|\bcontinue where you left off\b"
            r"|\bcontinue from where you (?:left off|stopped)\b)",
            r"(?i:\b(?:content|prompt|text|message|input)[\"']?[ \t]*[:=][ \t]*[\"'](?:please )?"
            r"(?:continue|go on|keep going)[.!]?[\"'])",
        ),
    ),
    Category(
        "file_watcher",
        "File watchers",
        "File-watchers that treat every patch as a fresh task and open a second loop on the "
        "same workspace.",
        "If the watcher starts the agent, delete it, or make it hand the change to the running "
        "session (one loop, one LoopBudget per workspace) instead of opening a new task.",
        (
            r"\bfrom watchdog\b|\bimport watchdog\b|\bwatchdog\.observers\b",
            r"\bchokidar\b|\bfs\.watch(?:File)?\(|\bwatchfiles\b",
            r"\binotifywait\b|\bwatchman\b|\bfswatch\b|\|[ \t]*entr\b",
            r"\bon_modified\b|\bonDidChangeTextDocument\b|\bonDidSaveTextDocument\b",
        ),
    ),
    Category(
        "vendor_dashboard",
        "Dashboards on vendor counters",
        "Observability dashboards that still chart vendor iteration counts, hiding your new "
        "stop reasons from on-call.",
        "Chart the ledger's stop reasons (sessions.stop_reason, steps counters) instead of the "
        "vendor's counter, then delete the old panel or alert.",
        (
            r"(?i:\b\w*(?:agent|vendor|assistant|copilot|llm)\w*_(?:iterations?|rounds?|turns?)"
            r"(?:_total|_count)?\b)",
            r"(?i:\biterations?_(?:total|count)\b)",
            r"\"expr\"\s*:\s*\"[^\"\n]*(?i:iteration)",
        ),
    ),
)


@dataclass(frozen=True)
class Finding:
    """One line of one file that matches one category."""

    path: str
    line: int
    category: str
    matched: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def scan_text(path: str, text: str, categories: Iterable[Category]) -> list[Finding]:
    """Findings in one file's text: at most one per line and category, in line order."""
    found: list[Finding] = []
    starts: list[int] | None = None
    for category in categories:
        if not category.applies_to(path):
            continue
        last = 0
        for match in category.regex.finditer(text):
            if starts is None:
                starts = _line_starts(text)
            line = _line_of(starts, match.start())
            if line == last or match.end() == match.start():
                continue
            last = line
            found.append(_finding(path, text, starts, line, category.name, match))
    found.sort(key=lambda f: f.line)  # stable: categories keep their order within a line
    return found


def _line_starts(text: str) -> list[int]:
    return [0, *(m.end() for m in re.finditer("\n", text))]


def _line_of(starts: list[int], offset: int) -> int:
    return bisect_right(starts, offset)


def _finding(
    path: str, text: str, starts: list[int], line: int, name: str, match: re.Match[str]
) -> Finding:
    """The finding, with secrets on the line redacted before any of it is kept."""
    begin = starts[line - 1]
    end = starts[line] - 1 if line < len(starts) else len(text)
    row, _ = redact(text[begin:end].rstrip("\r"))
    matched, _ = redact(match.group(0).split("\n", 1)[0][:MATCH_MAX])
    column = max(row.find(matched), 0)
    return Finding(path, line, name, matched, _excerpt(row, column))


def _excerpt(row: str, column: int) -> str:
    """The line, stripped, or a window of it around the match if it is long."""
    if len(row.strip()) <= EXCERPT_MAX:
        return row.strip()
    start = max(0, column - EXCERPT_MAX // 3)
    piece = row[start : start + EXCERPT_MAX].strip()
    return ("…" if start else "") + piece + ("…" if start + EXCERPT_MAX < len(row) else "")


# --- configuration ------------------------------------------------------------------------------

#: Folders of installed packages and tool caches: not the code base's own control planes.
SKIP_DIRS = (
    ".venv", "venv", ".tox", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".hypothesis",
)
_CATEGORY_KEYS = {"title", "description", "action", "patterns", "paths", "enabled"}
_TOP_KEYS = {"replace", "skip_dirs", "categories"}


@dataclass(frozen=True)
class Patterns:
    """The categories in force and the folder names the walk skips besides .git and
    node_modules."""

    categories: tuple[Category, ...] = CATEGORIES
    skip_dirs: tuple[str, ...] = SKIP_DIRS


def load_categories(data: Mapping[str, Any], source: str) -> Patterns:
    """Categories from a parsed TOML patterns file. Format::

        replace = false                  # true: only the categories and skip_dirs below
        skip_dirs = ["vendor", "dist"]   # more folder names to skip (besides SKIP_DIRS;
                                         # .git and node_modules are always skipped)

        [categories.ci_retry]            # a built-in category: patterns and paths are added,
        patterns = ['retries=\\d+']      # title, description and action replace
        paths = ["*.yml"]

        [categories.file_watcher]
        enabled = false                  # drop a built-in category

        [categories.agent_gateway]       # a new category (patterns required)
        title = "Internal agent gateway"
        action = "Route it through the budgeted host."
        patterns = ['AGENT_GATEWAY_URL']
    """
    _known(data, _TOP_KEYS, source)
    replace_all = _flag(data, "replace", False, source)
    skip = _strings(data.get("skip_dirs", []), f"{source}: skip_dirs")
    tables = data.get("categories", {})
    if not isinstance(tables, dict):
        raise PatternsError(f"{source}: 'categories' must be tables, [categories.NAME]")
    current = {} if replace_all else {c.name: c for c in CATEGORIES}
    for name, table in tables.items():
        where = f"{source}: [categories.{name}]"
        if not isinstance(table, dict):
            raise PatternsError(f"{where} must be a table")
        _known(table, _CATEGORY_KEYS, where)
        enabled = _flag(table, "enabled", True, where)
        if not enabled:
            current.pop(name, None)
            continue
        try:
            current[name] = _category(name, table, current.get(name), where)
        except PatternsError as exc:
            raise PatternsError(f"{where}: {exc}") from None
    if not current:
        raise PatternsError(f"{source}: no categories left to search for")
    return Patterns(tuple(current.values()), skip if replace_all else SKIP_DIRS + skip)


def _category(name: str, table: Mapping[str, Any], base: Category | None, where: str) -> Category:
    patterns = _strings(table.get("patterns", []), f"{where} patterns")
    paths = _strings(table.get("paths", []), f"{where} paths")
    text = {k: table[k] for k in ("title", "description", "action") if k in table}
    for key, value in text.items():
        if not isinstance(value, str) or not value.strip():
            raise PatternsError(f"{where}: {key!r} must be a non-empty string")
    if base is not None:
        return replace(
            base, patterns=base.patterns + patterns, paths=base.paths + paths, **text
        )
    return Category(
        name,
        text.get("title", name),
        text.get("description", ""),
        text.get("action", DELETE_OR_BUDGET),
        patterns,
        paths,
    )


def _known(table: Mapping[str, Any], keys: Iterable[str], where: str) -> None:
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise PatternsError(
            f"{where}: unknown key {unknown[0]!r}; expected {', '.join(sorted(keys))}"
        )


def _flag(table: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise PatternsError(f"{where}: {key!r} must be true or false")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PatternsError(f"{where} must be an array of non-empty strings")
    return tuple(value)


# --- leftovers.md -------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the walk looked at, for the report."""

    files: int = 0
    binary: int = 0
    too_large: int = 0
    unreadable: int = 0
    links: int = 0
    checklists: int = 0  # leftovers.md files this command wrote, never searched

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


#: How every checklist :func:`to_markdown` writes begins (see :func:`is_checklist`).
HEADING = "# Leftovers: second control planes"
FOUND_BY = "Found by `agent-ledger leftovers`"


def is_checklist(text: str) -> bool:
    """Whether ``text`` is a checklist this command wrote (an earlier run's, wherever its
    ``--output`` put it): searching it would count every leftover it lists a second time."""
    return text.startswith(f"{HEADING}\n\n{FOUND_BY} in ")


def to_markdown(
    repo: str, findings: list[Finding], categories: Iterable[Category], tally: Tally
) -> str:
    """leftovers.md: a checklist grouped by category, each with what to do about it."""
    findings = sorted(findings, key=lambda f: (f.path, f.line))
    skipped = ", ".join(
        f"{n} {what}" for n, what in (
            (tally.binary, "binary"), (tally.too_large, "too large"),
            (tally.unreadable, "unreadable"), (tally.links, "symbolic links"),
            (tally.checklists, "leftover checklists"),
        ) if n
    )
    out = [
        HEADING,
        "",
        f"{FOUND_BY} in {_code(repo)}: {len(findings)} places that can "
        "restart the vendor loop without your budget (seed 000, \"Leftovers after you leave the "
        "paid coding agent\"). Walk this list before you revoke the paid key. For each one: "
        f"{DELETE_OR_BUDGET[0].lower()}{DELETE_OR_BUDGET[1:]} Two control planes means your "
        "leftover list is lying.",
        "",
        f"Searched {tally.files} files (skipped: .git, node_modules"
        + (f"; {skipped}" if skipped else "")
        + "). Matches are candidates: tick one off when it is deleted, shown harmless, or "
        "given the same LoopBudget.",
    ]
    for category in categories:
        mine = [f for f in findings if f.category == category.name]
        out += ["", f"## {category.title} ({len(mine)})", ""]
        if category.description:
            out.append(f"{category.description}  ")
        out += [f"**What to do:** {category.action}", ""]
        if not mine:
            out.append("None found.")
        for f in mine:
            out.append(f"- [ ] {_code(f'{f.path}:{f.line}')}: {_code(f.text)}")
    return "\n".join(out) + "\n"


def _code(text: str) -> str:
    """A Markdown code span that holds ``text`` whatever backticks it contains."""
    text = text.replace("\n", " ")
    ticks = max((len(m) for m in re.findall("`+", text)), default=0) + 1
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{'`' * ticks}{pad}{text}{pad}{'`' * ticks}"
