"""What a browser may run and who may ask: security headers, the Host allow-list, and
direction controls in ledger text shown, never applied."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from datasette.app import Datasette
from jinja2 import DictLoader, Environment
from markupsafe import Markup

from ledger.cli import cli
from ledger.views.serve import (
    LOOPBACK_HOSTS,
    SETTINGS,
    allowed_hosts,
    is_loopback,
    merge,
    metadata_for,
    with_hosts,
)
from ledger_dashboard.cells import DIRECTION_CONTROLS, visible, visible_output
from ledger_dashboard.security import host_allowed, script_hashes
from tests.dashboard import bidi_data
from tests.dashboard.bidi_data import BIDI, ISOLATE


def sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# --- direction controls --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", "plain"),
        (BIDI, "invoice<U+202E>txt.exe"),
        (ISOLATE, "<U+2066>tool<U+2069>"),
        ("\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u2067\u2068",
         "<U+200E><U+200F><U+061C><U+202A><U+202B><U+202C><U+202D><U+2067><U+2068>"),
        ("שלום مرحبا \u200d👩\u200d💻", "שלום مرحبا \u200d👩\u200d💻"),  # letters, joiners stay
    ],
)
def test_direction_controls_are_written_out(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_every_control_of_the_list_is_written_out() -> None:
    assert len(DIRECTION_CONTROLS) == 12
    for code in DIRECTION_CONTROLS:
        assert visible(chr(code)) == f"<U+{code:04X}>"


def test_html_keeps_its_markup_and_shows_the_controls() -> None:
    built = Markup('<a title="{}">{}</a>').format(BIDI, ISOLATE)
    shown = visible_output(built)
    assert isinstance(shown, Markup)
    assert shown == Markup(
        '<a title="invoice&lt;U+202E&gt;txt.exe">&lt;U+2066&gt;tool&lt;U+2069&gt;</a>'
    )
    assert visible_output(7) == 7 and visible_output(None) is None


@pytest.fixture
def bidi_db(tmp_path: Path) -> Path:
    return bidi_data.build(tmp_path)


def served(db_path: Path, bind: str = "127.0.0.1", extra: dict[str, Any] | None = None,
           hosts: tuple[str, ...] = ()) -> Datasette:
    metadata = with_hosts(metadata_for(db_path), allowed_hosts(bind, hosts))
    return Datasette(files=[str(db_path)], metadata=merge(metadata, extra or {}), settings=SETTINGS)


def raw_controls(text: str) -> list[str]:
    return [f"U+{c:04X}" for c in DIRECTION_CONTROLS if chr(c) in text]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    [
        "/ledger/-/overview", "/ledger/-/unknown-vendors", "/ledger/-/sessions/bidi~E2~80~AE-1",
        "/ledger/sessions", "/ledger/steps", "/ledger/incidents", "/ledger/unknown_vendor_stops",
        "/ledger/sessions/bidi~E2~80~AE-1",
    ],
)
async def test_pages_show_direction_controls_and_never_apply_them(
    bidi_db: Path, path: str
) -> None:
    response = await served(bidi_db).client.get(path)
    assert response.status_code == 200
    assert raw_controls(response.text) == []
    assert "&lt;U+202E&gt;" in response.text


@pytest.mark.asyncio
async def test_the_json_twin_keeps_the_text_as_it_is(bidi_db: Path) -> None:
    found = (await served(bidi_db).client.get("/ledger/-/unknown-vendors.json")).json()
    assert [r["vendor_stop"] for r in found["rows"]] == [BIDI]


# --- headers -------------------------------------------------------------------------------


def test_script_hashes_cover_each_inline_script_the_templates_can_print() -> None:
    env = Environment(loader=DictLoader({
        "a.html": "<p><script>go();</script>",
        "b.html": "<script>ALLOW = {{ datasette_allow_facet }};</script>",
        "c.html": "<script>{{ other }}</script><script>{% if x %}y{% endif %}</script>",
        "d.html": '<script src="x.js"></script><script type="application/json">{}</script>',
    }))
    assert script_hashes(env) == sorted([sha("go();"), sha("ALLOW = true;"), sha("ALLOW = false;")])


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    ["/ledger/-/overview", "/ledger/-/sessions/0903fa030c63-4.json", "/ledger/sessions",
     "/-/static-plugins/agent-ledger/ledger-dashboard.js", "/nowhere", "/ledger/sessions?_sort=x",
     "/ledger/sessions.json?_timelimit=x"],
)
async def test_every_response_carries_the_security_headers(sample_db: Path, path: str) -> None:
    response = await served(sample_db).client.get(path)
    headers = response.headers
    csp = dict(part.strip().split(" ", 1) for part in headers["content-security-policy"].split(";"))
    assert csp["default-src"] == "'none'"
    assert csp["frame-ancestors"] == "'none'"
    scripts = csp["script-src"].split()
    assert scripts[0] == "'self'" and all(s.startswith("'sha256-") for s in scripts[1:])
    assert "'unsafe-inline'" not in scripts and "'unsafe-eval'" not in scripts
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] in ("same-origin", "no-referrer")  # Datasette's own kept


@pytest.mark.asyncio
async def test_datasettes_own_inline_scripts_are_allowed_by_hash(sample_db: Path) -> None:
    response = await served(sample_db).client.get("/ledger/sessions")
    csp = response.headers["content-security-policy"]
    assert sha("DATASETTE_ALLOW_FACET = true;") in csp
    assert "document.body.addEventListener('click'" in response.text  # _close_open_menus.html


@pytest.mark.asyncio
async def test_without_the_setting_datasette_is_left_as_it_is(sample_db: Path) -> None:
    ds = Datasette(files=[str(sample_db)])  # plain `datasette ledger.db`: the plugin loads
    response = await ds.client.get("/ledger/sessions", headers={"Host": "anywhere.example"})
    assert response.status_code == 200
    assert "content-security-policy" not in response.headers


# --- hosts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bind", "extra", "hosts"),
    [
        ("127.0.0.1", (), list(LOOPBACK_HOSTS)),
        ("127.0.0.2", (), list(LOOPBACK_HOSTS)),
        ("::1", ("ledger.example.com",), [*LOOPBACK_HOSTS, "ledger.example.com"]),
        ("localhost", (), list(LOOPBACK_HOSTS)),
        ("0.0.0.0", (), None),
        ("::", (), None),
        ("10.0.0.5", ("ledger.lan",), ["ledger.lan"]),
    ],
)
def test_which_hosts_a_bind_answers(
    bind: str, extra: tuple[str, ...], hosts: list[str] | None
) -> None:
    assert allowed_hosts(bind, extra) == hosts
    assert is_loopback(bind) == (hosts is not None and hosts[:3] == list(LOOPBACK_HOSTS))


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1", True), ("127.0.0.1:8001", True), ("localhost", True),
        ("LocalHost:80", True), ("[::1]:8001", True), ("[::1]", True),
        ("evil.example", False), ("127.0.0.1.evil.example", False), ("localhost.evil:8001", False),
        ("evil.example:127.0.0.1", False), ("", False), (None, False), ("[::2]:8001", False),
    ],
)
def test_host_headers_against_the_loopback_names(host: str | None, allowed: bool) -> None:
    assert host_allowed(host, list(LOOPBACK_HOSTS)) is allowed


def test_a_star_allows_any_host() -> None:
    assert host_allowed("anything.example", ["*"])


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("host", "hosts", "status"),
    [
        ("localhost", (), 200),
        ("127.0.0.1:8001", (), 200),
        ("evil.example", (), 400),
        ("attacker.example:8001", (), 400),
        ("ledger.example.com", ("ledger.example.com",), 200),
        ("evil.example", ("ledger.example.com",), 400),
    ],
)
async def test_a_loopback_server_refuses_foreign_hosts(
    sample_db: Path, host: str, hosts: tuple[str, ...], status: int
) -> None:
    ds = served(sample_db, hosts=hosts)
    for path in ("/ledger/-/overview.json", "/ledger/sessions.json", "/-/static/app.css"):
        response = await ds.client.get(path, headers={"Host": host})
        assert response.status_code == status, path
        if status == 400:
            assert f"does not answer to the host {host!r}" in response.text
            assert "--allow-host" in response.text


@pytest.mark.asyncio
async def test_a_server_bound_to_every_address_answers_any_host(sample_db: Path) -> None:
    response = await served(sample_db, bind="0.0.0.0").client.get(
        "/ledger/-/overview.json", headers={"Host": "192.0.2.7:8001"})
    assert response.status_code == 200


def test_hosts_set_in_a_metadata_file_are_kept() -> None:
    metadata = {"plugins": {"ledger_dashboard": {"allowed_hosts": ["proxy.lan"]}}}
    merged = with_hosts(metadata, allowed_hosts("127.0.0.1"))
    assert merged["plugins"]["ledger_dashboard"]["allowed_hosts"] == [
        "proxy.lan", *LOOPBACK_HOSTS]


@pytest.mark.asyncio
async def test_a_bad_allowed_hosts_setting_stops_the_server(sample_db: Path) -> None:
    ds = served(sample_db, extra={"plugins": {"ledger_dashboard": {"allowed_hosts": "x"}}})
    with pytest.raises(ValueError, match="allowed_hosts must be a list of host names"):
        await ds.invoke_startup()


def test_serve_allow_host_reaches_the_plugin(sample_db: Path) -> None:
    args = ["serve", str(sample_db), "--allow-host", "ledger.example.com", "--allow-host", "b.lan",
            "--get", "/-/metadata.json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert '"allowed_hosts": ["127.0.0.1", "localhost", "[::1]", "ledger.example.com", "b.lan"]' \
        in result.output
