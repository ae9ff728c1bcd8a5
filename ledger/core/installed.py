"""The version of an installed distribution, read without :mod:`importlib.metadata`.

Importing :mod:`importlib.metadata` and searching every path entry costs a process tens of
milliseconds; the live hook, started for every tool call, reads the version from the name of
the ``.dist-info`` folder beside the distribution's package instead.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path


def installed_version(module: str, dist: str) -> str | None:
    """The version of ``dist`` (whose top-level package is ``module``), from the one
    ``<dist>-<version>.dist-info`` folder beside the package; None if it cannot be told."""
    spec = find_spec(module)
    if spec is None or spec.origin is None:
        return None
    name = dist.replace("-", "_").lower()
    found = [
        p.name[len(name) + 1 : -len(".dist-info")]
        for p in Path(spec.origin).parent.parent.glob("*.dist-info")
        if p.name.lower().startswith(name + "-")
    ]
    return found[0] if len(found) == 1 else None
