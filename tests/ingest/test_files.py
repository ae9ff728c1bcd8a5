"""Reading ledger files: bounded batches of complete lines, whatever the bytes."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.ingest import files
from ledger.ingest.files import RAW_KEEP, Line, read_lines


def one_line_at_a_time(
    f: BinaryIO, start: int, count: int, max_line: int, max_bytes: int
) -> tuple[list[Line], int]:
    """The reference: ``readline`` per line (read_lines before it read blocks), stepping over
    the newline of a last line read without one, and reading a last line that is a whole
    JSON object."""
    if start:
        f.seek(start - 1)
        before = f.read(3)
        if before[:1] != b"\n":
            start += 2 if before[1:3] == b"\r\n" else 1 if before[1:2] == b"\n" else 0
    f.seek(start)
    pos, out = start, []
    while len(out) < count and pos - start < max_bytes:
        chunk = f.readline(max_line + 1)
        if chunk.endswith(b"\n"):
            out.append(Line(pos, chunk[:-1]))
            pos += len(chunk)
            continue
        if len(chunk) <= max_line:
            if whole_object(chunk):
                out.append(Line(pos, chunk))
                pos += len(chunk)
            break
        head, length = chunk[:RAW_KEEP], len(chunk)
        while True:
            more = f.readline(1 << 20)
            if not more:
                return out, pos
            length += len(more)
            if more.endswith(b"\n"):
                break
        out.append(Line(pos, head, oversize=length - 1))
        pos += length
    return out, pos


def whole_object(chunk: bytes) -> bool:
    try:
        return isinstance(json.loads(chunk.rstrip(b"\r")), dict) and chunk.startswith(b"{")
    except ValueError:
        return False


LINE = st.one_of(
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
    st.sampled_from([b'{"a": 1}', b'{"a": [1, {"b": 2}]}\r', b'{"a": 1', b"{}", b"[1]", b"7"]),
    st.integers(0, 300).map(lambda n: b"x" * n),  # around the small limits below
    st.just(b""),
)


@settings(max_examples=400, deadline=None)
@given(
    lines=st.lists(LINE, max_size=30),
    ends_with_newline=st.booleans(),
    block=st.sampled_from([8, 64, 1 << 20]),
    max_line=st.sampled_from([5, 64, 100, 4096]),
    count=st.integers(1, 40),
    max_bytes=st.sampled_from([10, 500, 1 << 25]),
    data=st.data(),
)
def test_reading_in_blocks_gives_exactly_what_reading_line_by_line_gives(
    lines: list[bytes], ends_with_newline: bool, block: int, max_line: int, count: int,
    max_bytes: int, data: st.DataObject,
) -> None:
    text = b"\n".join(lines) + (b"\n" if ends_with_newline and lines else b"")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files, "BLOCK", block)
        check_every_batch(text, count, max_line, max_bytes, data)


def check_every_batch(
    text: bytes, count: int, max_line: int, max_bytes: int, data: st.DataObject
) -> None:
    start = 0
    while True:  # batch after batch, as ingest reads a file
        got = read_lines(io.BytesIO(text), start, count, max_line, max_bytes)
        want = one_line_at_a_time(io.BytesIO(text), start, count, max_line, max_bytes)
        assert got == want
        if not got[0]:
            break
        start = got[1]
    # and from any offset the caller may hold
    offset = data.draw(st.integers(0, len(text)))
    assert read_lines(io.BytesIO(text), offset, count, max_line, max_bytes) == \
        one_line_at_a_time(io.BytesIO(text), offset, count, max_line, max_bytes)


@pytest.mark.parametrize("block", [16, 1 << 20])
def test_an_unfinished_last_line_is_left_for_later(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "BLOCK", block)
    lines, end = read_lines(io.BytesIO(b'{"a": 1}\n{"b": 2}\n{"c"'), 0, 100)
    assert [(line.offset, line.raw) for line in lines] == [(0, b'{"a": 1}'), (9, b'{"b": 2}')]
    assert end == 18


@pytest.mark.parametrize("block", [16, 1 << 20])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_a_finished_last_line_without_its_newline_is_read_and_its_newline_stepped_over_later(
    block: int, newline: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "BLOCK", block)
    text = b'{"a": 1}\n{"b": {"c": [2]}}'
    lines, end = read_lines(io.BytesIO(text), 0, 100)
    assert [(line.offset, line.raw) for line in lines] == [(0, b'{"a": 1}'), (9, text[9:])]
    assert end == len(text)
    grown = text + newline + b'{"d": 3}\n'  # the writer goes on: the next line is what is new
    lines, end = read_lines(io.BytesIO(grown), end, 100)
    assert [(line.offset, line.raw) for line in lines] == [(len(text + newline), b'{"d": 3}')]
    assert end == len(grown)
    assert read_lines(io.BytesIO(grown), 0, 100)[0][1:] == [
        Line(9, text[9:] + newline[:-1]), Line(len(text + newline), b'{"d": 3}')]


def test_a_line_over_the_limit_is_kept_as_its_head_with_its_length() -> None:
    text = b"ok\n" + b"y" * 5000 + b"\nok\n"
    lines, end = read_lines(io.BytesIO(text), 0, 100, max_line=4096)
    assert [(line.offset, len(line.raw), line.oversize) for line in lines] == [
        (0, 2, 0), (3, RAW_KEEP, 5000), (5004, 2, 0)]
    assert end == len(text)


@pytest.mark.parametrize(
    ("name", "storable", "shown"),
    [
        (b"run.jsonl", True, "run.jsonl"),
        ("été.jsonl".encode(), True, "été.jsonl"),
        (b"run-\xff.jsonl", False, "run-\\xff.jsonl"),  # Latin-1, say: not UTF-8
    ],
)
def test_a_path_the_database_cannot_keep_is_told_apart_and_shown_escaped(
    name: bytes, storable: bool, shown: str
) -> None:
    path = Path(os.fsdecode(b"/logs/" + name))  # as os.listdir and Path.rglob give it
    assert files.storable(path) is storable
    assert files.shown(path) == "/logs/" + shown


def test_the_files_found_in_a_folder_are_the_regular_files_rglob_finds(tmp_path: Path) -> None:
    """Folders recursively, files named ``*.jsonl`` or ``*.json``, links to files followed
    (one file however many names it has), links to folders not; sorted; absolute."""
    (tmp_path / "runs" / "deep" / "deeper").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    for name in ("b.jsonl", "a.json", "notes.txt", ".jsonl", "deep/c.jsonl",
                 "deep/deeper/d.json"):
        (tmp_path / "runs" / name).write_text("{}\n")
    (tmp_path / "other" / "e.jsonl").write_text("{}\n")
    (tmp_path / "runs" / "linked.jsonl").symlink_to(tmp_path / "other" / "e.jsonl")
    (tmp_path / "runs" / "again.jsonl").symlink_to("b.jsonl")  # a second name for b.jsonl
    (tmp_path / "runs" / "to-other").symlink_to(tmp_path / "other", target_is_directory=True)
    skipped: list[tuple[Path, str]] = []
    found = files.discover([tmp_path / "runs"], skip=lambda p, r: skipped.append((p, r)))
    assert found == [
        tmp_path / "runs" / name
        for name in ("a.json", "again.jsonl", "deep/c.jsonl", "deep/deeper/d.json",
                     "linked.jsonl")
    ]
    listed = sorted(p for p in (tmp_path / "runs").rglob("*")
                    if p.suffix in files.SUFFIXES and p.is_file())
    assert [p.resolve() for p in listed if p.name != "b.jsonl"] == [
        p.resolve() for p in found]
    assert skipped == []


@pytest.mark.parametrize("given", ["runs", "./runs", "runs/", "runs/../runs", "{tmp}//runs",
                                   "{tmp}/runs/"])
def test_a_folder_named_any_way_gives_the_absolute_normal_names_its_absolute_path_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """Names under a folder named by its absolute, normal path are not made absolute again:
    named any other way (relative, ``.`` and ``..``, doubled or trailing slashes), the folder
    gives the same names, each absolute and normal."""
    (tmp_path / "runs" / "deep").mkdir(parents=True)
    for name in ("a.jsonl", "deep/b.json"):
        (tmp_path / "runs" / name).write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    named = [name for name, _ in files.listing([given.format(tmp=tmp_path)])]
    assert named == [str(tmp_path / "runs" / "a.jsonl"), str(tmp_path / "runs" / "deep" / "b.json")]
    assert named == [os.path.abspath(name) for name in named]


def _add_file(top: Path) -> None:
    (top / "a" / "new.jsonl").write_text("{}\n")


def _add_folder(top: Path) -> None:
    (top / "a" / "fresh").mkdir()
    (top / "a" / "fresh" / "f.jsonl").write_text("{}\n")


def _link_to_folder(top: Path) -> None:
    (top / "a" / "x.jsonl").unlink()
    (top / "a" / "x.jsonl").symlink_to(top / "b", target_is_directory=True)


CHANGES: dict[str, Callable[[Path], None]] = {
    "a file added": _add_file,
    "a file removed": lambda top: (top / "a" / "deep" / "y.json").unlink(),
    "a file renamed": lambda top: (top / "a" / "x.jsonl").rename(top / "a" / "z.jsonl"),
    "a file grown": lambda top: (top / "a" / "x.jsonl").write_text("{}\n{}\n"),
    "a folder added": _add_folder,
    "a folder removed": lambda top: shutil.rmtree(top / "a" / "deep"),
    "a file made a link to a folder": _link_to_folder,
    "a folder named like a ledger": lambda top: (top / "b" / "odd.jsonl").mkdir(),
}


@pytest.mark.parametrize("change", CHANGES.values(), ids=CHANGES)
def test_folders_remembered_by_a_process_list_what_a_fresh_listing_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[Path], None]
) -> None:
    """A process that lists again lists a folder whose stat is unchanged from what it
    remembered, with no scandir: after any change under the folders, the same files with
    the same stats, and the same notes, as a listing that remembers nothing."""
    top = tmp_path / "logs"
    for name in ("a/x.jsonl", "a/deep/y.json", "b/z.jsonl"):
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text("{}\n")
    monkeypatch.setattr(files, "SETTLED_NS", -10**18)  # every folder as if changed long ago
    monkeypatch.setattr(files, "_FOLDERS", {})

    def listed(listings_before: int) -> tuple[list[tuple[str, int, int]], list[str]]:
        monkeypatch.setattr(files, "_LISTINGS", [listings_before])
        told: list[str] = []
        found = files.listing([top], skip=lambda p, r: told.append(f"{p}: {r}"),
                              folder=lambda p, r: told.append(f"{p}: {r}"))
        return [(name, info.st_size, info.st_mtime_ns) for name, info in found], told

    first = listed(1)
    assert len(files._FOLDERS) == 4  # (logs, a, a/deep, b)
    assert listed(1) == first  # listed from what it remembered
    change(top)
    assert listed(1) == listed(0)  # (0: a first listing, which remembers nothing)


def test_a_folder_changed_lately_is_not_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change in the same tick of the file system's clock as the listing would leave the
    folder's stat as it was: a folder changed within SETTLED_NS is listed again each time."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "x.jsonl").write_text("{}\n")
    monkeypatch.setattr(files, "_FOLDERS", {})
    monkeypatch.setattr(files, "_LISTINGS", [1])
    # Listed a second after its change, by the clock the listing reads: not "however long this
    # machine took to get from the write to the listing" (more than SETTLED_NS on a busy one).
    info = (tmp_path / "logs").stat()
    changed = max(info.st_mtime_ns, info.st_ctime_ns)
    monkeypatch.setattr(files, "time", SimpleNamespace(time_ns=lambda: changed + 10**9))
    files.listing([tmp_path / "logs"])
    assert files._FOLDERS == {}
    monkeypatch.setattr(files, "SETTLED_NS", -10**18)
    files.listing([tmp_path / "logs"])
    assert list(files._FOLDERS) == [str(tmp_path / "logs")]


#: Parts of names, with the characters that sort below the separator (space, ``-``, ``.``).
_PART = st.text(alphabet=" !-.0Aa_\x01\u00e9", min_size=1, max_size=4)


@given(st.lists(st.lists(_PART, min_size=1, max_size=4), max_size=30))
def test_names_sort_as_the_lists_of_their_parts_sort(paths: list[list[str]]) -> None:
    names = [os.sep.join(parts) for parts in paths]
    assert sorted(names, key=files._by_parts) == sorted(names, key=lambda n: n.split(os.sep))


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (os.mkfifo, "a named pipe (FIFO), not a regular file"),
        (os.mkdir, "a folder, not a regular file"),
    ],
    ids=["fifo", "folder"],
)
def test_opening_what_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, make: Any, reason: str
) -> None:
    """Opened without O_NONBLOCK, a FIFO would wait for a writer; it is refused instead."""
    path = tmp_path / "x.jsonl"
    make(path)
    with pytest.raises(files.NotRegular) as refused:
        files.open_file(path)
    assert files.why(refused.value) == reason


def test_the_byte_budget_counts_from_the_first_line_read_not_from_a_stepped_over_newline() -> None:
    """From just after a line read without its newline, the newline is stepped over; the
    ``max_bytes`` of the batch count the lines' bytes, so the step does not shorten it (found
    by the property above on a fresh run)."""
    text = b"x\n" + b"\x00" * 8 + b"\n\n"
    assert read_lines(io.BytesIO(text), 1, 2, 5, 10) == one_line_at_a_time(
        io.BytesIO(text), 1, 2, 5, 10
    ) == ([Line(2, b"\x00" * 6, oversize=8), Line(11, b"")], 12)


def walked(top: Path, skip: files.Tell, folder: files.Tell) -> list[Path]:
    """The walk ``files.discover`` made before it used ``os.scandir``: the reference."""

    def unlisted(exc: OSError) -> None:
        skip(Path(exc.filename), f"a folder that cannot be listed ({exc.strerror})")

    names = []
    for parent, dirs, found in os.walk(top, onerror=unlisted):
        for name in dirs:
            if Path(name).suffix in files.SUFFIXES:
                child = Path(parent, name)
                if child.is_symlink():
                    skip(child, f"a link to the folder {files._target(child)} (links to folders "
                                "under a folder are not followed)")
                else:
                    folder(child, "a folder named like a ledger file: searched as a folder")
        names.extend(Path(parent, n) for n in found if Path(n).suffix in files.SUFFIXES)
    return sorted(names)


def test_the_walk_finds_and_tells_what_the_os_walk_did(tmp_path: Path, monkeypatch) -> None:
    """Names that sort differently as strings and as paths (``a-b`` against ``a/``), links to
    files, folders and nothing, a FIFO, folders named like ledgers: the same files in the same
    order, the same notes in the same order, as the walk of ``os.walk``."""
    top = tmp_path / "logs"
    for name in ("a/x.jsonl", "a-b/x.jsonl", "a.b/y.json", "a/z/q.jsonl", "b.jsonl/in.json",
                 "c.json", "a/notes.txt", "a0/x.jsonl", "A/x.jsonl"):
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text("{}\n")
    os.mkfifo(top / "a" / "pipe.jsonl")
    (top / "gone.jsonl").symlink_to(tmp_path / "nothing")
    (top / "same.jsonl").symlink_to(top / "c.json")
    (top / "to-a.jsonl").symlink_to(top / "a", target_is_directory=True)
    (top / "to-a").symlink_to(top / "a", target_is_directory=True)

    def run() -> tuple[list[Path], list[tuple[str, Path, str]]]:
        told: list[tuple[str, Path, str]] = []
        found = files.discover([top], skip=lambda p, r: told.append(("skip", p, r)),
                               folder=lambda p, r: told.append(("folder", p, r)))
        return found, told

    ours = run()
    monkeypatch.setattr(files, "_walk", walked)
    assert ours == run()
    assert ours[1]  # (the tree gives notes to compare)
