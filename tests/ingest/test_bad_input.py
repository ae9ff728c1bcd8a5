"""Bad input, all of it: every hostile line is accepted with a documented normalisation or put
aside in ingest_errors with its file, line, byte offset, a precise reason and its raw text,
and the good lines around it are always ingested.

Two corpora: ``tests/fixtures/hostile/`` (ledger files written to break a reader: one file per
kind of trouble, a good line before and after the bad ones), and JSONTestSuite's parsing and
transform files (``tests/fixtures/jsontestsuite/``, MIT licence), each fed as a ledger line
between two good lines and as a file of its own. Huge inputs are generated here.

Then files that cannot be read at all (a FIFO, a device, a link loop, a file the kernel will
not open, a UTF-16 ledger): each is skipped or refused with a note naming it and why, and
every other file is ingested; and ids too long to store are cut, with a note.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import socket
import threading
import tracemalloc
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.core.ids import ID_MAX, bounded
from ledger.ingest.files import Listed
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import FIXTURES, dump, refuse_to_open, rows

HOSTILE = FIXTURES / "hostile"
JSONTESTSUITE = FIXTURES / "jsontestsuite"

TOO_LARGE = "is too large"
INVALID_JSON = "invalid JSON: "

#: file: (events kept from it, [(line, reason)] put aside, in file order)
EXPECTED: dict[str, tuple[int, list[tuple[int | None, str]]]] = {
    "invalid-utf8.jsonl": (2, [
        (2, "invalid UTF-8 at byte 59"),  # latin-1 é
        (3, "invalid UTF-8 at byte 56"),  # a surrogate encoded in UTF-8
    ]),
    "bom.jsonl": (2, []),  # a BOM at the start of a line is dropped
    "crlf.jsonl": (2, []),  # CRLF endings are read as LF
    "blank-lines.jsonl": (2, []),  # skipped and counted in sources.blank_lines
    "nul-bytes.jsonl": (3, [
        (2, INVALID_JSON + "Invalid control character (column 55)"),  # raw NUL in a string
        (3, INVALID_JSON + "Extra data (column 42)"),  # raw NUL after the object
    ]),  # an escaped \u0000 is a character like any other: kept
    "nul-first-line.jsonl": (2, [(1, INVALID_JSON + "Expecting value (column 1)")]),
    "lone-surrogates.jsonl": (3, [
        (2, "lone surrogate in a string (not valid Unicode)"),
        (3, "lone surrogate in a string (not valid Unicode)"),
    ]),  # an escaped surrogate pair is one character: kept
    "big-numbers.jsonl": (3, [
        (2, f"field 'output_tokens' {TOO_LARGE} (99999999999999999999)"),
        (3, "field 'output_tokens' must be a whole number, got number"),  # 1e30
        (4, f"field 'tool_calls' {TOO_LARGE} (9223372036854775808)"),
        (5, "field 'elapsed_s' is out of range (not a finite number)"),  # 1e400
        (6, "field 'elapsed_s' is out of range (not a finite number)"),  # 400 digits
        (7, INVALID_JSON + "a number has too many digits"),  # 5000 digits
    ]),  # a huge number in a field nobody reads is ignored
    "nan-infinity.jsonl": (2, [
        (2, "NaN is not valid JSON"),
        (3, "Infinity is not valid JSON"),
        (4, "-Infinity is not valid JSON"),
    ]),
    "not-an-object.jsonl": (2, [
        (2, "expected a JSON object, got array"),
        (3, "expected a JSON object, got string"),
        (4, "expected a JSON object, got number"),
        (5, "expected a JSON object, got null"),
        (6, "expected a JSON object, got boolean"),
        (7, "expected a JSON object, got array"),
    ]),
    "wrong-types.jsonl": (2, [
        (2, "field 'output_tokens' must be a whole number, got string"),
        (3, "field 'tool_error' must be true or false, got string"),
        (4, "field 'detail' must be a string, got number"),
        (5, "field 'ts' must be a string, got number"),
        (6, "field 'ts' is not an ISO-8601 timestamp: 'yesterday'"),
        (7, "field 'tool_calls' must be a whole number, got string"),
        (8, "field 'observation' must be a string, got array"),
        (9, "field 'tool' must be a string, got object"),
    ]),
    "gate-wrong-types.jsonl": (2, [
        (2, "field 'step' must be a whole number, got string"),
        (3, "field 'step' must be a whole number, got number"),
        (4, "field 'step' must be 1 or more"),
        (5, "field 'step' must be a whole number, got boolean"),
        (6, "missing field 'step'"),
        (7, "missing field 'action'"),
        (8, "unknown action 'deploy' (expected one of think, read, write, retry)"),
        (9, "field 'elapsed_s' must be a number of seconds, got string"),
        (10, "field 'writes' must not be negative, got -1"),
    ]),
    "negative-counters.jsonl": (2, [
        (2, "field 'output_tokens' must not be negative, got -1"),
        (3, "field 'tool_calls' must not be negative, got -2"),
        (4, "field 'elapsed_s' must not be negative, got -3.5"),
    ]),
    "unknown-values.jsonl": (3, [
        (2, "unknown action 'deploy' (expected one of think, read, write, retry)"),
        (3, "unknown type 'turn' (expected one of start, round, action, end)"),
        (4, "unknown outcome 'done' (expected a stop reason)"),
    ]),  # an unknown field is ignored; an unknown vendor stop string is a stop (unknown_vendor)
    "missing-fields.jsonl": (2, [
        (2, "field 'session' must be a non-empty string"),
        (3, "field 'session' must be a non-empty string"),
        (4, "unknown type None (expected one of start, round, action, end)"),
        (5, "missing field 'action'"),
    ]),
    "duplicate-keys.jsonl": (4, []),  # the last value of a repeated key wins
    "invalid-json.jsonl": (2, [
        (2, INVALID_JSON + "Expecting ',' delimiter (column 44)"),
        (3, INVALID_JSON + "Expecting property name enclosed in double quotes (column 45)"),
        (4, INVALID_JSON + "Expecting property name enclosed in double quotes (column 2)"),
        (5, INVALID_JSON + "Invalid \\escape (column 57)"),
        (6, INVALID_JSON + "Invalid control character (column 60)"),
        (7, INVALID_JSON + "Extra data (column 46)"),
        (8, INVALID_JSON + "Extra data (column 45)"),
    ]),
    "trace-invalid.json": (0, [
        (1, "not a ledger: invalid JSON: Expecting ',' delimiter (line 5 column 5)"),
    ]),
    "trace-not-a-trace.json": (0, [(1, "cannot tell the dialect of this JSON document")]),
    "trace-bad-rounds.json": (2, [
        (None, "rounds[1]: expected a JSON object, got string"),
        (None, "rounds[2]: field 'tool_calls' must be an array, got string"),
        (None, "rounds[3]: field 'output_tokens' out of range (-5)"),
        (None, "rounds[4]: field 'output_tokens' must be a number, got string"),
        (None, "rounds[5]: field 'observation' must be a string, got object"),
    ]),  # "25" as output_tokens is 25, as seed 000's int() reads it
    "binary.jsonl": (0, [(1, "binary file")]),  # gzip data
    "unknown-dialect.jsonl": (0, [
        (1, "cannot tell the dialect: no line in the first 50 is a trace, a gate ledger "
            "line, a native event or an agent log (Claude Code, Codex, Langfuse)"),
    ]),
    "partial-last-line.jsonl": (1, []),  # the last line is still being written: left for later
    "empty.jsonl": (0, []),  # nothing to read yet
    "only-blank-lines.jsonl": (0, []),
}


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("hostile") / "ledger.db"
    summary = ingest(db, [HOSTILE])
    assert [w["path"] for w in summary.waiting] == [str(HOSTILE / n) for n in (
        "empty.jsonl", "only-blank-lines.jsonl", "partial-last-line.jsonl")]
    return db


def test_every_hostile_file_has_an_expectation() -> None:
    assert sorted(p.name for p in HOSTILE.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_hostile_file(hostile_db: Path, name: str) -> None:
    events, errors = EXPECTED[name]
    path = str(HOSTILE / name)
    got = rows(hostile_db, "select line, offset, reason, raw from ingest_errors where path = ? "
                           "order by id", [path])
    assert [(e["line"], e["reason"]) for e in got] == errors
    kept = rows(hostile_db, "select sum(events) as n from sessions where source_path = ?", [path])
    assert (kept[0]["n"] or 0) == events
    data = (HOSTILE / name).read_bytes()
    starts = [0] + [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    for error in got:
        if error["line"] is not None:  # the offset is where that line starts in the file
            assert error["offset"] == starts[error["line"] - 1]
        assert "\x00" not in error["raw"]
        if error["offset"] is not None and data[error["offset"]:][:1] not in (b"\x00", b"\x1f"):
            assert error["raw"][:10] in data[error["offset"]:].decode("utf-8", "replace")


def test_normalisations(hostile_db: Path) -> None:
    def session(sid: str) -> dict:
        return rows(hostile_db, "select * from sessions where session_id = ?", [sid])[0]

    assert session("duplicate-keys")["output_tokens"] == 7 + 1
    blank = rows(hostile_db, "select blank_lines from sources where path like '%blank-lines%'")
    assert blank == [{"blank_lines": 5}]
    details = {r["detail"] for r in rows(hostile_db, "select detail from steps")}
    assert {"escaped \x00 is text", "\U0001f600 a pair is fine"} <= details
    assert session("big-numbers")["events"] == 3
    assert session("unknown-values")["stop_reason"] == "unknown_vendor"


def native_file(path: Path, middle: bytes, session: str = "s") -> bytes:
    """A native ledger: a good line, ``middle``, a good line; returns its bytes."""
    start = json.dumps({"session": session, "type": "start"}).encode()
    end = json.dumps({"session": session, "type": "round", "output_tokens": 3}).encode()
    data = start + b"\n" + middle + b"\n" + end + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


@pytest.mark.parametrize(
    ("middle", "reason"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
        (b'{"session": "s", "type": "round", "x": ' + b"[" * 100_000, "JSON nested too deeply"),
        # deep but parseable, with a surrogate to check: the check must not overflow either
        (b"[" * 900 + b'"\\ud800"' + b"]" * 900, None),
        (b'{"session": "s", "type": "round", "x": ' + b"[" * 200 + b"]" * 200 + b"}", ""),
    ],
    ids=["100k-arrays", "100k-unclosed-in-a-field", "900-arrays-surrogate", "200-in-a-field"],
)
def test_deep_nesting(tmp_path: Path, middle: bytes, reason: str | None) -> None:
    ledger = tmp_path / "runs" / "deep.jsonl"
    native_file(ledger, middle)
    summary = ingest(tmp_path / "l.db", [ledger])
    got = [e["reason"] for e in rows(tmp_path / "l.db", "select reason from ingest_errors")]
    if reason == "":  # accepted: an unknown field may hold anything
        assert (summary.steps, got) == (3, [])
        return
    assert summary.steps == 2 and len(got) == 1
    if reason is None:  # too deep for the surrogate walk, or a lone surrogate: either way aside
        assert got[0] in ("JSON nested too deeply", "lone surrogate in a string (not valid "
                          "Unicode)")
    else:
        assert got == [reason]


def test_a_line_of_tens_of_megabytes_is_put_aside_in_bounded_memory(tmp_path: Path) -> None:
    ledger = tmp_path / "runs" / "huge.jsonl"
    middle = b'{"session": "s", "type": "round", "detail": "' + b"x" * (40 << 20) + b'"}'
    data = native_file(ledger, middle)
    tracemalloc.start()
    try:
        summary = ingest(tmp_path / "l.db", [ledger])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20  # the default limit is 8 MiB; the line is 40 MiB
    assert (summary.steps, summary.errors) == (2, 1)
    (error,) = rows(tmp_path / "l.db", "select * from ingest_errors")
    assert (error["line"], error["offset"]) == (2, data.index(b"\n") + 1)
    assert error["reason"] == (
        f"line is {len(middle)} bytes, longer than the limit of {8 << 20} (--max-line-bytes)")
    # Its first 2000 bytes, less the token the cut went through (it could be half a secret).
    assert error["raw"] == '{"session": "s", "type": "round", "detail": "…'


def test_the_line_limit_is_configurable(tmp_path: Path) -> None:
    ledger = tmp_path / "runs" / "l.jsonl"
    native_file(ledger, json.dumps({"session": "s", "type": "round", "detail": "y" * 5000})
                .encode())
    small = ingest(tmp_path / "small.db", [ledger], Options(max_line=4096))
    large = ingest(tmp_path / "large.db", [ledger], Options(max_line=8192))
    assert (small.steps, small.errors, large.steps, large.errors) == (2, 1, 3, 0)


# --- JSONTestSuite -----------------------------------------------------------------------------

CORPUS = sorted(JSONTESTSUITE.glob("test_*/*.json"))
#: Files that are not a record, and not a document cut short either: blank, or one JSON
#: document that ends in the middle of a value, which is waited for (a trace being written).
WAITING_ALONE = {
    "n_single_space", "n_structure_no_data", "n_structure_UTF8_BOM_no_data",  # blank
    "n_array_newlines_unclosed", "n_array_unclosed_with_new_lines",
    "n_structure_lone-open-bracket", "n_structure_open_object",
}
PARSER_REASONS = (INVALID_JSON, "invalid UTF-8 at byte", "NaN is not", "Infinity is not",
                  "-Infinity is not", "lone surrogate", "JSON nested too deeply")
SHAPE_REASONS = ("expected a JSON object, got ", "field 'session' must be a non-empty string")


def corpus_name(path: Path) -> str:
    return f"{path.parent.name}-{path.stem}"


@dataclass
class Outcome:
    """What one ingest of the whole corpus stored, by file path and by session."""

    errors: dict[str, list[dict]]
    events: dict[str, int]
    sources: set[str]
    sessions_by_path: dict[str, int]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, Path]:
    root = tmp_path_factory.mktemp("jsontestsuite")
    for path in CORPUS:
        name = corpus_name(path)
        native_file(root / "embedded" / f"{name}.jsonl", path.read_bytes(), session=name)
        (root / "alone").mkdir(exist_ok=True)
        (root / "alone" / f"{name}.jsonl").write_bytes(path.read_bytes() + b"\n")
    db = root / "ledger.db"
    ingest(db, [root / "embedded", root / "alone"])
    errors: dict[str, list[dict]] = defaultdict(list)
    for error in rows(db, "select * from ingest_errors order by path, offset, line"):
        errors[error["path"]].append(error)
    sessions = rows(db, "select session_id, source_path, events from sessions")
    return Outcome(
        errors=errors,
        events={s["session_id"]: s["events"] for s in sessions},
        sources={s["path"] for s in rows(db, "select path from sources")},
        sessions_by_path=Counter(s["source_path"] for s in sessions),
    ), root


def expected_reason(line: bytes) -> str | None:
    """What the stdlib says of one line: None (blank) or the reason it must be put aside for,
    or a prefix of it (a JSON syntax error: the parser's message and column follow)."""
    line = line.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r")
    if not line.strip():
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start}"
    constants: list[str] = []
    try:
        value = json.loads(text, parse_constant=constants.append)
    except RecursionError:
        return "JSON nested too deeply"
    except ValueError:
        return INVALID_JSON
    if constants:
        return f"{constants[0]} is not valid JSON"
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogate in a string (not valid Unicode)"
    if not isinstance(value, dict):
        return SHAPE_REASONS[0]
    return SHAPE_REASONS[1]


@pytest.mark.parametrize("path", CORPUS, ids=corpus_name)
def test_jsontestsuite_file_as_a_ledger_line(corpus: tuple[Outcome, Path], path: Path) -> None:
    outcome, root = corpus
    name = corpus_name(path)
    assert outcome.events[name] == 2  # the good lines on both sides
    got = outcome.errors[str(root / "embedded" / f"{name}.jsonl")]
    lines = path.read_bytes().split(b"\n")
    expected = [(n, r) for n, r in enumerate(map(expected_reason, lines), 2) if r is not None]
    assert [e["line"] for e in got] == [n for n, _ in expected]
    for error, (_, reason) in zip(got, expected, strict=True):
        assert error["reason"].startswith(reason)
    if len(lines) == 1 and got:  # the suite's verdict, for one-line files
        verdict = path.name[:2]
        if verdict == "y_":  # valid JSON is parsed: only its shape is refused
            assert got[0]["reason"].startswith(SHAPE_REASONS)
        elif verdict == "n_":  # invalid JSON is refused by the parser
            assert got[0]["reason"].startswith(PARSER_REASONS)


@pytest.mark.parametrize("path", CORPUS, ids=corpus_name)
def test_jsontestsuite_file_on_its_own(corpus: tuple[Outcome, Path], path: Path) -> None:
    outcome, root = corpus
    alone = str(root / "alone" / f"{corpus_name(path)}.jsonl")
    got = outcome.errors[alone]
    assert outcome.sessions_by_path[alone] == 0
    if path.stem in WAITING_ALONE:  # not read, nothing recorded: left for later
        assert (got, alone in outcome.sources) == ([], False)
        return
    (error,) = got
    assert (error["line"], error["offset"]) == (1, 0)
    if path.read_bytes().startswith(codecs.BOM_UTF16_LE):  # i_string_UTF-16LE_with_BOM
        assert error["reason"].startswith("UTF-16 LE with a byte order mark, not UTF-8")
    elif path.name.startswith("y_"):
        assert error["reason"].startswith("cannot tell the dialect")
    else:
        assert error["reason"].startswith(("not a ledger: ", "binary file",
                                           "cannot tell the dialect"))


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"task": "t", "rounds": [{"observation": "y" * 5000}]}, indent=2),
        json.dumps({"task": "t", "rounds": [{"observation": "y"}]}) + "\n" + " " * 5000 + "\n",
    ],
    ids=["pretty", "one-line-then-padding"],
)
def test_a_trace_longer_than_the_limit_is_put_aside_unread(tmp_path: Path, text: str) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(text)
    summary = ingest(tmp_path / "l.db", [trace], Options(max_line=4096))
    assert (summary.steps, summary.errors) == (0, 1)
    (error,) = rows(tmp_path / "l.db", "select * from ingest_errors")
    assert error["reason"] == (
        f"too large to read as one JSON document ({len(text)} bytes; the limit is 4096, "
        "--max-line-bytes)")


# -- files that cannot be read: each skipped with a note, every other file ingested ------------


def native_line(session: str, kind: str = "round", **fields: object) -> str:
    return json.dumps({"session": session, "type": kind, **fields}) + "\n"


def make_fifo(path: Path, _monkeypatch: pytest.MonkeyPatch) -> None:
    os.mkfifo(path)


def make_socket(path: Path, _monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))


def link_to(target: str) -> Callable[[Path, pytest.MonkeyPatch], None]:
    return lambda path, _monkeypatch: path.symlink_to(target)


def make_link_loop(path: Path, _monkeypatch: pytest.MonkeyPatch) -> None:
    back = path.with_name("back")  # not named like a ledger: only the loop's ledger end is found
    path.symlink_to(back)
    back.symlink_to(path)


def make_folder_link(path: Path, _monkeypatch: pytest.MonkeyPatch) -> None:
    (path.parent.parent / "elsewhere").mkdir()
    (path.parent.parent / "elsewhere" / "in.jsonl").write_text(native_line("elsewhere"))
    path.symlink_to("../elsewhere", target_is_directory=True)


def make_unreadable(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path.write_text(native_line("unreadable"))
    refuse_to_open(monkeypatch, path)


#: kind: (how to make ``bad.jsonl`` in a folder of good ledgers, the reason in its note)
BAD_FILES: dict[str, tuple[Callable[[Path, pytest.MonkeyPatch], None], str]] = {
    "fifo": (make_fifo, "a named pipe (FIFO), not a regular file"),
    "socket": (make_socket, "a socket, not a regular file"),
    "device": (link_to("/dev/zero"),
               "a character device, not a regular file (a link to /dev/zero)"),
    "null-device": (link_to("/dev/null"),
                    "a character device, not a regular file (a link to /dev/null)"),
    "link-loop": (make_link_loop, "a loop of symbolic links"),
    "dangling-link": (link_to("nowhere.jsonl"), "a link to nowhere.jsonl, which does not exist"),
    "link-to-a-folder": (make_folder_link, "a link to the folder ../elsewhere (links to folders "
                                           "under a folder are not followed)"),
    "unreadable": (make_unreadable, "could not be read (Permission denied)"),
    # A real read that fails: a regular file by stat, whose first read is an I/O error.
    "read-fails": (link_to("/proc/self/mem"), "could not be read (Input/output error)"),
}
#: Kinds that are something else when named on the command line: a path to nothing is an
#: error (a typo, told before any database is made), a link to a folder is searched.
FOUND_ONLY = {"dangling-link", "link-to-a-folder"}


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``, failing the test if it takes longer than ``seconds`` (it would block on a
    FIFO opened to read, waiting for a writer that never comes)."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s: blocked"
    (value,) = result
    return value


def sessions_of(db: Path) -> set[str]:
    return {r["session_id"] for r in rows(db, "select session_id from sessions")}


@pytest.mark.parametrize(
    ("kind", "given"),
    [(kind, "folder") for kind in sorted(BAD_FILES)]
    + [(kind, "files") for kind in sorted(BAD_FILES) if kind not in FOUND_ONLY],
)
def test_a_file_that_cannot_be_read_is_skipped_with_a_note_and_the_others_are_ingested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, given: str
) -> None:
    if kind == "read-fails" and not Path("/proc/self/mem").exists():
        pytest.skip("needs Linux's /proc")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "a.jsonl").write_text(native_line("a"))
    (runs / "z.jsonl").write_text(native_line("z"))
    bad = runs / "bad.jsonl"
    make, reason = BAD_FILES[kind]
    make(bad, monkeypatch)
    paths = [runs] if given == "folder" else [runs / "a.jsonl", bad, runs / "z.jsonl"]
    db = tmp_path / "l.db"
    summary = within(20, lambda: ingest(db, paths))
    assert summary.skipped == {str(bad): reason}
    assert summary.notices == [f"{bad}: {reason}; skipped"]
    assert summary.to_dict()["skipped"] == [{"path": str(bad), "reason": reason}]
    assert sessions_of(db) == {"a", "z"}
    assert rows(db, "select * from ingest_errors") == []


def test_a_path_named_that_does_not_exist_is_still_an_error(tmp_path: Path) -> None:
    from ledger.ingest.files import LedgerPathError

    (tmp_path / "gone.jsonl").symlink_to("nowhere.jsonl")
    for path, message in [
        (tmp_path / "typo.jsonl", "no such file or folder"),
        (tmp_path / "gone.jsonl",
         "no such file or folder (a link to nowhere.jsonl, which does not exist)"),
    ]:
        with pytest.raises(LedgerPathError, match=re.escape(f"{path}: {message}")):
            ingest(tmp_path / "l.db", [path])
    assert not (tmp_path / "l.db").exists()


def test_a_folder_named_like_a_ledger_file_is_searched_with_a_note(tmp_path: Path) -> None:
    """Nothing is lost, so nothing is skipped: its ledgers are read like any folder's."""
    odd = tmp_path / "runs" / "odd.jsonl"
    odd.mkdir(parents=True)
    (odd / "inner.jsonl").write_text(native_line("inner"))
    (tmp_path / "runs" / "a.jsonl").write_text(native_line("a"))
    summary = ingest(tmp_path / "l.db", [tmp_path / "runs"])
    assert summary.notices == [f"{odd}: a folder named like a ledger file: searched as a folder"]
    assert summary.skipped == {}
    assert sessions_of(tmp_path / "l.db") == {"a", "inner"}


def test_a_file_that_becomes_a_fifo_after_it_was_listed_is_skipped_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The type is checked once open (without blocking) too, not only when the folder is
    listed: a FIFO put in a ledger's place in between is refused, not waited on."""
    from ledger.ingest import ingester

    good, swapped = tmp_path / "good.jsonl", tmp_path / "swapped.jsonl"
    good.write_text(native_line("good"))
    swapped.write_text(native_line("swapped"))
    listing = ingester.listing

    def listed_then_swapped(*args: Any) -> list[Listed]:
        found = listing(*args)
        swapped.unlink()
        os.mkfifo(swapped)
        return found

    monkeypatch.setattr(ingester, "listing", listed_then_swapped)
    summary = within(20, lambda: ingest(tmp_path / "l.db", [tmp_path]))
    assert summary.skipped == {str(swapped): "a named pipe (FIFO), not a regular file"}
    assert sessions_of(tmp_path / "l.db") == {"good"}


# -- UTF-16 and UTF-32: refused with the encoding named ---------------------------------------


@pytest.mark.parametrize(
    ("codec", "bom", "name", "family"),
    [
        ("utf-16-le", codecs.BOM_UTF16_LE, "UTF-16 LE", "UTF-16"),
        ("utf-16-be", codecs.BOM_UTF16_BE, "UTF-16 BE", "UTF-16"),
        ("utf-32-le", codecs.BOM_UTF32_LE, "UTF-32 LE", "UTF-32"),
        ("utf-32-be", codecs.BOM_UTF32_BE, "UTF-32 BE", "UTF-32"),
    ],
)
@pytest.mark.parametrize("dialect", [None, "native"], ids=["sniffed", "forced"])
def test_a_utf16_or_utf32_ledger_is_refused_with_its_encoding_named(
    tmp_path: Path, codec: str, bom: bytes, name: str, family: str, dialect: str | None
) -> None:
    """Read as UTF-8 it would be a binary file; it is one error naming its encoding and the
    command that converts it, and once converted it is read like any ledger."""
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "good.jsonl").write_text(native_line("good"))
    wide = runs / "wide.jsonl"
    text = native_line("w", "start") + native_line("w")
    wide.write_bytes(bom + text.encode(codec))
    db = tmp_path / "l.db"
    summary = ingest(db, [runs], Options(dialect=dialect))
    assert summary.errors == 1
    assert rows(db, "select path, line, reason from ingest_errors") == [{
        "path": str(wide), "line": 1,
        "reason": f"{name} with a byte order mark, not UTF-8: convert it first, "
                  f"e.g. iconv -f {family} -t UTF-8",
    }]
    assert sessions_of(db) == {"good"}
    # iconv -f UTF-16 (or UTF-32) reads the byte order from the mark, as Python's codec does
    wide.write_bytes(wide.read_bytes().decode(family.lower()).encode("utf-8"))
    ingest(db, [runs], Options(dialect=dialect))
    assert rows(db, "select * from ingest_errors") == []
    assert sessions_of(db) == {"good", "w"}


# -- ids and task classes: cut to ID_MAX characters with a hash, and a note -------------------


def test_a_megabyte_session_id_is_cut_with_a_hash_and_a_note(tmp_path: Path) -> None:
    """A 1 MiB session id made a database of 22.8 MB for 3 events (every step row repeats the
    id); cut, two ids that share their head stay two sessions, and a line appended later
    goes on with the same session."""
    huge = "x" * (1 << 20)
    ledger = tmp_path / "runs" / "long.jsonl"
    ledger.parent.mkdir()
    ledger.write_text(native_line(huge, "start") + native_line(huge) + native_line(huge + "y")
                      + native_line(huge, "end"))
    db = tmp_path / "l.db"
    summary = ingest(db, [ledger])
    cut = {sid: bounded(sid) for sid in (huge, huge + "y")}
    assert sessions_of(db) == set(cut.values())
    assert {len(sid) for sid in cut.values()} == {ID_MAX}
    assert summary.notices == [
        f"{ledger}:{line}: a session id of {len(sid)} characters, cut to {ID_MAX}: its head "
        f"and a hash of the whole ('{cut[sid][-17:]}')"
        for line, sid in [(1, huge), (3, huge + "y")]
    ]
    assert cut[huge].startswith("x" * 200) and cut[huge][-17] == "…"
    short = tmp_path / "short.jsonl"
    short.write_text(ledger.read_text().replace(huge, "x"))
    ingest(tmp_path / "short.db", [short])
    assert db.stat().st_size <= (tmp_path / "short.db").stat().st_size + 64 * 1024  # not 28 MB

    with ledger.open("a") as f:
        f.write(native_line(huge, "round"))
    again = ingest(db, [ledger])
    assert again.notices == []  # told once, when the session was made
    events = {r["session_id"]: r["events"] for r in rows(db, "select * from sessions")}
    assert events == {cut[huge]: 4, cut[huge + "y"]: 1}


def test_a_long_task_class_is_cut_with_a_note(tmp_path: Path) -> None:
    long_class = "c" * 1000
    ledger = tmp_path / "native.jsonl"
    ledger.write_text(native_line("s", "start", task_class=long_class) + native_line("s"))
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"task": "t", "task_class": long_class, "rounds": [{}]}))
    summary = ingest(tmp_path / "l.db", [ledger, trace])
    assert {r["task_class"] for r in rows(tmp_path / "l.db", "select * from sessions")} == {
        bounded(long_class)}
    tail = bounded(long_class)[-17:]
    assert summary.notices == [
        f"{ledger}:1: a task class of 1000 characters, cut to {ID_MAX}: its head and a hash "
        f"of the whole ('{tail}')",
        f"{trace}: a task class of 1000 characters, cut to {ID_MAX}: its head and a hash "
        f"of the whole ('{tail}')",
    ]


def test_ids_are_cut_the_same_by_worker_processes(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    for n in range(3):
        (runs / f"{n}.jsonl").write_text(
            "".join(native_line(f"{n}" + "y" * 5000) for _ in range(200)))
    summaries = {
        jobs: ingest(tmp_path / f"{jobs}.db", [runs], Options(jobs=jobs, parallel_min_bytes=0))
        for jobs in (0, 2)
    }
    assert summaries[2].workers == 2
    assert summaries[0].notices == summaries[2].notices
    assert len(summaries[0].notices) == 3
    assert dump(tmp_path / "0.db") == dump(tmp_path / "2.db")
