"""The 39 real public logs of ``../shared/fixtures/real-agent-logs/more/`` (SOURCES.md there
says which file is which). They are not in the repository: a test that reads one is skipped,
saying so, when the folder is not beside it (CI has it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT

MORE = ROOT.parent / "shared" / "fixtures" / "real-agent-logs"


def more_log(kind: str, name: str) -> Path:
    """``more/<kind>/<name>``, or a skip when the folder is absent."""
    path = MORE / "more" / kind / name
    if not path.exists():
        pytest.skip(f"more/{kind}/{name}: ../shared/fixtures/real-agent-logs/more/ is not here")
    return path
