"""An installed distribution's version, read from its ``.dist-info`` folder's name."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from ledger.core.installed import installed_version


@pytest.mark.parametrize(
    ("module", "dist"),
    [("genai_prices", "genai-prices"), ("kingfisher_sdk", "kingfisher-secret-scanner"),
     ("click", "click"), ("msgspec", "msgspec")],
)
def test_the_version_importlib_metadata_gives(module: str, dist: str) -> None:
    assert installed_version(module, dist) == version(dist)


@pytest.mark.parametrize(("module", "dist"), [("no_such_module", "x"), ("json", "json")])
def test_none_when_it_cannot_be_told(module: str, dist: str) -> None:
    assert installed_version(module, dist) is None
