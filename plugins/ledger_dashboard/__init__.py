"""Datasette plugin for agent-ledger databases: the dashboard pages and self-explaining cells.

Loaded through the ``datasette`` entry point, so ``agent-ledger serve ledger.db`` and plain
``datasette ledger.db`` both find it. Hooks only; the pages are in ``pages``, the SQL in
``queries``, the cell rendering in ``cells``.
"""

from __future__ import annotations

import sqlite3
import weakref
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datasette import hookimpl
from datasette.utils import tilde_decode
from jinja2 import Environment

from . import cells, context, guard, pages, queries, security
from .filters import REASONS, FilterError, Filters

if TYPE_CHECKING:
    from datasette.app import Datasette

STATIC = Path(__file__).parent / "static"
STYLESHEET = "ledger-dashboard.css"
SCRIPTS = ("chart.umd.min.js", "ledger-dashboard.js")
CELL_COLUMNS = (
    cells.REASON_COLUMNS | cells.TOKEN_COLUMNS | cells.DURATION_COLUMNS | cells.HASH_COLUMNS
    | cells.SESSION_COLUMNS | {"reason", "stop_at", "key"}
)

#: Databases already seen to be ledger databases, per Datasette instance.
_LEDGERS: weakref.WeakKeyDictionary[Datasette, set[str]] = weakref.WeakKeyDictionary()


async def is_ledger(datasette: Datasette, database: str | None) -> bool:
    if database is None or database not in datasette.databases:
        return False
    known = _LEDGERS.setdefault(datasette, set())
    if database not in known and await queries.is_ledger(datasette.databases[database]):
        known.add(database)
    return database in known


async def ledger_databases(datasette: Datasette, actor: dict[str, Any] | None) -> list[str]:
    """Ledger databases the actor may see, in Datasette's order."""
    found = []
    for name in datasette.databases:
        if name == "_internal" or not await is_ledger(datasette, name):
            continue
        if await datasette.permission_allowed(actor, "view-database", name, default=True):
            found.append(name)
    return found


@cache
def static_name() -> str:
    """The name Datasette serves this package's ``static/`` under (the distribution's name
    for an entry-point plugin, e.g. ``agent-ledger``)."""
    from datasette.plugins import get_plugins

    for plugin in get_plugins():
        if plugin["static_path"] and Path(plugin["static_path"]) == STATIC:
            return str(plugin["name"])
    return "agent_ledger"


def static_url(datasette: Datasette, path: str) -> str:
    return datasette.urls.static_plugins(static_name(), path)


@hookimpl
def asgi_wrapper(datasette: Datasette) -> Any:
    return lambda app: security.wrap(datasette, guard.wrap(datasette, app))


@hookimpl
def startup(datasette: Datasette) -> None:
    security.settings(datasette)  # a bad allowed_hosts stops the server before it serves


@hookimpl(hookwrapper=True)
def handle_exception(datasette: Datasette, request: Any, exception: Exception) -> Any:
    """Datasette's own errors on bad input as the 4xx they are (see guard), on its usual
    error page; anything else goes on to Datasette's 500.

    A wrapper, not a plain hook: Datasette awaits every hook's answer, so its own handler
    would still treat the original exception as a 500 and print its traceback to the
    server's log for a request it answered 400. The wrapper replaces the answers of the
    hooks it wraps with the client error's page alone.
    """
    # Imported here: at import time it would run before Datasette registered its own hooks.
    from datasette.handle_exception import handle_exception as datasette_error_page

    error = guard.as_client_error(exception, request.url_vars if request else {})
    outcome = yield
    if error is not None:
        outcome.force_result([datasette_error_page(datasette, request, error)])


@hookimpl
def register_routes() -> list[tuple[str, Any]]:
    return pages.routes()


@hookimpl
def prepare_jinja2_environment(env: Environment) -> None:
    # Every value any page prints shows its direction controls (see cells.visible_output).
    env.finalize = cells.visible_output
    env.filters["ledger_badge"] = cells.badge
    env.filters["ledger_tokens"] = cells.tokens
    env.filters["ledger_duration"] = cells.duration
    env.filters["ledger_hash"] = cells.short_hash
    env.filters["ledger_int"] = cells.exact
    env.filters["ledger_usd"] = cells.money
    env.filters["ledger_share"] = cells.share


@hookimpl
def prepare_connection(conn: sqlite3.Connection, database: str, datasette: Datasette) -> None:
    """With ``read_only: true`` (as ``agent-ledger serve`` configures it), every connection to a
    database file refuses writes, the write connection included."""
    config = datasette.plugin_config(context.PLUGIN, database=database) or {}
    db = datasette.databases.get(database)
    if config.get("read_only") and db is not None and db.path:
        conn.execute("PRAGMA query_only = 1")


@hookimpl
def render_cell(
    row: Any, value: Any, column: str, table: str | None, database: str, datasette: Datasette
) -> Any:
    if column not in CELL_COLUMNS or value is None:
        return None

    async def inner() -> Any:
        if not await is_ledger(datasette, database):
            return None
        urls = context.Urls(datasette, database)
        return cells.render(row, value, column, table, urls.session)

    return inner()


@hookimpl
def extra_css_urls(datasette: Datasette) -> list[str]:
    return [static_url(datasette, STYLESHEET)]


@hookimpl
def extra_js_urls(view_name: str | None, datasette: Datasette) -> list[str]:
    if not (view_name or "").startswith("ledger-"):
        return []
    return [static_url(datasette, script) for script in SCRIPTS]


@hookimpl
def extra_template_vars(view_name: str | None, request: Any, datasette: Datasette) -> Any:
    """The dashboard's tabs (each keeping the current filters), for its own templates."""
    if not (view_name or "").startswith("ledger-") or request is None:
        return {}
    route = tilde_decode(request.url_vars.get("database", ""))
    database = datasette.get_database(route=route).name
    urls = context.Urls(datasette, database)
    try:
        query = Filters.from_args(request.args).query()
    except FilterError:
        query = ""
    return {
        "ledger_tabs": [
            {"slug": p.slug, "title": p.title, "href": urls.page(p.slug, query)}
            for p in context.PAGES
        ]
    }


@hookimpl
def menu_links(datasette: Datasette, actor: dict[str, Any] | None) -> Any:
    async def inner() -> list[dict[str, str]]:
        names = await ledger_databases(datasette, actor)
        links = []
        for name in names:
            urls = context.Urls(datasette, name)
            suffix = f" ({name})" if len(names) > 1 else ""
            links += [
                {"href": urls.page(p.slug), "label": f"Ledger: {p.title}{suffix}"}
                for p in context.PAGES
            ]
        return links

    return inner()


@hookimpl
def database_actions(datasette: Datasette, database: str) -> Any:
    async def inner() -> list[dict[str, str]]:
        if not await is_ledger(datasette, database):
            return []
        urls = context.Urls(datasette, database)
        return [
            {"href": urls.page(p.slug), "label": f"Dashboard: {p.title}"} for p in context.PAGES
        ]

    return inner()


#: The dashboard pages that show each table's rows.
TABLE_PAGES = {
    "sessions": ("overview",),
    "steps": ("overview",),
    "incidents": ("retry-storms", "no-progress", "unknown-vendors"),
    "stop_reasons": ("overview",),
}


@hookimpl
def table_actions(datasette: Datasette, database: str, table: str, request: Any) -> Any:
    """Links from a ledger table to its dashboard pages, keeping its exact-match filters on
    task class and stop reason (``?task_class=bugfix`` on the sessions table)."""
    if table not in TABLE_PAGES:
        return None

    async def inner() -> list[dict[str, str]]:
        if not await is_ledger(datasette, database):
            return []
        args = request.args if request is not None else {}
        carried = {
            name: args.get(name) or args.get(f"{name}__exact")
            for name in ("task_class", "stop_reason")
        }
        if carried["stop_reason"] not in REASONS:
            carried["stop_reason"] = None
        query = Filters(**carried).query()
        urls = context.Urls(datasette, database)
        return [
            {
                "href": urls.page(slug, query),
                "label": f"Dashboard: {context.PAGE_BY_SLUG[slug].title}",
            }
            for slug in TABLE_PAGES[table]
        ]

    return inner()
