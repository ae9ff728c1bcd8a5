"""Many hosts into one view (ledger/db/merge.py): three hosts' ledgers merged into one
database answer the dashboard's and the README's questions as the three do together, and as
one ingest of every host's files would; merging again changes nothing."""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from datasette.app import Datasette
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.db import merge, rollup
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from ledger.views.serve import metadata_for
from tests.export.questions import QUESTIONS, combined
from tests.helpers import FIXTURES, SAMPLES
from tests.hosts import DISJOINT, LOGS, OVERLAPPING, REAL, SPANS, host_dbs, merge_into

#: Every table a merge writes, and what a second merge must leave exactly as it was.
TABLES = ("sources", "sessions", "steps", "incidents", "fold_state", "session_sources",
          "ingest_errors", "hook_decisions", "leftovers", "session_rollup", "session_parity",
          "parity_groups", "cap_coverage", "task_classes", "verdict_settings")

Rows = list[tuple[Any, ...]]


def query(db: Path, sql: str) -> Rows:
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def as_host(db: Path, host: str, sql: str) -> Rows:
    """A question asked of one host's part of a merged database: ``sessions``, ``steps`` and
    ``incidents`` shadowed by views of that host's sessions, with their ids as the host's own
    database has them (``ID@HOST`` back to ``ID``)."""
    conn = sqlite3.connect(db)
    mine = ("select s.session_id from main.sessions s join main.sources src "
            f"on src.source_id = s.source_id where src.host = '{host}'")
    plain = f"replace(session_id, '@{host}', '') as session_id"
    try:
        for table in ("sessions", "steps", "incidents"):
            others = [c for (_, c, *_) in conn.execute(f"pragma table_xinfo({table})")
                      if c != "session_id"]
            conn.execute(
                f"create temp view {table} as select {plain}, {', '.join(others)} "
                f"from main.{table} where session_id in ({mine})"
            )
        return [tuple(r) for r in conn.execute(sql)]
    finally:
        conn.close()


def in_order(rows: Rows) -> Rows:
    return sorted(rows, key=repr)


def table_rows(db: Path) -> dict[str, Rows]:
    return {t: in_order(query(db, f"select * from {t}")) for t in TABLES}


@pytest.fixture(scope="module")
def overlapping(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("overlapping")
    hosts = host_dbs(folder, OVERLAPPING)
    target = folder / "team.db"
    merge_into(target, hosts)
    return target, hosts


@pytest.fixture(scope="module")
def disjoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Three hosts' databases merged, and one database every host's files were ingested into."""
    folder = tmp_path_factory.mktemp("disjoint")
    (folder / "merged").mkdir()
    (folder / "single").mkdir()
    target = folder / "merged" / "ledger.db"  # one name: the dashboard's URLs are the same
    merge_into(target, host_dbs(folder, DISJOINT))
    single = folder / "single" / "ledger.db"
    for host, inputs in DISJOINT.items():
        ingest(single, inputs, Options(host=host))
    return target, single


@pytest.mark.parametrize("name", sorted(set(QUESTIONS) - {"paid_path"}))
def test_the_merged_database_answers_as_the_three_hosts_together(
    name: str, overlapping: tuple[Path, list[Path]]
) -> None:
    target, hosts = overlapping
    each = [query(path, QUESTIONS[name]) for path in hosts]
    assert any(each), f"{name}: no host has an answer to compare"
    assert in_order(query(target, QUESTIONS[name])) == in_order(combined(name, each))


@pytest.mark.parametrize("name", sorted(QUESTIONS))
@pytest.mark.parametrize("host", sorted(OVERLAPPING))
def test_each_hosts_part_of_the_merged_database_answers_as_its_own_database(
    name: str, host: str, overlapping: tuple[Path, list[Path]]
) -> None:
    target, hosts = overlapping
    if name == "paid_path":  # verdicts are of every host's sessions together: below
        return
    own = next(p for p in hosts if p.stem == host)
    assert as_host(target, host, QUESTIONS[name]) == query(own, QUESTIONS[name])


@pytest.mark.parametrize("name", sorted(QUESTIONS))
def test_merging_three_hosts_answers_as_one_ingest_of_their_files(
    name: str, disjoint: tuple[Path, Path]
) -> None:
    target, single = disjoint
    expected = query(single, QUESTIONS[name])
    assert expected, f"{name}: no answer to compare"
    assert query(target, QUESTIONS[name]) == expected


@pytest.mark.parametrize("table", ["sessions", "steps", "incidents", "sources",
                                   "session_rollup", "session_parity", "task_classes",
                                   "cap_coverage", "parity_groups"])
def test_merging_three_hosts_stores_what_one_ingest_of_their_files_stores(
    table: str, disjoint: tuple[Path, Path]
) -> None:
    target, single = disjoint
    changing = {"sources": ("first_ingested_at", "ingested_at", "mtime")}.get(table, ())
    columns = [c for (_, c, *_) in query(single, f"pragma table_xinfo({table})")
               if c not in changing and c != "path"]
    sql = f"select {', '.join(columns)} from {table}"
    assert in_order(query(target, sql)) == in_order(query(single, sql))


def test_two_hosts_sessions_of_one_file_are_kept_apart(
    overlapping: tuple[Path, list[Path]]
) -> None:
    """host-a and host-b both ingested genai_spans.jsonl: the second host's copy of each
    session, and of the source, is named ID@host-b; steps and incidents follow."""
    target, _ = overlapping
    spans = query(target, "select s.session_id, s.source_id, src.host from sessions s "
                  "join sources src using (source_id) where s.session_id like 'conv-%' "
                  "order by s.session_id")
    assert [(sid, host) for sid, _, host in spans] == [
        ("conv-1", "host-a"), ("conv-1@host-b", "host-b"), ("conv-2", "host-a"),
        ("conv-2@host-b", "host-b"),
    ]
    assert spans[1][1] == spans[0][1] + "@host-b"
    steps = query(target, "select session_id, source_id, count(*) from steps "
                  "where session_id like 'conv-%' group by session_id, source_id")
    assert {(s, src) for s, src, _ in steps} == {(s, src) for s, src, _ in spans}


def test_merging_again_changes_nothing(
    overlapping: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    target, hosts = overlapping
    copy = tmp_path / "team.db"
    shutil.copy(target, copy)
    before = table_rows(copy)
    again = merge_into(copy, hosts)
    assert [(m.sources, m.sessions) for m in again] == [(0, 0)] * 3
    assert [m.unchanged_sources for m in again] == [7, 2, 6]
    assert table_rows(copy) == before


def test_the_rollup_is_kept_in_step(overlapping: tuple[Path, list[Path]]) -> None:
    target, _ = overlapping
    conn = sqlite3.connect(target)
    try:
        stored = conn.execute(
            f"select {', '.join((*rollup.KEY_NAMES, *rollup.MEASURE_NAMES))} "
            f"from session_rollup order by {', '.join(rollup.KEY_NAMES)}"
        ).fetchall()
        assert stored == rollup.rebuilt(conn)
    finally:
        conn.close()


def test_a_host_that_ingested_more_replaces_its_copy(tmp_path: Path) -> None:
    """host-b's file grows and host-b ingests again: merged again, the team database holds
    what a merge of the three as they are now holds, nothing twice."""
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = SPANS.read_text().splitlines(keepends=True) + LOGS.read_text().splitlines(True)
    (logs / "spans.jsonl").write_text("".join(lines[:2]))
    a, b = tmp_path / "host-a.db", tmp_path / "host-b.db"
    ingest(a, [SAMPLES], Options(host="host-a"))
    ingest(b, [logs], Options(host="host-b"))
    target = tmp_path / "team.db"
    merge_into(target, [a, b])
    (logs / "spans.jsonl").write_text("".join(lines))
    ingest(b, [logs], Options(host="host-b"))
    (second,) = merge_into(target, [b])
    assert (second.sources, second.unchanged_sources) == (1, 0)
    fresh = tmp_path / "fresh.db"
    merge_into(fresh, [a, b])
    for table in ("sessions", "steps", "incidents", "session_rollup", "task_classes"):
        sql = f"select * from {table}"
        assert in_order(query(target, sql)) == in_order(query(fresh, sql)), table


def test_a_database_of_an_older_schema_is_merged_through_a_migrated_copy(
    tmp_path: Path,
) -> None:
    old = tmp_path / "laptop-9.db"
    shutil.copy(FIXTURES / "schema-001.db", old)
    digest = hashlib.sha256(old.read_bytes()).hexdigest()
    target = tmp_path / "team.db"
    (done,) = merge_into(target, [old])
    assert (done.migrated_from, done.hosts, done.sessions) == (1, ["laptop-9"], 15)
    assert hashlib.sha256(old.read_bytes()).hexdigest() == digest  # only read
    assert query(target, "select distinct host from sources") == [("laptop-9",)]
    assert query(target, "select count(*) from sessions") == [(15,)]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".merge-")] == []


def not_a_ledger(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("create table notes (text)")
    conn.close()
    return path


def newer(path: Path) -> Path:
    ingest(path, [SPANS])
    conn = sqlite3.connect(path)
    conn.execute("pragma user_version = 999")
    conn.close()
    return path


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.write_bytes(b"not a database at all" * 100) and p, "not a SQLite database"),
    (not_a_ledger, re.escape("not an agent-ledger database (no incidents, sessions, sources")),
    (newer, "schema version 999 is newer than this agent-ledger"),
])
def test_a_database_that_cannot_be_merged_is_refused_saying_why(
    tmp_path: Path, make: Any, message: str
) -> None:
    path = make(tmp_path / "other.db")
    with pytest.raises(merge.Refused, match=message), merge.open_source(path, tmp_path / "t.db"):
        pass


def test_the_target_itself_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "team.db"
    ingest(target, [SPANS])
    with pytest.raises(merge.Refused, match="is the database merged into"), \
            merge.open_source(target, target):
        pass


def test_every_merged_text_is_cleaned_as_any_write(tmp_path: Path) -> None:
    """A database written by a tool that did not redact (or an older rule set): what the
    merge writes goes through the one redaction point, writes.clean."""
    secret = "ghp_" + "x1Y2" * 9
    source = tmp_path / "host-b.db"
    ingest(source, [SPANS], Options(host="host-b"))
    conn = sqlite3.connect(source)
    conn.execute("update sessions set task = ?", (f"deploy with {secret}",))
    conn.execute("update steps set detail = ?", (f'{{"token": "{secret}"}}',))
    conn.execute("insert into hook_decisions (at, session_id, reason) values (?, ?, ?)",
                 ("2026-01-01T00:00:00", "conv-1", f"denied: {secret}"))
    conn.commit()
    conn.close()
    target = tmp_path / "team.db"
    merge_into(target, [source])
    conn = sqlite3.connect(target)
    dump = "\n".join(conn.iterdump())
    conn.close()
    assert secret not in dump
    assert "REDACTED" in query(target, "select task from sessions limit 1")[0][0]
    assert len(query(target, "select * from hook_decisions")) == 1
    merge_into(target, [source])
    assert len(query(target, "select * from hook_decisions")) == 1  # not added twice


def test_sub_agents_follow_their_parents_renamed(tmp_path: Path) -> None:
    """The same transcripts on two hosts, a sub-agent session (conv-2) and its parent
    (conv-1) in each: the second host's sub-agent points at its own copy of its parent, and
    a parent no database holds keeps its id."""
    paths = []
    for host in ("host-c", "host-d"):
        path = tmp_path / f"{host}.db"
        ingest(path, [SPANS, REAL], Options(host=host))
        conn = sqlite3.connect(path)
        conn.execute("update sessions set parent_session_id = 'conv-1' "
                     "where session_id = 'conv-2'")
        conn.commit()
        conn.close()
        paths.append(path)
    target = tmp_path / "team.db"
    merge_into(target, paths)
    children = dict(query(target, "select session_id, parent_session_id from sessions "
                          "where parent_session_id is not null"))
    assert children["conv-2"] == "conv-1"
    assert children["conv-2@host-d"] == "conv-1@host-d"
    held = {sid for (sid,) in query(target, "select session_id from sessions")}
    copies = {c: p for c, p in children.items() if c.endswith("@host-d") and p not in held}
    assert copies, "the real logs have sub-agents whose parent is in no file here"
    assert all(p == children[c.removesuffix("@host-d")] for c, p in copies.items())
    hosts = Counter(h for (h,) in query(target, "select src.host from sessions s "
                                                "join sources src using (source_id)"))
    assert hosts["host-c"] == hosts["host-d"] == len(query(paths[0], "select 1 from sessions"))


@pytest.mark.asyncio
@pytest.mark.parametrize("page", ["overview", "retry-storms", "no-progress", "unknown-vendors"])
@pytest.mark.parametrize("host", ["", "host-a", "host-b", "host-c"])
async def test_the_dashboard_shows_the_merge_as_one_ingest_of_every_hosts_files(
    page: str, host: str, disjoint: tuple[Path, Path]
) -> None:
    """Every page's JSON twin, for every host and for all: the same from both databases."""
    answers = []
    for path in disjoint:
        ds = Datasette(files=[str(path)], metadata=metadata_for(path))
        response = await ds.client.get(f"/ledger/-/{page}.json?host={host}")
        assert response.status_code == 200, response.text[:300]
        answers.append(response.json())
    merged, single = answers
    assert merged == single


ids_ = st.text(alphabet="ab@-", min_size=1, max_size=4)
host_ = st.sampled_from(["h1", "h2", "h3"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(ids_, host_, max_size=6), min_size=1, max_size=4))
def test_ids_never_collide_and_are_found_again(merges: list[dict[str, str]]) -> None:
    """Databases merged one after another (each a few ids, each id with its host), ids
    chosen to collide: every id merged names one row of its own host, and merging any of
    them again gives every id the name it was given."""
    conn = sqlite3.connect(":memory:")
    conn.execute("create table sources (source_id text primary key, host text)")
    given_names = []
    for hosts in merges:
        names = merge._map_ids(conn, hosts, merge._SOURCE_HOST)
        assert len(set(names.values())) == len(names)
        for old, new in names.items():
            held = conn.execute(merge._SOURCE_HOST, (new,)).fetchone()
            assert held is None or held[0] == hosts[old]
            conn.execute("insert or replace into sources values (?, ?)", (new, hosts[old]))
        given_names.append(names)
    for hosts, names in zip(merges, given_names, strict=True):
        assert merge._map_ids(conn, hosts, merge._SOURCE_HOST) == names


def test_an_ingest_into_a_merged_database_leaves_the_other_hosts_sources_alone(
    tmp_path: Path,
) -> None:
    """host-b's source of a file starts with the same line as a local file of host-a that goes
    on differently: host-a's ingest makes a source of its own, never forgets or moves
    host-b's (which a lookup by first line alone would take for a moved copy)."""
    theirs = tmp_path / "b" / "spans.jsonl"
    theirs.parent.mkdir()
    theirs.write_bytes(SPANS.read_bytes())
    host_b = tmp_path / "host-b.db"
    ingest(host_b, [theirs], Options(host="host-b"))
    target = tmp_path / "merged.db"
    merge_into(target, [host_b])
    before = query(target, "select source_id, host, path, offset from sources order by 1")
    theirs.unlink()  # gone here: as on host-b's machine, seen from host-a's
    first, *rest = SPANS.read_bytes().splitlines(keepends=True)
    mine = tmp_path / "a" / "spans.jsonl"
    mine.parent.mkdir()
    mine.write_bytes(first + rest[-1])
    summary = ingest(target, [mine], Options(host="host-a"))
    assert summary.new_files == 1
    after = query(target, "select source_id, host, path, offset from sources order by 1")
    assert [row for row in after if row[1] == "host-b"] == before
    assert [row[1:3] for row in after if row[1] == "host-a"] == [("host-a", str(mine))]
