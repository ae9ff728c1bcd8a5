"""The dashboard as a person uses it: a real `agent-ledger serve`, Debian's chromium, Playwright.

One server and one browser for the module. Every test fails on a JavaScript error or a console
error, on a Content-Security-Policy violation (`agent-ledger serve` sends the policy), and on any
request that leaves 127.0.0.1 (the dashboard must work offline). Screenshots
of each page go to tests/screenshots/. The overview of the bundled sample_ledgers/ (what
scripts/demo serves) is the README's screenshot, docs/images/overview.png: it is rewritten only
with AGENT_LEDGER_UPDATE_SCREENSHOT=1 (or when it is missing), so a test run leaves the tree
clean; when the page no longer looks the same, the test says so in a warning.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from datasette.utils import tilde_encode
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from ledger.cli import cli
from tests import dashboard_data as data
from tests.dashboard import bidi_data, spend_data
from tests.helpers import ROOT, SAMPLES, serving
from tests.hosts import OVERLAPPING, host_dbs, merge_into

CHROMIUM = Path("/usr/bin/chromium")
#: A name another site controls, made to resolve to 127.0.0.1 as DNS rebinding would.
REBOUND = "rebound.example"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1",
]
#: Every Content-Security-Policy violation becomes a console error, which fails the test.
REPORT_CSP = """
document.addEventListener("securitypolicyviolation", (e) => {
  console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI} ${e.sample}`);
});
"""
SCREENSHOTS = Path(__file__).parent.parent / "screenshots"
README_SCREENSHOT = ROOT / "docs" / "images" / "overview.png"
UPDATE_SCREENSHOT = "AGENT_LEDGER_UPDATE_SCREENSHOT"


def serve_built(
    factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]
) -> Iterator[str]:
    """A module's server of the database ``build`` makes in a folder of its own."""
    with serving(build(factory.mktemp(name)), factory.getbasetemp() / f"serve-{name}.log") as base:
        yield base


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard test database: the samples, hostile text and a long session."""
    yield from serve_built(tmp_path_factory, "browser", data.build)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.exists(), "Debian's chromium is missing: apt-get install chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Watch:
    """What a page did that it must not: script errors, console errors, requests elsewhere."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.errors: list[str] = []
        self.external: list[str] = []
        self.dialogs: list[str] = []

    def attach(self, context: BrowserContext) -> None:
        context.add_init_script(REPORT_CSP)

        def route(r):  # noqa: ANN001 - playwright's Route
            if r.request.url.startswith(self.base):
                r.continue_()
            else:
                self.external.append(r.request.url)
                r.abort()

        context.route("**/*", route)

    def page(self, page: Page) -> Page:
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))

        def dialog(d):  # noqa: ANN001 - playwright's Dialog
            self.dialogs.append(d.message)
            d.dismiss()

        page.on("dialog", dialog)
        return page


@pytest.fixture
def watch(server: str) -> Watch:
    return Watch(server)


@pytest.fixture
def page(browser: Browser, server: str, watch: Watch) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=server)
    watch.attach(context)
    page = watch.page(context.new_page())
    yield page
    context.close()
    assert watch.errors == []
    assert watch.external == []
    assert watch.dialogs == []


def shoot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def charts_drawn(page: Page, count: int) -> None:
    expect(page.locator("canvas[data-drawn=true]")).to_have_count(count)


def session_url(session_id: str) -> str:
    return f"/ledger/-/sessions/{tilde_encode(session_id)}"


def test_overview_shows_where_loops_ran_away(page: Page) -> None:
    page.goto("/ledger/-/overview")
    expect(page.locator("h1")).to_have_text("Overview")
    charts_drawn(page, 3)
    cards = page.locator(".ledger-cards")
    expect(cards).to_contain_text("18 sessions")
    expect(cards).to_contain_text("3 retry storms")
    expect(cards).to_contain_text("4 unknown vendor strings")
    expect(page.locator("#paid-path")).to_contain_text("bugfix")
    badge = page.locator("#by-class .ledger-badge", has_text="retry_near_ceiling").first
    expect(badge).to_have_attribute("title", re.compile("Safe action: Do not retry"))
    shoot(page, "overview")


def test_follow_a_retry_storm_to_the_step_where_the_session_stopped(page: Page) -> None:
    page.goto("/ledger/-/overview")
    page.locator("#top-retry-storms a.ledger-session").first.click()
    expect(page).to_have_url(re.compile(r"/ledger/-/sessions/0903fa030c63-4\?at=3#step-3$"))
    expect(page.locator("h1")).to_have_text("Session 0903fa030c63-4")
    stop = page.locator("tr.ledger-stop")
    expect(stop).to_have_attribute("id", "step-7")
    expect(stop.locator(".ledger-action")).to_have_text("retry")
    expect(stop).to_contain_text("steps 7 / 8")
    expect(page.locator("tr.ledger-stop-note")).to_contain_text(
        "The budget stopped here: retry_near_ceiling"
    )
    expect(page.locator("tr.ledger-stop-note")).to_contain_text("Do not retry; raise")
    expect(page.locator("#step-3")).to_have_class(re.compile("ledger-in-retry-storm"))
    expect(page.locator(".ledger-stop-card")).to_contain_text("Fail closed if missing")
    expect(page.locator(".ledger-gauges")).to_contain_text("steps 7 / 8")
    charts_drawn(page, 1)
    shoot(page, "session-retry-storm")


def test_steps_after_the_stop_are_greyed(page: Page) -> None:
    page.goto(session_url("811be5e93b95"))
    expect(page.locator("tr.ledger-after-stop")).to_have_count(2)
    opacity = page.locator("#step-13 td").first.evaluate("td => getComputedStyle(td).opacity")
    assert float(opacity) < 1
    expect(page.locator("#step-12")).to_contain_text("rounds 12 / 12")
    shoot(page, "session-max-rounds")


@pytest.mark.parametrize(
    ("path", "name", "text", "charts"),
    [
        ("/ledger/-/retry-storms", "retry-storms", "blocked near the step ceiling", 1),
        ("/ledger/-/no-progress", "no-progress", "OperationalError: no such column", 0),
        ("/ledger/-/unknown-vendors", "unknown-vendors", "policy_hidden_v3", 0),
        ("/ledger/-/overview?task_class=docs", "overview-docs", "have no timestamp", 2),
        ("/ledger/steps?session_id=bf-0005", "steps-table", "no_progress", 0),
        ("/ledger/sessions", "sessions-table", "max_rounds", 0),
    ],
)
def test_each_page(page: Page, path: str, name: str, text: str, charts: int) -> None:
    page.goto(path)
    expect(page.locator("section.content")).to_contain_text(text)
    charts_drawn(page, charts)
    shoot(page, name)


def test_the_menu_reaches_every_page(page: Page) -> None:
    page.goto("/")
    page.locator("details.nav-menu summary").click()
    page.get_by_role("link", name="Ledger: Retry storms").click()
    expect(page.locator("h1")).to_have_text("Retry storms")
    for title in ("No-progress runs", "Unknown vendor stops and tools", "Overview"):
        page.locator(".ledger-tabs").get_by_role("link", name=title).click()
        expect(page.locator("h1")).to_have_text(title)


def test_filters_make_a_shareable_link(page: Page, browser: Browser, server: str) -> None:
    page.goto("/ledger/-/overview")
    hosts = page.locator("select[name=host] option")
    expect(hosts).to_have_text(["any", socket.gethostname()])  # the one host it was ingested on
    page.locator("select[name=task_class]").select_option("docs")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(f"{server}/ledger/-/overview?task_class=docs")
    expect(page.locator(".ledger-cards")).to_contain_text("5 sessions")
    page.get_by_role("link", name="Retry storms").first.click()
    expect(page).to_have_url(f"{server}/ledger/-/retry-storms?task_class=docs")
    expect(page.locator("table.ledger-table tbody tr")).to_have_count(1)


def test_the_vendor_map_entry_copies(page: Page, browser: Browser) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto("/ledger/-/unknown-vendors")
    row = page.locator("tr.ledger-vendor", has_text="policy_hidden_v3")
    row.get_by_role("button", name="Copy").click()
    expect(row.get_by_role("button")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith('"policy_hidden_v3" = "unknown_vendor"  # choose: task_complete')


HOSTILE = [
    "/ledger/-/overview",
    "/ledger/-/retry-storms",
    "/ledger/-/no-progress",
    "/ledger/-/unknown-vendors",
    session_url(data.XSS_SESSION),
    session_url("xss-2"),
    "/ledger/steps?session_id__startswith=xss",
    "/ledger/incidents?kind=unknown_vendor",
    "/ledger/sessions?task_class__contains=evil",
]


def test_hostile_ledger_text_is_shown_and_never_runs(page: Page) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    for n, path in enumerate(HOSTILE):
        page.goto(path)
        page.wait_for_load_state("load")
        hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
        assert [h for h in hrefs if not h.startswith(("http://", "https://"))] == [], path
        assert page.evaluate("window.__pwned") is None, path
        page.screenshot(path=str(SCREENSHOTS / f"hostile-{n}.png"))
    page.goto("/ledger/-/unknown-vendors")
    for payload in (data.SCRIPT, data.SVG, data.JS_URL):
        expect(page.locator("code.ledger-raw", has_text=payload)).to_have_count(1)
    page.goto(session_url(data.XSS_SESSION))
    expect(page.locator("h1")).to_contain_text(data.IMG)
    expect(page.locator("#step-1")).to_contain_text(data.SCRIPT)
    page.locator(".ledger-incidents a").first.click()
    assert page.evaluate("window.__pwned") is None


# --- security headers, hosts, direction controls --------------------------------------------


def test_the_pages_run_under_the_content_security_policy(page: Page) -> None:
    for path in ("/ledger/-/overview", session_url("0903fa030c63-4"), "/ledger/sessions",
                 "/ledger?sql=select+1"):
        response = page.goto(path)
        assert response is not None
        headers = response.headers
        assert "script-src 'self' 'sha256-" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
    page.goto("/ledger/-/overview")
    charts_drawn(page, 3)
    page.goto(session_url("0903fa030c63-4"))
    charts_drawn(page, 1)


def test_a_script_injected_into_a_page_is_refused(browser: Browser, server: str) -> None:
    context = browser.new_context(base_url=server)
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda m: "CSP violation" in m.text and violations.append(m.text))
    context.add_init_script(REPORT_CSP)
    try:
        page.goto("/ledger/-/overview")
        page.evaluate("""() => {
            const s = document.createElement("script");
            s.textContent = "window.__pwned = 'inline'";
            document.body.appendChild(s);
        }""")
        page.wait_for_timeout(200)
        assert page.evaluate("window.__pwned") is None
        assert any("script-src" in v for v in violations), violations
    finally:
        context.close()


def test_a_page_reached_through_a_foreign_name_is_refused(browser: Browser, server: str) -> None:
    """DNS rebinding: a site's own name resolves to 127.0.0.1; the server refuses the Host."""
    port = server.rsplit(":", 1)[1]
    context = browser.new_context()
    page = context.new_page()
    try:
        response = page.goto(f"http://{REBOUND}:{port}/ledger/-/overview")
        assert response is not None and response.status == 400
        expect(page.locator("body")).to_contain_text(f"does not answer to the host '{REBOUND}")
        assert "Overview" not in page.content()
        response = page.goto(f"http://localhost:{port}/ledger/-/overview")
        assert response is not None and response.status == 200
    finally:
        context.close()


@contextmanager
def watched_page(browser: Browser, base: str) -> Iterator[Page]:
    """A page of a server of its own, failing as the ``page`` fixture does."""
    watch = Watch(base)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=base)
    watch.attach(context)
    try:
        yield watch.page(context.new_page())
    finally:
        context.close()
    assert watch.errors == [] and watch.external == [] and watch.dialogs == []


@pytest.fixture(scope="module")
def bidi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_built(tmp_path_factory, "bidi", bidi_data.build)


def test_direction_controls_are_shown_never_applied(browser: Browser, bidi_server: str) -> None:
    with watched_page(browser, bidi_server) as page:
        for path in ("/ledger/-/unknown-vendors", session_url(bidi_data.SESSION),
                     "/ledger/incidents", "/ledger/sessions"):
            page.goto(path)
            text = page.locator("section.content").inner_text()
            assert "invoice<U+202E>txt.exe" in text or "bidi<U+202E>-1" in text, path
            assert "\u202e" not in text and "\u2066" not in text, path
        page.goto(session_url(bidi_data.SESSION))
        expect(page.locator("h1")).to_contain_text("bidi<U+202E>-1")
        expect(page.locator("section.content")).to_contain_text("<U+2066>tool<U+2069>")
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "bidi-session.png"), full_page=True)


# --- the README's screenshot ---------------------------------------------------------------


@pytest.fixture(scope="module")
def samples_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """What scripts/demo serves: sample_ledgers/ alone, ingested into ledger.db."""
    from click.testing import CliRunner

    db_path = tmp_path_factory.mktemp("samples") / "ledger.db"
    result = CliRunner().invoke(cli, ["ingest", str(db_path), str(SAMPLES)])
    assert result.exit_code == 0, result.output
    with serving(db_path, tmp_path_factory.getbasetemp() / "serve-samples.log") as base:
        yield base


def test_the_readme_screenshot_of_the_samples_overview(
    browser: Browser, samples_server: str
) -> None:
    with watched_page(browser, samples_server) as page:
        page.goto("/ledger/-/overview")
        expect(page.locator("h1")).to_have_text("Overview")
        charts_drawn(page, 3)
        expect(page.locator(".ledger-cards")).to_contain_text("15 sessions")
        page.wait_for_timeout(1500)  # Chart.js animates for a second
        SCREENSHOTS.mkdir(exist_ok=True)
        shot = SCREENSHOTS / "overview-samples.png"
        page.screenshot(path=str(shot))  # the first screen, 1280x900
    if os.environ.get(UPDATE_SCREENSHOT) == "1" or not README_SCREENSHOT.exists():
        README_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, README_SCREENSHOT)
    elif shot.read_bytes() != README_SCREENSHOT.read_bytes():
        warnings.warn(
            f"the overview no longer looks like {README_SCREENSHOT.relative_to(ROOT)} (see {shot});"
            f" if the change is meant, run {UPDATE_SCREENSHOT}=1 .venv/bin/python -m pytest"
            " tests/dashboard/test_browser.py -k readme_screenshot and commit the image",
            stacklevel=1,
        )


def merged_hosts(folder: Path) -> Path:
    """Three hosts' ledgers (two with the same file) merged into one database."""
    target = folder / "ledger.db"
    merge_into(target, host_dbs(folder, OVERLAPPING))
    return target


@pytest.fixture(scope="module")
def hosts_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_built(tmp_path_factory, "hosts", merged_hosts)


def test_the_host_filter_is_a_choice_of_the_merged_hosts(
    browser: Browser, hosts_server: str
) -> None:
    with watched_page(browser, hosts_server) as page:
        page.goto("/ledger/-/overview")
        host = page.locator("select[name=host]")
        expect(host.locator("option")).to_have_text(["any", "host-a", "host-b", "host-c"])
        host.select_option("host-b")
        page.get_by_role("button", name="Apply").click()
        expect(page).to_have_url(f"{hosts_server}/ledger/-/overview?host=host-b")
        expect(page.locator(".ledger-cards").first).to_contain_text("4 sessions")
        page.get_by_role("link", name="No-progress runs").first.click()
        expect(page).to_have_url(f"{hosts_server}/ledger/-/no-progress?host=host-b")
        expect(page.locator("select[name=host]")).to_have_value("host-b")
        shoot(page, "host-filter")


@pytest.fixture(scope="module")
def spend_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_built(tmp_path_factory, "spend", spend_data.build)


def test_the_spend_views(browser: Browser, spend_server: str) -> None:
    """The overview's spend (total, per class with its share, over time), the paid path's
    share, a run's cost, and the timeline's spend against max_cost, drawn without an error."""
    with watched_page(browser, spend_server) as page:
        page.goto("/ledger/-/overview")
        spend = page.locator("#spend")
        expect(spend.locator(".ledger-spend-total")).to_have_text("$2.00")
        expect(spend).to_contain_text("2 of 3 sessions priced, in USD")
        expect(spend).to_contain_text("$0.50 after the budget's stop")
        expect(spend.locator("table.ledger-spend tr", has_text="refactor")).to_contain_text(
            "75.0%")
        expect(spend.locator("canvas[data-ledger-chart^=spend][data-drawn=true]")).to_have_count(2)
        expect(page.locator("#paid-path tr", has_text="refactor")).to_contain_text("75.0%")
        shoot(page, "overview-spend")
        page.goto("/ledger/-/no-progress")
        expect(page.locator("tr.ledger-no-progress .ledger-cost")).to_have_text("$1.00")
        page.goto(session_url(spend_data.STOPPED))
        expect(page.locator(".ledger-gauges")).to_contain_text("cost $1.00 / $1.00")
        expect(page.locator(".ledger-facts")).to_contain_text("$1.50 of a max_cost of $1.00")
        charts_drawn(page, 1)
        shoot(page, "session-max-cost")


def _hook_ledger(folder: Path) -> Path:
    """A database the live brake wrote (a real transcript driven call by call, under
    max_steps=3, so calls are denied), then ``ingest`` of the transcript."""
    from ledger.core.budget import Budget
    from ledger.ingest.ingester import ingest
    from ledger.ingest.options import Options
    from tests.helpers import REAL_LOGS
    from tests.live.test_hook import drive

    options = Options(budget=Budget(max_steps=3))
    transcript, _ = drive(REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl",
                          options, folder)
    ingest(folder / "ledger.db", [transcript], options)
    return folder / "ledger.db"


@pytest.fixture(scope="module")
def hook_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve_built(tmp_path_factory, "hook", _hook_ledger)


def test_live_sessions_lead_to_the_denied_calls(browser: Browser, hook_server: str) -> None:
    """The overview lists the sessions the hook is watching, with their denied calls; the
    link opens the timeline, where each denied call is marked with the hook's reason."""
    with watched_page(browser, hook_server) as page:
        page.goto("/ledger/-/overview")
        live = page.locator("#live-sessions tr.ledger-live-denied").first
        expect(live).to_contain_text("deny")
        expect(live.locator(".ledger-live-counters")).to_contain_text("steps")
        shoot(page, "overview-live-sessions")
        live.locator("a").first.click()
        expect(page).to_have_url(re.compile(r"/ledger/-/sessions/.+\?at=\d+#step-\d+$"))
        denied = page.locator(".ledger-tag-denied", has_text="denied by the hook")
        expect(denied.first).to_be_visible()
        expect(denied.first).to_have_attribute("title", re.compile("agent-ledger budget stop"))
        shoot(page, "session-denied-by-the-hook")
