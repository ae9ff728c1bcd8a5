"""Workers fold new files while ingest writes: the database is the one a single process makes.

Each test ingests the same files twice, folding in this process (``jobs=0``) and in workers,
and compares every table, with what a worker cannot know (who owns a session, which source
id a claim gives, whether it is still alive) made to go wrong on purpose.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from ledger.core.fold import STEP_COLUMNS
from ledger.db import connection
from ledger.ingest import claims, parallel
from ledger.ingest.ingester import Ingester, ingest
from ledger.ingest.options import Options, default_jobs
from ledger.ingest.source import Folded, Output
from ledger.ingest.summary import Summary
from tests.corpus import write_ledgers
from tests.helpers import FIXTURES, REAL_LOGS, ROOT, SAMPLES, paused_env, rows

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="patches reach the workers only through fork"
)

#: Columns that hold when a row was written, not what it says.
WHEN = {"ingested_at", "first_ingested_at", "mtime", "computed_at"}


def everything(db_path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table but the migrations' log, every row, in a stable order, minus write times."""
    conn = sqlite3.connect(db_path)
    try:
        tables = [name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name != '_migrations' ORDER BY name")]
        dumped = {}
        for table in tables:
            columns = [c for (_, c, *_) in conn.execute(f"PRAGMA table_info([{table}])")
                       if c not in WHEN]
            listed = ", ".join(f"[{c}]" for c in columns)
            dumped[table] = conn.execute(f"SELECT {listed} FROM [{table}]").fetchall()
            dumped[table].sort(key=repr)
        return dumped
    finally:
        conn.close()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every dialect, real agent logs, hostile files, secrets and generated volume."""
    root = tmp_path_factory.mktemp("corpus")
    shutil.copytree(SAMPLES, root / "samples")
    shutil.copytree(REAL_LOGS, root / "real", ignore=shutil.ignore_patterns("licenses", "*.md"))
    shutil.copytree(FIXTURES / "hostile", root / "hostile")
    secrets = (FIXTURES / "secrets" / "secrets.txt").read_text(encoding="utf-8").splitlines()
    (root / "secrets.jsonl").write_text("".join(
        f'{{"session": "secret-{n}", "type": "round", "detail": {text!r}}}\n'.replace("'", '"')
        for n, text in enumerate(secrets[:40]) if '"' not in text and "\\" not in text
    ), encoding="utf-8")
    write_ledgers(root / "volume", events=3000, files=6, seed=7)
    return root


def two_ways(
    paths: list[Path], tmp_path: Path, jobs: int = 2, **options: Any
) -> tuple[Path, Path, Summary, Summary]:
    """Ingest ``paths`` in this process and with ``jobs`` workers; both databases and
    summaries."""
    here, ahead = tmp_path / "here.db", tmp_path / "ahead.db"
    one = ingest(here, paths, Options(jobs=0, **options))
    other = ingest(ahead, paths, Options(jobs=jobs, parallel_min_bytes=0, **options))
    return here, ahead, one, other


def assert_same(here: Path, ahead: Path) -> None:
    a, b = everything(here), everything(ahead)
    assert a.keys() == b.keys()
    for table in a:
        assert a[table] == b[table], table


def assert_same_summary(one: Summary, other: Summary) -> None:
    """The same summary, but that the second ingest started workers and the first none."""
    a, b = one.to_dict(), other.to_dict()
    assert (a.pop("workers"), b.pop("workers") > 0) == (0, True)
    assert a == b


@pytest.fixture
def writer_folds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files an ingest with workers folded itself, line by line."""
    folded: list[str] = []
    ingest_lines = Ingester._ingest_lines

    def spy(self: Ingester, info: Any, source: dict[str, Any]) -> None:
        if self.options.jobs:
            folded.append(info.path.name)
        ingest_lines(self, info, source)

    monkeypatch.setattr(Ingester, "_ingest_lines", spy)
    return folded


@pytest.fixture
def part_lines(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Workers send batches in parts of this many lines (forked, they see the patch)."""
    monkeypatch.setattr(parallel, "PART_LINES", request.param)
    return request.param


@pytest.mark.parametrize("jobs", [1, 2, 3])
@pytest.mark.parametrize(("batch", "part_lines"), [(7, 3), (20_000, 3), (20_000, 4_000)],
                         indirect=["part_lines"])
def test_workers_leave_the_database_one_process_leaves(
    corpus: Path, tmp_path: Path, jobs: int, batch: int, part_lines: int
) -> None:
    here, ahead, one, other = two_ways([corpus], tmp_path, jobs, batch=batch)
    assert_same(here, ahead)
    assert_same_summary(one, other)
    assert one.redactions > 0 and one.errors > 0 and one.steps > 3000


@pytest.mark.parametrize("part_bytes", [1, 300])
def test_parts_cut_by_bytes_leave_the_same_database(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, part_bytes: int
) -> None:
    """Parts of one line each, or of a few hundred bytes (forked, the workers see it)."""
    monkeypatch.setattr(parallel, "PART_BYTES", part_bytes)
    here, ahead, one, other = two_ways([corpus], tmp_path)
    assert_same(here, ahead)
    assert_same_summary(one, other)


@pytest.mark.parametrize(("lines_held", "parts"), [(20, 1), (2.5, 4), (0.1, 10)])
def test_a_part_ends_once_its_lines_hold_part_bytes(
    tmp_path: Path, write_jsonl: Callable[..., Path], monkeypatch: pytest.MonkeyPatch,
    lines_held: float, parts: int,
) -> None:
    """Ten lines of one length, parts of at most ``lines_held`` lines' bytes, and the line
    that passes them (a line longer than that is a part of its own)."""
    log = write_jsonl(tmp_path / "a.jsonl", [
        {"session": "s", "type": "round", "detail": f"step {n:03}"} for n in range(10)])
    monkeypatch.setattr(parallel, "PART_BYTES", int(lines_held * log.stat().st_size / 10))
    job = parallel.Job(str(log), "src", "native", "general", "fp", log.stat().st_size)
    owners = parallel._Owners("")
    sent = list(parallel.fold_file(job, Options().make_fold(), Options(), owners))
    assert [type(m) for m in sent] == [parallel.Part] * parts + [parallel.Batch]
    assert sum(len(m.out.steps) for m in sent[:-1]) + len(sent[-1].folded.out.steps) == 10


def test_the_writer_folds_nothing_itself_when_all_goes_well(
    corpus: Path, tmp_path: Path, writer_folds: list[str]
) -> None:
    ingest(tmp_path / "a.db", [corpus / "volume"], Options(jobs=2, parallel_min_bytes=0))
    assert writer_folds == []


@pytest.mark.parametrize(("part_lines", "batch"), [(1, 20_000), (4_000, 20_000), (4_000, 2)],
                         indirect=["part_lines"])
def test_a_session_an_earlier_file_of_the_run_opened_sends_the_later_file_back(
    tmp_path: Path, write_jsonl: Callable[..., Path], writer_folds: list[str], part_lines: int,
    batch: int,
) -> None:
    """The worker folding b.jsonl cannot see that a.jsonl, written meanwhile, opened "s":
    the writer finds out before writing that line's part (or the batch's end, which holds
    its last lines) and folds b itself, refusing those lines. (With parts of one line, b's
    first part was written already: rolled back.)"""
    a = write_jsonl(tmp_path / "runs" / "a.jsonl", [{"session": "s", "type": "round"}])
    b = write_jsonl(tmp_path / "runs" / "b.jsonl", [
        {"session": "t", "type": "round"}, {"session": "s", "type": "round"}])
    here, ahead, one, other = two_ways([a, b], tmp_path, batch=batch)
    assert_same(here, ahead)
    assert (other.steps, other.errors) == (2, 1)
    assert writer_folds == ["b.jsonl"]


def test_a_session_owned_before_the_run_is_refused_by_the_worker(
    tmp_path: Path, write_jsonl: Callable[..., Path], writer_folds: list[str]
) -> None:
    old = write_jsonl(tmp_path / "old" / "a.jsonl", [{"session": "s", "type": "round"}])
    runs = [
        write_jsonl(tmp_path / "runs" / f"{n}.jsonl", [
            {"session": f"new-{n}", "type": "round"}, {"session": "s", "type": "round"}])
        for n in range(3)
    ]
    for db in ("here.db", "ahead.db"):
        ingest(tmp_path / db, [old], Options(jobs=0))
    here, ahead, one, other = two_ways(runs, tmp_path)
    assert_same(here, ahead)
    assert other.errors == 3
    assert writer_folds == []  # the workers read the owner in the database


@pytest.mark.parametrize("batch", [5, 20_000])
def test_copies_of_one_transcript_make_one_session_whoever_folds_them(
    tmp_path: Path, batch: int, writer_folds: list[str]
) -> None:
    """Snapshots of a transcript and the transcript, new to the run: a worker folds the
    first, and leaves the others, which join its session, to the writer."""
    lines = (REAL_LOGS / "03_claude_code_main_session_tail_lines1781-1863_v2.1.39.jsonl"
             ).read_bytes().splitlines(keepends=True)
    paths = []
    for n, cut in enumerate([30, len(lines), 50]):
        path = tmp_path / "runs" / f"copy-{n}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"".join(lines[:cut]))
        paths.append(path)
    here, ahead, one, other = two_ways(paths, tmp_path, batch=batch)
    assert_same(here, ahead)
    assert (one.errors, other.errors) == (0, 0)
    assert writer_folds == ["copy-1.jsonl", "copy-2.jsonl"]
    (session,) = sqlite3.connect(here).execute("SELECT rounds, output_tokens FROM sessions")
    assert session == (10, 1359)


def test_a_claim_other_than_planned_is_folded_by_the_writer(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer_folds: list[str]
) -> None:
    """Another ingest may claim a file between the plan and this one's claim."""
    plan = claims.plan

    def wrong_ids(
        conn: Any, files: list[Path], settings: claims.Settings
    ) -> list[claims.PlannedSource]:
        return [replace(p, source_id=p.source_id + "-x") if p.path.name == "ledger-1.jsonl"
                else p for p in plan(conn, files, settings)]

    monkeypatch.setattr(claims, "plan", wrong_ids)
    here, ahead, _, _ = two_ways([corpus / "volume"], tmp_path)
    assert_same(here, ahead)
    assert writer_folds == ["ledger-1.jsonl"]  # and its batches, sent all the same, skipped


def test_a_file_a_worker_cannot_read_is_left_to_the_writer(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer_folds: list[str]
) -> None:
    fold_file = parallel.fold_file

    def unreadable(job: parallel.Job, *args: Any) -> Iterator[parallel.Batch]:
        if job.path.endswith("ledger-1.jsonl"):
            raise PermissionError(13, "Permission denied")
        return fold_file(job, *args)

    monkeypatch.setattr(parallel, "fold_file", unreadable)
    here, ahead, one, other = two_ways([corpus / "volume"], tmp_path)
    assert_same(here, ahead)
    assert_same_summary(one, other)
    assert writer_folds == ["ledger-1.jsonl"]


@pytest.mark.parametrize("part_lines", [4_000, 20], indirect=True)
def test_a_worker_that_dies_mid_file_leaves_its_files_to_the_writer(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer_folds: list[str],
    part_lines: int,
) -> None:
    """Killed before its third message on ledger-5 (after two batches of 50 lines, or two
    parts of 20 of the first batch, which are rolled back): the writer goes on from the
    batches written, and folds the worker's later files itself (the other worker's are
    unaffected)."""
    fold_file = parallel.fold_file

    def dies(job: parallel.Job, *args: Any) -> Iterator[parallel.Batch]:
        for n, batch in enumerate(fold_file(job, *args)):
            if n == 2 and job.path.endswith("ledger-5.jsonl"):
                os._exit(9)
            yield batch

    monkeypatch.setattr(parallel, "fold_file", dies)
    here, ahead, one, other = two_ways([corpus / "volume"], tmp_path, batch=50)
    assert_same(here, ahead)
    assert_same_summary(one, other)
    # Files go to the two workers in turn, in path order: gate/ledger-1, 5 and
    # native/ledger-2 to the first, gate/ledger-3 and native/ledger-0, 4 to the second. What
    # the worker had queued and not yet sent dies with it (ledger-1's end, at times).
    first_worker = {"ledger-1.jsonl", "ledger-5.jsonl", "ledger-2.jsonl"}
    assert {"ledger-5.jsonl", "ledger-2.jsonl"} <= set(writer_folds) <= first_worker
    assert writer_folds == sorted(writer_folds, key=["ledger-1.jsonl", "ledger-5.jsonl",
                                                     "ledger-2.jsonl"].index)


def test_stopping_between_batches_and_going_on_later_gives_the_same_database(
    corpus: Path, tmp_path: Path
) -> None:
    here = tmp_path / "here.db"
    ingest(here, [corpus], Options(jobs=0, batch=50))
    ahead = tmp_path / "ahead.db"
    calls = iter(range(1_000_000))
    db = connection.connect(ahead)
    try:
        options = Options(jobs=2, parallel_min_bytes=0, batch=50)
        stopped = Ingester(db, options, should_stop=lambda: next(calls) > 40).ingest([corpus])
    finally:
        db.conn.close()
    assert multiprocessing.active_children() == []
    assert 0 < stopped.steps < len(everything(here)["steps"])
    ingest(ahead, [corpus], Options(jobs=2, parallel_min_bytes=0, batch=50))
    assert_same(here, ahead)


def test_ctrl_c_stops_the_workers_and_loses_nothing_committed(
    corpus: Path, tmp_path: Path
) -> None:
    here = tmp_path / "here.db"
    ingest(here, [corpus], Options(jobs=0))
    ahead = tmp_path / "ahead.db"
    seen = []

    def interrupt(size: int) -> None:
        seen.append(size)
        if len(seen) == 25:
            raise KeyboardInterrupt

    options = Options(jobs=2, parallel_min_bytes=0, batch=50)
    with pytest.raises(KeyboardInterrupt):
        ingest(ahead, [corpus], options, progress=interrupt)
    assert multiprocessing.active_children() == []
    ingest(ahead, [corpus], options)
    assert_same(here, ahead)


def test_few_new_bytes_or_no_new_files_start_no_workers(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = []
    workers = parallel.Workers

    def count(*args: Any) -> parallel.Workers:
        started.append(args[0])
        return workers(*args)

    monkeypatch.setattr(parallel, "Workers", count)
    db = tmp_path / "a.db"
    ingest(db, [corpus / "samples"], Options(jobs=2))  # a few kB, under the default minimum
    assert started == []
    ingest(db, [corpus], Options(jobs=2, parallel_min_bytes=0))  # the samples are known now
    (jobs,) = started
    assert not any("samples" in job.path for job in jobs)
    ingest(db, [corpus], Options(jobs=2, parallel_min_bytes=0))  # nothing new
    assert len(started) == 1


def test_copies_of_files_the_database_knows_are_left_to_the_writer(
    corpus: Path, tmp_path: Path, writer_folds: list[str]
) -> None:
    """A file whose first line a known source has may be that source moved: its claim
    decides, so it is not planned, and the copies (new sources, since the originals are still
    there) are folded by the writer, with the ids their claims give."""
    copy = tmp_path / "copy"
    shutil.copytree(corpus / "volume", copy)
    for db in ("here.db", "ahead.db"):
        ingest(tmp_path / db, [corpus / "volume"], Options(jobs=0))
    here, ahead, one, other = two_ways([copy], tmp_path)
    assert_same(here, ahead)
    assert other.to_dict() == one.to_dict()
    assert (other.new_files, other.workers) == (6, 0)
    assert len(writer_folds) == 6


def test_spawned_workers_as_on_macos_and_windows_give_the_same_database(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer_folds: list[str]
) -> None:
    """Spawned workers start a new interpreter and get their jobs and options pickled."""
    monkeypatch.setattr(parallel, "START_METHOD", "spawn")
    here, ahead, one, other = two_ways([corpus / "volume", corpus / "samples"], tmp_path)
    assert_same(here, ahead)
    assert_same_summary(one, other)
    assert writer_folds == []


def test_new_files_that_share_a_first_line_get_the_ids_their_claims_give(
    corpus: Path, tmp_path: Path, writer_folds: list[str]
) -> None:
    """A source id starts with the file's fingerprint (its first line): the plan gives the
    second and third of three new look-alikes the next free ids, as the claims will. (The
    copies of native ledgers name the first copy's sessions: their workers could not know,
    and the writer folds them itself; gate sessions are named after their source.)"""
    runs = tmp_path / "runs"
    for name in ("a", "b", "c"):
        shutil.copytree(corpus / "volume", runs / name)
    here, ahead, one, other = two_ways([runs], tmp_path)
    assert_same(here, ahead)
    ids = [source_id for (source_id, *_) in everything(ahead)["sources"]]
    assert sum(source_id.endswith("-3") for source_id in ids) == 6
    assert sorted(writer_folds) == sorted(2 * ["ledger-0.jsonl", "ledger-2.jsonl",
                                               "ledger-4.jsonl"])


@pytest.mark.parametrize("cores", [None, 1, 2, 3, 16])
def test_default_jobs_is_one_worker_per_core_up_to_two(
    monkeypatch: pytest.MonkeyPatch, cores: int | None
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert default_jobs() == {None: 0, 1: 0, 2: 2, 3: 2, 16: 2}[cores]


class Label(str):
    """A str subclass, which marshal refuses."""


@pytest.mark.parametrize("reason", ["plain", Label("subclass")])
@pytest.mark.parametrize("kind", ["part", "batch"])
def test_parts_and_batches_arrive_as_they_were_sent(reason: str, kind: str) -> None:
    step = tuple(range(len(STEP_COLUMNS) - 1)) + (None,)
    out = Output([step], [{"kind": "retry_storm", "n": 2.5}], [{"reason": reason, "raw": b"\0"}])
    out.unknown["odd"] += 2
    owners = {"s": None, "t": "src"}
    sent: parallel.Message = (
        parallel.Part(40, out, 1, owners) if kind == "part" else parallel.Batch(
            Folded(out, [{"session_id": "s", "stop_reason": None}], [("s", "src", '{"a": 1}')],
                   {"line": 3, "unknown": {"x": 1}}),
            3, 0, 99, "abc", 120, 1.5, 1, owners)
    )
    message = parallel.encode(sent)
    assert message[:1] == (b"M" if type(reason) is str else b"P")
    assert parallel.decode(message) == sent


def test_a_file_another_ingest_went_on_with_is_continued_from_where_that_one_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer_folds: list[str]
) -> None:
    """Between this ingest's claim of a file and its first batch, another ingest writes the
    file's first batch (and its bad line): the worker's first batch is not written again.
    (Gate ledgers: their sessions are named after the source, so no owner is looked up.)"""
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("a", "b"):
        lines = [f'{{"step": {n % 30 + 1}, "action": "read", "detail": "{name}"}}'
                 for n in range(200)]
        lines[1] = "{not json"
        (runs / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ahead = tmp_path / "ahead.db"
    batches_ahead = Ingester._batches_ahead

    def meanwhile(self: Ingester, info: Any, source: dict[str, Any]) -> Any:
        batches = batches_ahead(self, info, source)
        if batches is not None and info.path.name == "b.jsonl":
            self._tx.end("COMMIT")  # the claim, for the other ingest to see
            checks = iter(range(10))
            other = connection.connect(ahead)
            try:  # stops before its second batch
                Ingester(other, Options(jobs=0, batch=50),
                         should_stop=lambda: next(checks) >= 2).ingest([info.path])
            finally:
                other.conn.close()
        return batches

    monkeypatch.setattr(Ingester, "_batches_ahead", meanwhile)
    here = tmp_path / "here.db"
    ingest(here, [runs], Options(jobs=0, batch=50))
    ingest(ahead, [runs], Options(jobs=2, parallel_min_bytes=0, batch=50))
    assert_same(here, ahead)
    assert writer_folds == ["b.jsonl"]


def test_ctrl_c_on_a_following_ingest_with_workers_leaves_no_worker_and_loses_nothing(
    tmp_path: Path,
) -> None:
    """A real ``ingest --follow --jobs 2`` on 5 MB of new files, stopped by SIGINT while it
    writes the workers' batches: it exits 0, its workers are gone, and a later ingest ends
    where one clean ingest does.

    The writer pauses 20 ms after each of its 72 commits, so its first pass lasts 1.4 s at
    least however fast the machine: the SIGINT, sent within about 10 ms of both workers being
    seen, comes while it is still writing their batches (checked: not every byte is read)."""
    runs = tmp_path / "runs"
    files = write_ledgers(runs, 36_000, files=4, seed=5)
    db = tmp_path / "ledger.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", str(db), str(runs), "--follow", "--jobs",
         "2", "--batch-size", "500", "--no-progress"],
        cwd=ROOT, env=paused_env(0.02), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    workers = _children_once_there(proc, 2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)  # (only a hang gets near it, however loaded)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert [pid for pid in workers if _running(pid)] == []
    read = rows(db, "select coalesce(sum(offset), 0) as n from sources")[0]["n"]
    assert read < sum(f.stat().st_size for f in files), "it read everything before it stopped"
    ingest(db, [runs], Options(jobs=0))
    clean = tmp_path / "clean.db"
    ingest(clean, [runs], Options(jobs=0))
    assert_same(clean, db)


def test_a_writer_killed_with_kill_9_leaves_no_worker_behind(tmp_path: Path) -> None:
    """A real ``ingest --jobs 2`` killed with SIGKILL once both workers run: each worker, its
    pipe's read end closed with the writer (it holds no copy of its own), fails its next send
    and ends, as a writer's Ctrl-C ends it, not blocked for ever on a full pipe.

    The writer pauses 50 ms after each of its 72 commits, so it is still at work when killed,
    however fast the machine; a worker folds ahead of it until its pipe is full. How long the
    workers take to end is not timed: only that they do, within a minute."""
    runs = tmp_path / "runs"
    write_ledgers(runs, 36_000, files=4, seed=5)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", str(tmp_path / "ledger.db"), str(runs),
         "--jobs", "2", "--batch-size", "500", "--no-progress"],
        cwd=ROOT, env=paused_env(0.05), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    workers = _children_once_there(proc, 2)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 60
    while (alive := [pid for pid in workers if _running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in alive:  # (not left running after the test, whatever it says)
        os.kill(pid, signal.SIGKILL)
    assert alive == [], "workers still running a minute after their writer was killed"


def _children_once_there(proc: subprocess.Popen[bytes], count: int) -> list[int]:
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + 60
    found: list[int] = []
    while len(found) < count and time.monotonic() < deadline and proc.poll() is None:
        found = [int(pid) for pid in children.read_text().split()]
        time.sleep(0.01)
    assert len(found) == count, f"{len(found)} workers seen (the ingest: {proc.poll()})"
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` runs: an orphan that ended stays a zombie where nothing reaps it."""
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


#: An ingest with workers in a fresh process (this one holds the rule set already): whether
#: each worker held the rule set when it started, which threads ran at each fork, the files
#: the writer folded itself, and whether the ingest process held the rule set at its end.
IN_A_FRESH_PROCESS = """
import json, os, sys, threading
from ledger.core import secret_rules
from ledger.ingest import parallel
from ledger.ingest.ingester import Ingester, ingest
from ledger.ingest.options import Options
work, fork, ingest_lines = parallel.work, os.fork, Ingester._ingest_lines
forks, folded = [], []
def spy_work(*args):
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps(secret_rules.loaded()) + "\\n")
    work(*args)
def spy_fork():
    forks.append(sorted(t.name for t in threading.enumerate()))
    return fork()
def spy_lines(self, info, source):
    folded.append(os.path.basename(info.path))
    ingest_lines(self, info, source)
parallel.work, os.fork, Ingester._ingest_lines = spy_work, spy_fork, spy_lines
batch = int(sys.argv[3])
summary = ingest(sys.argv[2], sys.argv[4:], Options(jobs=2, parallel_min_bytes=0, batch=batch))
print(json.dumps([summary.workers, forks, folded, secret_rules.loaded()]))
"""

#: A GitLab token (made up): the first pass of redaction leaves it to the rule set.
TOKEN = "glpat-" + "abcdefghij0123456789"


@pytest.mark.parametrize(
    ("secret_in", "batch", "started", "writer_folds", "loaded"),
    [
        # No text needs the rule set: no process loads it.
        (None, 20_000, [False, False], [], False),
        # One of the first worker's files (0, 2, 4) does: it hands that file back and ends;
        # the writer loads the rule set, forks a worker holding it for file 4 and folds file
        # 2 itself.
        ("2.jsonl", 20_000, [False, False, True], ["2.jsonl"], True),
        # The same in batches of 7 lines: the writer wrote the four the worker sent before
        # the line that needs the rules, and goes on from there.
        ("2.jsonl", 7, [False, False, True], ["2.jsonl"], True),
        # The last file of the second worker (1, 3, 5): nothing is left to fork a worker for.
        ("5.jsonl", 20_000, [False, False], ["5.jsonl"], True),
    ],
)
def test_workers_start_without_the_rule_set_and_never_load_it_themselves(
    tmp_path: Path, write_jsonl: Callable[..., Path], secret_in: str | None, batch: int,
    started: list[bool], writer_folds: list[str], loaded: bool,
) -> None:
    """Workers are forked at once, holding the rule set only as the ingest process does; one
    whose text needs it hands the file back, and only the ingest process loads it, never
    while it forks. The database is the one a one-process ingest leaves."""
    runs = [write_jsonl(tmp_path / "runs" / f"{n}.jsonl", [
        {"session": f"s{n}", "type": "round",
         "detail": f"token {TOKEN}" if f"{n}.jsonl" == secret_in and i == 30 else f"step {i}"}
        for i in range(50)]) for n in range(6)]
    seen, ahead = tmp_path / "seen", tmp_path / "ahead.db"
    done = subprocess.run(
        [sys.executable, "-c", IN_A_FRESH_PROCESS, str(seen), str(ahead), str(batch),
         *map(str, runs)], capture_output=True, text=True, check=True)
    workers, forks, folded, held = json.loads(done.stdout)
    assert (workers, folded, held) == (2, writer_folds, loaded)
    assert forks == [["MainThread"]] * len(started)
    assert sorted(json.loads(line) for line in seen.read_text().split()) == sorted(started)
    ingest(tmp_path / "here.db", runs, Options(jobs=0, batch=batch))
    assert_same(tmp_path / "here.db", ahead)


@pytest.mark.parametrize("folder", ["plain", "a space", "what?", "hash#", "100%", "naïve"])
def test_a_worker_reads_owners_from_a_database_whatever_its_folder_is_called(
    tmp_path: Path, write_jsonl: Callable[..., Path], folder: str
) -> None:
    """Workers open the database read only by its file: URI; a folder name that a URI
    escapes (or that would end it early) names the same file."""
    db = tmp_path / folder / "ledger.db"
    db.parent.mkdir()
    ingest(db, [write_jsonl(tmp_path / "a.jsonl", [{"session": "s", "type": "round"}])],
           Options(jobs=0))
    conn = sqlite3.connect(db)
    owner = conn.execute("SELECT source_id FROM sessions").fetchone()[0]
    conn.close()
    owners = parallel._Owners(str(db))
    try:
        assert (owners.lookup("s"), owners.lookup("nobody")) == (owner, None)
    finally:
        owners.close()


#: A worker's first file, in a fresh process forked as the ingest forks one: the modules it
#: imported to fold it.
FIRST_FILE_IMPORTS = """
import json, os, sys
from ledger.ingest import parallel
from ledger.ingest.options import Options
job = parallel.Job(sys.argv[1], "src", "claude-code", "general", "fp",
                   os.path.getsize(sys.argv[1]))
options = Options()
fold = options.make_fold()
before = set(sys.modules)
owners = parallel._Owners(sys.argv[2])
for _ in parallel.fold_file(job, fold, options, owners):
    pass
owners.lookup("s")
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_a_worker_imports_nothing_of_the_network_to_read_owners(tmp_path: Path) -> None:
    """(urllib.request imported http, ssl and email: 50 ms and 2 MB of each worker's own.)"""
    log = REAL_LOGS / "01_claude_code_main_session_short_v2.1.38.jsonl"
    ingest(tmp_path / "ledger.db", [REAL_LOGS / "04_codex_rollout_v0.77.0_codex_exec_full.jsonl"],
           Options(jobs=0))  # a database to look owners up in, that owns none of log's
    done = subprocess.run([sys.executable, "-c", FIRST_FILE_IMPORTS, str(log),
                           str(tmp_path / "ledger.db")],
                          capture_output=True, text=True, check=True)
    imported = set(json.loads(done.stdout))
    assert not imported & {"urllib.request", "http.client", "ssl", "email"}


def test_the_garbage_collector_leaves_what_workers_share_alone_while_they_work(
    tmp_path: Path, write_jsonl: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers find the objects they were forked with frozen (a collection would copy the
    pages they share); the ingest unfreezes them once its workers are done."""
    seen = tmp_path / "frozen"
    fold_file = parallel.fold_file

    def spy(*args: Any) -> Iterator[parallel.Message]:
        with seen.open("a") as f:
            f.write(f"{gc.get_freeze_count()}\n")
        return fold_file(*args)

    monkeypatch.setattr(parallel, "fold_file", spy)
    runs = [write_jsonl(tmp_path / f"{n}.jsonl", [{"session": f"s{n}", "type": "round"}])
            for n in range(4)]
    ingest(tmp_path / "ledger.db", runs, Options(jobs=2, parallel_min_bytes=0))
    counts = [int(n) for n in seen.read_text().split()]
    assert len(counts) == 4 and min(counts) > 1_000
    assert gc.get_freeze_count() == 0


def test_files_this_host_has_read_are_never_planned_for_workers(
    sample_db: Path, samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only files that are no source of this host by their path can go to a worker, so only
    they are planned (a sniff each) and count towards PARALLEL_MIN_BYTES: a grown file, however
    big, plans nothing and imports no worker's module."""
    planned: list[list[str]] = []

    def spy(conn: Any, files: list[Path], settings: claims.Settings) -> list[Any]:
        planned.append(sorted(p.name for p in files))
        return []

    monkeypatch.setattr(claims, "plan", spy)
    with (samples / "bugfix" / "night-run.jsonl").open("a") as f:
        f.write('{"session": "s9", "type": "round"}\n')
    options = Options(jobs=2, parallel_min_bytes=1)
    assert ingest(sample_db, [samples], options).updated_files == 1
    assert planned == []
    (samples / "new.jsonl").write_text('{"session": "n1", "type": "round"}\n')
    with (samples / "bugfix" / "night-run.jsonl").open("a") as f:
        f.write('{"session": "s9", "type": "round"}\n')
    assert ingest(sample_db, [samples], options).new_files == 1
    assert planned == [["new.jsonl"]]
