"""What the docs promise, checked against what the code does (tests/test_docs.py checks the
generated reference, the links and the examples' syntax; these check their content):

* every ``agent-ledger ...`` command line the README and docs/ show (in a code block or in
  backticks) names a command that exists and only options that command has;
* every option of a command is named in its section of docs/ (or, with no section, on the
  pages the README's table of commands links it to);
* every ``--option`` the docs name is an option of some command, or one of the other
  programs' options listed here (pytest's, the benchmark scripts', ...);
* docs/schema.md names every table and view a fresh ingest makes, each table of its list
  exists with the key it gives, and it names the last migration; metadata.yml describes every
  column (generated ones too) and no column that is not there;
* docs/export.md's contract gives each exported table's columns in order, with their types;
* docs/dashboard.md lists every canned query with the parameters its SQL takes, and every
  dashboard URL the docs give is a page, canned query or table that is served;
* the table of docs/conformance.md is what the ledger makes of each real log (the shipped
  samples always, ``more/`` when it is beside the repository), and its prose adds it up.
"""

from __future__ import annotations

import re
import shlex
import sqlite3
from collections import Counter
from pathlib import Path

import click
import pytest
import yaml

from ledger.core.budget import Budget
from ledger.db.migrations import MIGRATIONS
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.ingest.replay import replay
from tests.helpers import ROOT, SAMPLES, real_log
from tests.test_docs import COMMANDS, DOCS, README, SUBJECT_PAGES, text

DOCUMENTS = [README, *SUBJECT_PAGES]
BY_NAME = dict(COMMANDS)
#: The languages of fenced blocks that hold shell commands ("" for none given).
SHELLS = frozenset({"", "sh", "bash", "console", "shell"})


# --- command lines and options -------------------------------------------------------------


def command_lines(markdown: str) -> list[str]:
    """The ``agent-ledger ...`` lines of the shell code (indented blocks, fenced blocks of no
    language or of a shell's, a ``$ `` prompt allowed, a ``\\`` continuation joined) and of
    the backticked spans of the prose. A ``text`` block is output, not commands."""
    found = re.findall(r"`(agent-ledger [^`\n]+)`", markdown)
    fence: str | None = None  # the language of the fenced block the line is in
    for line in re.sub(r"\\\n\s*", " ", markdown).splitlines():
        if line.lstrip().startswith("```"):
            fence = line.lstrip()[3:].strip() if fence is None else None
            continue
        code = line.strip().removeprefix("$ ")
        shell = fence in SHELLS if fence is not None else line.startswith("    ")
        if shell and code.startswith("agent-ledger "):
            found.append(code)
    return found


def words_of(line: str) -> list[str]:
    """The command's own words: up to a comment, pipe, redirect or chained command."""
    line = re.split(r"\s(?:#|\||>|&&|\|\|)\s?", line, maxsplit=1)[0]
    return shlex.split(line)[1:]


def options_of(command: click.Command) -> set[str]:
    return {"--help", "-h"} | {
        opt for param in command.params if isinstance(param, click.Option) and not param.hidden
        for opt in param.opts + param.secondary_opts
    }


def check_line(line: str) -> str | None:
    """What is wrong with one documented command line, or None."""
    words = words_of(line)
    if not words or not re.fullmatch(r"[a-z][a-z-]*", words[0]):
        return None  # not a command: output or prose such as "agent-ledger budget stop: ..."
    name = words[0]
    if name not in BY_NAME:
        return f"no command {name!r}"
    if isinstance(BY_NAME[name], click.Group):
        if len(words) < 2 or f"{name} {words[1]}" not in BY_NAME:
            return None if len(words) < 2 else f"no command {name} {words[1]!r}"
        name = f"{name} {words[1]}"
    known = options_of(BY_NAME[name])
    unknown = [w.split("=")[0] for w in words
               if re.match(r"--?[a-zA-Z]", w) and w.split("=")[0] not in known]
    return f"agent-ledger {name} has no {unknown}" if unknown else None


@pytest.mark.parametrize("document", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_every_command_line_shown_exists_with_its_options(document: Path) -> None:
    wrong = [f"{line!r}: {why}" for line in command_lines(text(document))
             if (why := check_line(line)) is not None]
    assert not wrong, f"{document.name}: {wrong}"


@pytest.mark.parametrize(("line", "wrong"), [
    ("agent-ledger ingest ledger.db runs/ --jobs 0", None),
    ("agent-ledger hook install --project --dry-run", None),
    ("agent-ledger paid-path ledger.db --fail-on-stay || echo keep", None),
    ("agent-ledger ingest ledger.db runs/ --batch-size 5", "has no ['--batch-size']"),  # hidden
    ("agent-ledger what-if ledger.db --jobs 2", "has no ['--jobs']"),
    ("agent-ledger hook nope", "no command hook 'nope'"),
    ("agent-ledger ingets ledger.db", "no command 'ingets'"),
])
def test_a_wrong_command_line_is_caught(line: str, wrong: str | None) -> None:
    found = check_line(line)
    assert (found is None) if wrong is None else (found is not None and wrong in found), found


def long_options(command: click.Command) -> list[str]:
    return [opt for param in command.params if isinstance(param, click.Option)
            and not param.hidden for opt in param.opts + param.secondary_opts
            if opt.startswith("--")]


def where_explained(name: str) -> str:
    """The docs of one command: its section (``## `agent-ledger NAME ...` ``) where it has one,
    else the pages the README's table of commands links it to."""
    for page in SUBJECT_PAGES:
        sections = re.findall(rf"^## `agent-ledger {name}\b[^`\n]*`\n(.*?)(?=^## |\Z)",
                              text(page), flags=re.M | re.S)
        if sections:
            return sections[0]
    row = re.search(rf"^\|[^|]*`agent-ledger {name}\b.*\|$", text(README), flags=re.M)
    assert row, f"the README's table of commands has no row for {name}"
    return "\n".join(text(DOCS / page) for page in re.findall(r"\]\(docs/([\w-]+\.md)", row[0]))


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_option_is_explained_where_its_command_is(name: str, command: click.Command) -> None:
    """Where a user reads about a command, each of its options is named (tests/test_docs.py
    asks only that it be named on some page: ``--limit`` of ``what-if`` would count for
    ``propose-budget``'s)."""
    if isinstance(command, click.Group):
        return
    docs = where_explained(name)
    missing = [opt for opt in long_options(command) if opt not in docs]
    assert not missing, f"agent-ledger {name}: {missing} are not named where it is explained"


#: Options of other programs the docs name, by where they come from.
OTHER_PROGRAMS = {
    "--api-key", "--password", "--token",  # secrets on a command line (what is redacted)
    "--co", "--collect-only",  # pytest
    "--version",  # any program (`node --version` is a read)
    "--calls", "--user-install",  # bench/hook.py
    "--events", "--repeat", "--skip",  # bench/run.py
    "--check",  # scripts/cli_reference.py
    "--nl",  # sqlite-utils insert
    "--offline",  # ccusage
    "--root",  # datasette serve, through --datasette-option
    "--socket",  # python -m ledger.live.hook_main serve
}


def test_every_option_the_docs_name_exists() -> None:
    """An option named in prose (`--strict exits with code 3`) is some command's option: a
    renamed or removed option cannot stay in the docs."""
    options = set().union(*(options_of(command) for _, command in COMMANDS))
    named = {
        (document.name, opt) for document in DOCUMENTS
        for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text(document))
    }
    unknown = sorted(f"{doc}: {opt}" for doc, opt in named
                     if opt not in options and opt not in OTHER_PROGRAMS)
    assert not unknown, unknown


# --- the schema ----------------------------------------------------------------------------


TABLES = "select name from sqlite_master where type in ('table', 'view')"


@pytest.fixture(scope="module")
def fresh_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("contract") / "ledger.db"
    ingest(db, [SAMPLES], Options())
    return db


def schema_rows() -> dict[str, str]:
    """docs/schema.md's list of tables: name -> its key cell."""
    page = text(DOCS / "schema.md").split("## Tables\n", 1)[1]
    rows = re.findall(r"^\| `(\w+)` \| .* \| ([^|]+) \|$", page, flags=re.M)
    return {name: key.strip() for name, key in rows}


def keys_of(conn: sqlite3.Connection, table: str) -> list[tuple[str, ...]]:
    """The primary key and the unique indexes of ``table``, each as its columns."""
    info = conn.execute(f"pragma table_info([{table}])").fetchall()
    keys = [tuple(row[1] for row in sorted(info, key=lambda r: r[5]) if row[5])]
    for _, index, unique, *_ in conn.execute(f"pragma index_list([{table}])"):
        if unique:
            keys.append(tuple(r[2] for r in conn.execute(f"pragma index_info([{index}])")))
    return [key for key in keys if key]


def test_the_schema_page_names_every_table_with_its_key(fresh_db: Path) -> None:
    page = text(DOCS / "schema.md")
    rows = schema_rows()
    conn = sqlite3.connect(fresh_db)
    try:
        made = {name for (name,) in conn.execute(TABLES)}
        unnamed = sorted(name for name in made if f"`{name}`" not in page)
        assert not unnamed, f"docs/schema.md does not name {unnamed}"
        assert set(rows) <= made, f"docs/schema.md lists {sorted(set(rows) - made)}"
        for table, key in rows.items():
            if "`" not in key:  # "those columns": the row says which
                continue
            columns = tuple(re.findall(r"\w+", key.replace("`", "")))
            assert columns in keys_of(conn, table), (table, columns, keys_of(conn, table))
    finally:
        conn.close()
    last = MIGRATIONS[-1][0]
    assert f"`{last}`" in page, f"docs/schema.md does not name the last migration, {last}"


def test_metadata_describes_every_column_and_no_other(fresh_db: Path) -> None:
    """``table_xinfo``: generated columns (``cost_nusd``) too, which ``table_info`` omits."""
    tables = yaml.safe_load((ROOT / "metadata.yml").read_text())["databases"]["ledger"]["tables"]
    conn = sqlite3.connect(fresh_db)
    try:
        wrong = []
        for (name,) in conn.execute(TABLES):
            meta = tables.get(name, {})
            if meta.get("hidden"):
                continue
            columns = [row[1] for row in conn.execute(f"pragma table_xinfo([{name}])")]
            described = meta.get("columns", {})
            wrong += [f"{name}.{c}: not described" for c in columns if c not in described]
            wrong += [f"{name}.{c}: no such column" for c in described if c not in columns]
    finally:
        conn.close()
    assert not wrong, wrong


#: How docs/export.md names the Parquet type of each SQLite declared type.
PARQUET = {"INTEGER": "int64", "REAL": "double", "TEXT": "string", "": "string"}


def test_the_export_contract_lists_each_table_s_columns_in_order_with_their_types(
    fresh_db: Path,
) -> None:
    page = text(DOCS / "export.md").split("## The contract", 1)[1]
    tables = re.findall(r"^\| `(\w+)` \| (`.*) \|$", page, flags=re.M)
    assert len(tables) == 5
    conn = sqlite3.connect(fresh_db)
    try:
        for table, cells in tables:
            shown = re.findall(r"`(\w+)` (\w+)", cells)
            made = [(row[1], PARQUET[row[2]])
                    for row in conn.execute(f"pragma table_xinfo([{table}])")]
            assert shown == made, table
    finally:
        conn.close()


def canned_queries() -> dict[str, str]:
    return yaml.safe_load((ROOT / "metadata.yml").read_text())["databases"]["ledger"]["queries"]


def test_every_canned_query_is_in_the_dashboard_page_with_its_parameters() -> None:
    page = text(DOCS / "dashboard.md")
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", page, flags=re.M))
    wrong = []
    for name, query in canned_queries().items():
        if name not in rows:
            wrong.append(f"{name}: no row in the canned queries of docs/dashboard.md")
            continue
        parameters = set(re.findall(r"(?<!:):(\w+)", query["sql"]))
        wrong += [f"{name}: ?{p}= not shown" for p in sorted(parameters)
                  if f"?{p}=" not in rows[name]]
    assert not wrong, wrong


#: A dashboard URL the docs give: ``/ledger/-/overview``, ``/ledger/paid_path.json``.
URL = re.compile(r"(?<![\w/.])/ledger/((?:-/)?[\w./~-]+)")


def test_every_dashboard_url_the_docs_give_is_served(fresh_db: Path) -> None:
    """A page of the plugin's routes, or a canned query, table or view of the database."""
    from ledger_dashboard.pages import routes

    conn = sqlite3.connect(fresh_db)
    try:
        names = {name for (name,) in conn.execute(TABLES)} | set(canned_queries())
    finally:
        conn.close()
    patterns = [re.compile(pattern) for pattern, _ in routes()]
    wrong = [
        f"{document.name}: /ledger/{path}" for document in DOCUMENTS
        for path in URL.findall(text(document))
        if not any(p.match(f"/ledger/{path}") for p in patterns)
        and path.removesuffix(".json") not in names
    ]
    assert not wrong, wrong


# --- the conformance table -----------------------------------------------------------------


CONFORMANCE = text(DOCS / "conformance.md")
#: The table's rows: file, then its cells.
ROWS = {
    cells[0].strip("`"): cells[1:]
    for line in CONFORMANCE.splitlines() if line.startswith("| `")
    for cells in [[c.strip() for c in line.strip().strip("|").split("|")]]
}
COLUMNS = ("sessions", "rounds", "tool_calls", "output_tokens", "input_tokens",
           "cache_creation_tokens", "cache_read_tokens", "writes", "stop", "placeholder")


def ledger_figure(cell: str) -> str | None:
    """The ledger's figure of a cell (``1,359``, ``300 (ccusage 475)``, ``user_cancel ✓``):
    its first word, without thousands separators; None for a dash."""
    first = cell.split(" (")[0].removesuffix(" ✓").replace(",", "")
    return None if first == "—" else first


def shown(path: Path) -> list[str | None]:
    """A file's row as the ledger makes it: its sessions under the placeholder budget."""
    ((sessions, _),) = replay([path], Options(budget=Budget()))
    if not sessions:
        return ["0"] + [None] * (len(COLUMNS) - 1)

    def total(key: str) -> str | None:
        values = [s[key] for s in sessions if s[key] is not None]
        return str(sum(values)) if values else None

    main = [s for s in sessions if s["parent_session_id"] is None] or sessions
    stops = Counter(s["stop_reason"] for s in sessions)
    return [str(len(sessions)), *(total(c) for c in COLUMNS[1:8]), str(main[0]["recorded_stop"]),
            ", ".join(f"{reason} {n}" for reason, n in sorted(stops.items()))]


def row_file(name: str) -> str:
    return name if "/" not in name else f"more/{name}"


@pytest.mark.parametrize("name", sorted(ROWS), ids=lambda n: n[:40])
def test_each_conformance_row_is_what_the_ledger_makes(name: str) -> None:
    path = real_log(row_file(name))  # a file of more/ is skipped when it is not there
    *figures, placeholder = ROWS[name]
    want = [*(ledger_figure(cell) for cell in figures), None if placeholder == "—" else placeholder]
    got = shown(path)
    # A token count the log lacks is "—" where the ledger has no count, or has 0 of it.
    wrong = [(column, w, g) for column, w, g in zip(COLUMNS, want, got, strict=True)
             if w != g and not (w is None and g == "0" and "tokens" in column)]
    assert not wrong, f"docs/conformance.md, {name}: (column, shown, made) {wrong}"


def test_the_conformance_prose_adds_up_the_table() -> None:
    claude = [cells for name, cells in ROWS.items()
              if name.startswith("claude-code/") or "_claude_code_" in name]
    stops: Counter[str] = Counter()
    for cells in claude:
        for part in cells[COLUMNS.index("placeholder")].split(", "):
            reason, n = part.rsplit(" ", 1)
            stops[reason] += int(n)
    prose = " ".join(CONFORMANCE.split("## Under the seeds' placeholder budget", 1)[1].split())
    sessions = sum(int(cells[0]) for cells in claude)
    for phrase in (
        f"The {len(claude)} Claude Code files hold {sessions} sessions",
        f"`max_steps` ({stops['max_steps']}) or `max_seconds` ({stops['max_seconds']})",
        f"{stops['max_writes']} on `max_writes`",
        f"{stops['tool_error_budget']} on `tool_error_budget`",
        f"and {stops['task_complete']} run out",
    ):
        assert phrase in prose, phrase
