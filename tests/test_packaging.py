"""pyproject.toml ships every package and data folder (an editable install hides omissions)."""

from __future__ import annotations

import tomllib

from tests.helpers import ROOT


def setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_python_package_is_listed() -> None:
    listed = set(setuptools_config()["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "ledger").rglob("__init__.py")
    }
    found |= {
        "ledger_dashboard" + "".join(f".{p}" for p in init.parent.relative_to(
            ROOT / "plugins" / "ledger_dashboard").parts)
        for init in (ROOT / "plugins" / "ledger_dashboard").rglob("__init__.py")
    }
    assert found <= listed, found - listed


def test_every_data_folder_is_a_listed_package_with_its_files() -> None:
    config = setuptools_config()
    for package, folder in (
        ("ledger.schema", ROOT / "ledger" / "schema"),
        ("ledger.config", ROOT / "ledger" / "config"),  # action_classes.toml, the default map
        ("ledger_dashboard.templates", ROOT / "plugins" / "ledger_dashboard" / "templates"),
        ("ledger_dashboard.static", ROOT / "plugins" / "ledger_dashboard" / "static"),
    ):
        assert package in config["packages"]
        assert config["package-data"][package], package
        assert any(folder.iterdir()), folder
