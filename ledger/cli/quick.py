"""The ``agent-ledger`` entry point: a re-ingest with nothing new answered before click loads,
and one with new lines to read run without click.

``agent-ledger ingest DB PATHS...``, given no option but ``--strict`` and ``--no-progress`` (a
bar with no line to count draws nothing), over files that are all sources read to their end and
untouched since (:mod:`ledger.ingest.unchanged`), in a database whose schema and verdict tables
are current, prints what the full command would print for it and exits 0: with ``os`` and
``sqlite3`` alone, one query, one stat a file, and nothing written, as the full command writes
nothing then either. Anything else goes further: a plain ingest (no option but ``--strict``,
``--json`` and ``--[no-]progress``) with something to read, or a database to make or migrate,
or with ``--json`` or ``--progress``, is run by :func:`ledger.cli.ingest_report.plain_ingest`,
the code the command runs (its defaults, bar and errors), without loading click; any other
command line goes to the full command line, :mod:`ledger.cli.group`, which says everything
itself. Loading click, sqlite-utils and the fold costs a few hundred milliseconds, the answer
here a few: a re-run a user can feel (``bench/rerun.py``). ``ingest ... --resident`` goes to
its client first (:mod:`ledger.cli.resident_client`), which asks a resident server the same.
"""

from __future__ import annotations

import gc
import os
import sys
from stat import S_ISDIR, S_ISLNK, S_ISREG

# typing.TYPE_CHECKING's value, without importing typing: with re, enum and contextlib, which
# it imports, some 12 ms of a no-op re-ingest that costs 35 (the type checker reads it as True).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

    from ledger.ingest.unchanged import Known

# sqlite3 and ledger.ingest.unchanged are imported by the no-op check only (_untouched): the
# client of ``ingest --resident`` (ledger.cli.resident_client) runs before it, and never
# needs them (sqlite3 and what it imports: some 9 ms of a call that costs 30).

#: What ``agent-ledger ingest`` prints for a pass over ``files`` of which none was new or
#: grown and no line was read (``ledger.cli.ingest_report.format_summary`` prints these lines too).
FILES_LINE = "{files} files ({new} new, {grown} grown, {unchanged} unchanged), {lines} lines read"
SESSIONS_LINE = "{sessions} sessions updated, {steps} steps added"
SUFFIXES = (".jsonl", ".json")  # ledger.ingest.files.SUFFIXES
#: The price data the default fold digest was taken with (its pin in pyproject.toml).
PRICES_DIST = "genai_prices-0.2.3.dist-info"


class Unsure(Exception):
    """Something only the full command can answer for."""


def main() -> int:
    """The console script: the quick answer if there is one, a plain ingest run without
    click (:func:`ledger.cli.ingest_report.plain_ingest`), else the full command line."""
    argv = sys.argv[1:]
    if argv[:1] == ["ingest"] and "--resident" in argv:
        from ledger.cli.resident_client import resident_main

        code = resident_main(argv)
        if code is not None:
            return code
    text = noop_summary(argv)
    if text is not None:
        sys.stdout.write(text + "\n")
        return 0
    plain_args = plain_ingest_args(argv)
    if plain_args is not None:
        return plain(plain_args)
    from ledger.cli.group import cli

    return cli()  # exits itself, with the command's code


def plain(args: Plain) -> int:
    """:func:`ledger.cli.ingest_report.plain_ingest` of ``args``, imported as cheaply as
    can be: its exit code."""
    # The imports make tens of thousands of objects that live as long as the process and
    # hold no garbage: the collector ran some 30 passes over them while they were made,
    # and would walk them again in every later full pass (the imports' CPU time, 15
    # fresh processes alternated: 105 ms with it, 92 ms without).
    gc.disable()
    from ledger.cli.ingest_report import plain_ingest

    gc.freeze()
    gc.enable()
    return plain_ingest(*args)


#: The flags a plain ingest may be given (the options that fold nothing differently).
FLAGS = ("--strict", "--json", "--progress", "--no-progress")
#: A plain ingest: db_path, paths, strict, as_json, progress (None: on a terminal).
Plain = tuple[str, tuple[str, ...], bool, bool, "bool | None"]


def plain_ingest_args(argv: list[str]) -> Plain | None:
    """What ``argv`` asks if it is ``ingest DB_PATH PATHS...`` with no option but the
    :data:`FLAGS`, as click takes it; else None, and the full command line says what it says
    of it (another option, its shell completion, a path it refuses: a folder for DB_PATH, a
    file it may not read)."""
    args = [a for a in argv[1:] if a not in FLAGS]
    if argv[:1] != ["ingest"] or len(args) < 2 or any(a.startswith("-") for a in args):
        return None
    if any(name.endswith("_COMPLETE") for name in os.environ):
        return None
    if os.path.isdir(args[0]) or not all(map(_readable, args)):
        return None
    bars = [a == "--progress" for a in argv[1:] if a in ("--progress", "--no-progress")]
    return args[0], tuple(args[1:]), "--strict" in argv, "--json" in argv, (bars or [None])[-1]


def _readable(path: str) -> bool:
    """Whether click's ``Path()`` takes ``path``: one not there, or one this may read."""
    return os.access(path, os.R_OK) or not os.path.exists(path)


def noop_summary(argv: list[str]) -> str | None:
    """The summary ``agent-ledger ARGV`` prints, if it is an ingest with nothing to read that
    this can tell; else None."""
    plain = plain_ingest_args(argv)  # with --strict, exits 0 here too: nothing put aside
    if plain is None or plain[3] or plain[4]:  # --json, --progress: not here
        return None
    try:
        files = _untouched(plain[0], plain[1])
    except (Unsure, OSError, UnicodeError):
        return None
    return "\n".join((
        FILES_LINE.format(files=files, new=0, grown=0, unchanged=files, lines=0),
        SESSIONS_LINE.format(sessions=0, steps=0),
        "0 lines put aside",
    ))


def _untouched(db_path: str, given: tuple[str, ...]) -> int:
    """How many files ``given`` names, all known to ``db_path`` as read to their end and
    untouched; :class:`Unsure` (or an OS error) when not so (a SQLite error is Unsure)."""
    import sqlite3

    from ledger.db.schema_version import SCHEMA_VERSION
    from ledger.ingest import unchanged

    if not _prices_pinned() or not os.path.isfile(db_path):
        raise Unsure
    try:
        conn = sqlite3.connect(f"file:{_uri_path(db_path)}?mode=rw", uri=True, timeout=0)
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version != SCHEMA_VERSION or not conn.execute(
                "SELECT 1 FROM verdict_settings LIMIT 1"
            ).fetchone():
                raise Unsure  # migrations to apply, or verdict tables never computed
            known = unchanged.read_to_end(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise Unsure from exc
    found: set[tuple[int, int]] = set()
    for path in given:
        stat = os.lstat(path)  # one call: a link's own, or the file's (500 named: 1,000 fewer)
        if S_ISLNK(stat.st_mode):
            raise Unsure
        if S_ISDIR(stat.st_mode):
            _walk(path, known, found, unchanged)
        else:
            _check(os.path.abspath(path), stat, known, found, unchanged)
    return len(found)


def _walk(
    folder: str, known: Known, found: set[tuple[int, int]], unchanged: ModuleType
) -> None:
    """The ledger files under ``folder``, as :func:`ledger.ingest.files.discover` finds them;
    anything it would note (a link to a file, a folder named like a ledger, not a regular
    file) is :class:`Unsure`. Links to folders are not followed, as there."""
    with os.scandir(folder) as entries:
        for entry in entries:
            ledger_like = unchanged.suffix(entry.name) in SUFFIXES
            if entry.is_dir():
                if ledger_like:
                    raise Unsure
                if not entry.is_symlink():
                    _walk(entry.path, known, found, unchanged)
            elif ledger_like:
                if entry.is_symlink():
                    raise Unsure
                _check(os.path.abspath(entry.path), entry.stat(), known, found, unchanged)


def _check(
    path: str, stat: os.stat_result, known: Known, found: set[tuple[int, int]],
    unchanged: ModuleType,
) -> None:
    path.encode("utf-8")  # a name the database cannot keep: the full command notes it
    identity = (stat.st_dev, stat.st_ino)
    if not S_ISREG(stat.st_mode) or identity in found:
        raise Unsure
    if not unchanged.is_unchanged(known, path, stat, unchanged.DEFAULT_FOLD_DIGEST):
        raise Unsure
    found.add(identity)


def _prices_pinned() -> bool:
    """Whether the price data installed is the one :data:`DEFAULT_FOLD_DIGEST` was taken
    with (another version folds to another digest: every source is then read again)."""
    return any(os.path.isdir(os.path.join(entry, PRICES_DIST)) for entry in sys.path if entry)


def _uri_path(path: str) -> str:
    """``path`` as the path of a ``file:`` URI (which opens without making the file)."""
    if not any(c in path for c in "?#%"):
        return path
    from urllib.parse import quote  # only here: characters a URI must have escaped

    return quote(os.path.abspath(path))
