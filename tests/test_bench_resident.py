"""The bench's resident servers (bench/resident.py) are the ones their clients find."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import resident  # noqa: E402


def client_socket(db: Path, env: dict[str, str]) -> str:
    """Where the client looks, run as the console script runs it (no current folder on the
    path: a script's folder is, and it holds no package)."""
    code = ("from ledger.cli import resident_client as r; "
            f"print(r.socket_path(r.settings({str(db)!r})))")
    return subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_socket_is_the_clients_from_a_folder_that_holds_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a folder with a ``ledger`` package of its own (a checkout the bench runs from),
    the socket is still the installed package's, which the client finds."""
    decoy = tmp_path / "checkout" / "ledger"
    (decoy / "cli").mkdir(parents=True)
    (decoy / "__init__.py").write_text("")
    (decoy / "cli" / "__init__.py").write_text("")
    installed = Path(resident.__file__).resolve().parent.parent / "ledger" / "cli"
    (decoy / "cli" / "resident_client.py").write_text(
        (installed / "resident_client.py").read_text())
    monkeypatch.chdir(decoy.parent)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    # The package this test imports stands for the installed one (named by its folder on
    # the path, as the bench's install names its site-packages), the decoy for the checkout.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and Path(p, "ledger").is_dir())
    db = tmp_path / "ledger.db"
    assert resident.socket_of(Path(sys.executable), db, env) == client_socket(db, env)
