"""Memory handed back before forking workers (ledger/ingest/memory.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ledger.ingest import memory

LIB = "/venv/kingfisher_sdk/_native.abi3.so"


def _mapping(start: int, perms: str, name: str, rss: int, dirty: int = 0,
             anonymous: int = 0) -> str:
    return (f"{start:x}-{start + 0x1000:x} {perms} 00000000 08:01 42    {name}\n"
            f"Size:                  4 kB\nRss:            {rss:8} kB\n"
            f"Private_Dirty:  {dirty:8} kB\nAnonymous:      {anonymous:8} kB\n"
            "VmFlags: rd mr mw me\n")


@pytest.mark.parametrize(("mapping", "dropped"), [
    (_mapping(0x1000, "r--p", LIB, 4), [(0x1000, 0x2000, 4096)]),  # rule texts, read
    (_mapping(0x1000, "r-xp", LIB, 0), [(0x1000, 0x2000, 0)]),  # code, not resident
    (_mapping(0x1000, "r--p", LIB, 4, dirty=4), []),  # relocated, then made read only
    (_mapping(0x1000, "r--p", LIB, 4, anonymous=4), []),  # a page copied on write
    (_mapping(0x1000, "rw-p", LIB, 4), []),  # its data
    (_mapping(0x1000, "r--p", "/usr/lib/libc.so.6", 4), []),  # another library
    (_mapping(0x1000, "rw-p", "", 4), []),  # anonymous memory
], ids=["read", "code", "relocated", "copied", "writable", "other file", "anonymous"])
def test_only_the_librarys_mappings_never_written_are_given_back(
    mapping: str, dropped: list[tuple[int, int, int]]
) -> None:
    """Each case between two other mappings of the library, which are dropped (the last
    one closes at the end of the text)."""
    smaps = _mapping(0x0, "r--p", LIB, 4) + mapping + _mapping(0x9000, "r-xp", LIB, 8)
    assert memory.read_only_mappings(smaps, LIB) == [
        (0x0, 0x1000, 4096), *dropped, (0x9000, 0xA000, 8192)]


#: A fresh process loads the rule set, gives back what loading left, and still finds a
#: secret: the pages of the library it dropped, and how much of it was resident before and
#: after (bytes).
GIVE_BACK = """
import os
from pathlib import Path
from ledger.core import secret_rules
from ledger.ingest import memory
secret_rules.load()
path = os.path.realpath(secret_rules.engine_file())
def resident():
    smaps = Path("/proc/self/smaps").read_text()
    return sum(rss for _, _, rss in memory.read_only_mappings(smaps, path))
before = resident()
dropped = memory.give_back(path)
after = resident()
found = secret_rules.secret_spans("key ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
print(before, dropped, after, found)
"""


@pytest.mark.skipif(memory._libc() is None, reason="malloc_trim and madvise: Linux, glibc")
def test_giving_back_the_rule_engines_loading_pages_keeps_its_scans() -> None:
    """Loading reads some 10 MB of the engine's library that no scan needs again; after
    they are dropped, a scan maps back the little it uses and finds what it found."""
    done = subprocess.run([sys.executable, "-c", GIVE_BACK], capture_output=True, text=True,
                          check=True)
    before, dropped, after, found = done.stdout.strip().split(maxsplit=3)
    assert int(dropped) == int(before) > 5 << 20
    assert int(after) < int(before) / 2
    assert found == "[(4, 44, 'github-pat')]"
