"""Many hosts read as one: three hosts export into one Parquet tree, and DuckDB over the tree
answers the dashboard's and the README's questions as the three hosts' databases do together,
and, where a question names no session, as the database ``agent-ledger merge`` makes of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.export.conftest import run_export
from tests.export.questions import LISTINGS, QUESTIONS, combined
from tests.export.test_engines import TABLES, sqlite_rows
from tests.hosts import OVERLAPPING, host_dbs, merge_into

#: Each host's verdicts are its own (task_classes/host=NAME/): read as one, a class is there
#: once per host; the verdict over every host's sessions is the merged database's.
PER_HOST = {"paid_path"}


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path, Any]:
    """Three hosts' databases, their merge, and DuckDB over the tree all three export into."""
    folder = tmp_path_factory.mktemp("hosts")
    hosts = host_dbs(folder, OVERLAPPING)
    out = folder / "shared"
    for path in hosts:
        run_export(path, out, None)
    merged = folder / "team.db"
    merge_into(merged, hosts)
    conn = duckdb.connect()
    for table in TABLES:
        conn.execute(f"create view {table} as select * from read_parquet("
                     f"'{out}/{table}/**/*.parquet', hive_partitioning = true)")
    yield hosts, merged, conn
    conn.close()


def in_order(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=repr)


@pytest.mark.parametrize("name", sorted(set(QUESTIONS) - PER_HOST))
def test_the_tree_answers_as_the_three_hosts_together(name: str, team: Any) -> None:
    hosts, _, duck = team
    expected = combined(name, [sqlite_rows(path, QUESTIONS[name]) for path in hosts])
    assert expected, f"{name}: no answer to compare"
    assert in_order(duck.execute(QUESTIONS[name]).fetchall()) == in_order(expected)


@pytest.mark.parametrize("name", sorted(set(QUESTIONS) - PER_HOST - LISTINGS))
def test_the_tree_answers_as_the_merged_database(name: str, team: Any) -> None:
    _, merged, duck = team
    assert duck.execute(QUESTIONS[name]).fetchall() == sqlite_rows(merged, QUESTIONS[name])


def test_a_host_is_a_column_of_the_tree(team: Any) -> None:
    hosts, _, duck = team
    got = duck.execute("select host, count(*) from sessions group by host order by host")
    expected = [(p.stem, sqlite_rows(p, "select count(*) from sessions")[0][0]) for p in hosts]
    assert got.fetchall() == expected
    classes = duck.execute("select distinct host from task_classes order by host").fetchall()
    assert classes == [(p.stem,) for p in hosts]
