"""agent-ledger installed as a user installs it, for the stages that time whole commands.

A development checkout is an editable install (``pip install -e``): its path finder
(``__editable___agent_ledger_..._finder`` in site-packages) runs at every start of Python and
imports pathlib and more, some 15 ms of each command here, which a package installed from its
wheel does not pay. So the benchmark builds, once, a virtualenv under ``bench/data/`` with
the package installed from the working tree (``pip install --no-deps .``: a wheel built and
installed, its bytecode compiled, its console scripts written by pip) and the project
virtualenv's packages on its path for the dependencies (a ``.pth`` line, which adds that
folder without running its ``.pth`` files, so the editable finder stays out). It is built
again when the package's sources change (a digest of them names it).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What the wheel is built from.
SOURCES = ("pyproject.toml", "ledger", "plugins/ledger_dashboard")


def digest(root: Path = ROOT) -> str:
    """A digest of the package's sources (names and bytes), which names its install."""
    h = hashlib.sha256()
    for entry in SOURCES:
        path = root / entry
        files = [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for file in files:
            h.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def console_script(data: Path, name: str = "agent-ledger") -> Path:
    """The console script ``name`` of agent-ledger installed into ``data/installed-DIGEST``
    (built there first if it is not yet; older installs are removed)."""
    folder = data / f"installed-{digest()}"
    script = folder / "bin" / name
    if script.exists():
        return script
    for old in data.glob("installed-*"):
        shutil.rmtree(old, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True)
    deps = sysconfig.get_paths()["purelib"]  # this interpreter's: the project virtualenv's
    (Path(site.stdout.strip()) / "agent_ledger_deps.pth").write_text(deps + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                    "--no-deps", "--quiet", str(ROOT)], check=True)
    return script


if __name__ == "__main__":
    print(console_script(ROOT / "bench" / "data"))
