"""What an export holds, and where: the tables, their partitions and their column types.

An export folder is a Hive-partitioned Parquet tree (docs/export.md)::

    OUT/sessions/day=2026-01-01/host=laptop-1/part.parquet
    OUT/steps/day=.../host=.../part.parquet        (the steps of those sessions)
    OUT/incidents/day=.../host=.../part.parquet    (their incidents)
    OUT/task_classes/host=laptop-1/part.parquet    (this database's verdicts)
    OUT/stop_reasons/part.parquet                  (the decision table, the same everywhere)

A session's partition is the day it started (UTC, the first ten characters of
``started_at``) and the host its source was ingested on; its steps and incidents go with it,
so one partition's three files always describe the same sessions. Columns are the table's
own (docs/schema.md), typed by their declared SQLite type; the partition keys are in the
paths, not the files. Everything here is pure.
"""

from __future__ import annotations

from pathlib import Path

#: Hive's name for a NULL partition value (Spark, DuckDB and ClickHouse read it back as such).
NULL_PART = "__HIVE_DEFAULT_PARTITION__"
PART_FILE = "part.parquet"
#: Tables partitioned like their sessions.
SESSION_TABLES = ("sessions", "steps", "incidents")
#: Declared SQLite types and the Arrow type each becomes ("int64", "float64", "string").
TYPES = {"INTEGER": "int64", "REAL": "float64", "FLOAT": "float64", "TEXT": "string", "": "string"}


def arrow_type(declared: str) -> str:
    """The Arrow type of a column of this declared SQLite type (unknown types: strings)."""
    return TYPES.get(declared.upper(), "string")


def day_of(started_at: str | None) -> str:
    """The ``day`` partition of a session that started at ``started_at`` (an ISO time)."""
    if not started_at or len(started_at) < 10:
        return NULL_PART
    return started_at[:10]


def part_value(value: str | None) -> str:
    """A partition value as a path segment: no separators, no dots-only names, NULL as Hive
    writes it (host names are the only values that come from outside)."""
    if not value:
        return NULL_PART
    clean = "".join(c if c.isalnum() or c in "-_." else "_" for c in value)
    return clean if clean.strip(".") else NULL_PART


def partition_dir(out: Path, table: str, day: str, host: str) -> Path:
    return out / table / f"day={day}" / f"host={part_value(host)}"


def host_dir(out: Path, table: str, host: str) -> Path:
    return out / table / f"host={part_value(host)}"
