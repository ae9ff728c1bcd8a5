"""A re-ingest costs what its new lines cost: a file read to its end, with its recorded size
and modification time, under the same fold settings, is counted unchanged without being
opened (ledger.ingest.unchanged); anything else about it is the claim's to tell, as before."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.core.budget import Budget
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import refuse_to_open

ROOT = Path(__file__).resolve().parents[2]
LINE = '{"session": "s1", "type": "round"}\n'


def _grow(path: Path) -> None:
    with path.open("a") as f:
        f.write('{"session": "s2", "type": "round"}\n')


def _touch(path: Path) -> None:
    os.utime(path, (1.0, 1.0))


def _same_size_other_bytes(path: Path) -> None:
    stat = path.stat()
    path.write_text(LINE.replace("s1", "s3"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000))  # 10 us later


@pytest.mark.parametrize(("change", "options", "counts"), [
    # what happens to the file, the options of the second ingest: (new, grown, unchanged)
    (None, Options(), (0, 0, 1)),
    (_grow, Options(), (0, 1, 0)),
    (_touch, Options(), (0, 0, 1)),  # opened and claimed: the same bytes, so unchanged
    (_same_size_other_bytes, Options(), (1, 0, 0)),  # its first line changed: read again
    (None, Options(budget=Budget(max_rounds=3)), (1, 0, 0)),  # another fold: read again
])
# (The same size and modification time, to the file system's resolution, after a rewrite:
# taken as unchanged, as make and rsync take it. Logs are appended to, not rewritten.)
def test_a_second_ingest_counts_each_file_as_the_claim_would(
    tmp_path: Path, change: Callable[[Path], None] | None, options: Options,
    counts: tuple[int, int, int],
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(LINE)
    db = tmp_path / "l.db"
    ingest(db, [path])
    if change:
        change(path)
    summary = ingest(db, [path], options)
    assert (summary.new_files, summary.updated_files, summary.unchanged_files) == counts


def test_an_unchanged_file_is_not_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(LINE)
    db = tmp_path / "l.db"
    ingest(db, [path])
    refuse_to_open(monkeypatch, path)  # opening it would skip it with a note
    summary = ingest(db, [path])
    assert (summary.unchanged_files, summary.skipped, summary.notices) == (1, {}, [])


def test_sqlite_utils_is_imported_without_pandas_or_numpy(tmp_path: Path) -> None:
    for name in ("pandas", "numpy"):  # stand-ins that say when they are imported
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("FAKE = True\n")
    code = (
        "import sys\nimport ledger.db.connection\n"
        "assert not {'pandas', 'numpy'} & set(sys.modules), 'imported with sqlite-utils'\n"
        "import pandas, numpy\nprint(pandas.FAKE and numpy.FAKE)"  # and importable after
    )
    path = os.pathsep.join([str(tmp_path), str(ROOT), str(ROOT / "plugins")])
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")
