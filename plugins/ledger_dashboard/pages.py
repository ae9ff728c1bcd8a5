"""The dashboard's pages: each builds one plain dict, served as HTML or as its ``.json`` twin.

Routes live under the database, as Datasette's own pages do (``/ledger/-/overview``), so a
Datasette serving several ledger databases has one dashboard per database. Every page checks
Datasette's permissions first (``view-database``, ``view-instance``), reads its filters from
the query string and runs only the fixed statements in ``queries``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from datasette.utils import tilde_decode
from datasette.utils.asgi import BadRequest, Request, Response

from . import cells, queries
from .filters import REASONS, FilterError

if TYPE_CHECKING:
    from datasette.app import Datasette


from .context import (
    PAGE_BY_SLUG,
    PAGES,
    SLUGS,
    Builder,
    Context,
    PageInfo,
    open_context,
)
from .incident_pages import no_progress_data, retry_storms_data, unknown_vendors_data
from .overview import overview_data
from .session import session_data


async def respond(
    ctx: Context, page: PageInfo, data: dict[str, Any], json_twin: bool, json_url: str
) -> Response:
    """The page's dict as its ``.json`` twin, or rendered (with its charts) as HTML."""
    chart_specs = data.pop("_charts", {})
    if json_twin:
        return Response.json(data, default=str)
    context = {
        **data,
        "page": page,
        "ledger_urls": ctx.urls,
        "query": ctx.filters.query(),
        "chart_specs": cells.visible_data(chart_specs),
        "alternate_url_json": json_url,
        "json_url": json_url,
        "reasons": REASONS,
        "filter_options": await filter_options(ctx) if page in PAGES else {},
    }
    html = await ctx.datasette.render_template(
        page.template, context, request=ctx.request, view_name=f"ledger-{page.slug}"
    )
    return Response.html(html)


async def filter_options(ctx: Context) -> dict[str, Any]:
    src = await queries.Sources.of(ctx.db)
    return {
        "task_classes": await queries.task_classes(ctx.db, src),
        "stop_reasons": list(REASONS),
        "sources": await queries.sources(ctx.db),
        "hosts": await queries.hosts(ctx.db),
    }


BUILDERS: dict[str, Builder] = {
    "overview": overview_data,
    "retry-storms": retry_storms_data,
    "no-progress": no_progress_data,
    "unknown-vendors": unknown_vendors_data,
}


View = Callable[..., Awaitable[Response]]


def bad_arguments_are_400(view: View) -> View:
    """A query-string argument the page cannot use (a FilterError) answers 400 with its
    message, on the page and its ``.json`` twin alike."""

    @functools.wraps(view)
    async def inner(datasette: Datasette, request: Request) -> Response:
        try:
            return await view(datasette, request)
        except FilterError as exc:
            raise BadRequest(str(exc)) from None

    return inner


@bad_arguments_are_400
async def dashboard_page(datasette: Datasette, request: Request) -> Response:
    ctx = await open_context(datasette, request)
    page = PAGE_BY_SLUG[request.url_vars["page"]]
    data = await BUILDERS[page.slug](ctx)
    json_twin = bool(request.url_vars.get("format"))
    query = request.query_string
    json_url = ctx.urls.page(page.slug, f"?{query}" if query else "", json_twin=True)
    return await respond(ctx, page, data, json_twin, json_url)


SESSION_PAGE = PageInfo("session", "Session timeline", "ledger_session.html")


@bad_arguments_are_400
async def session_page(datasette: Datasette, request: Request) -> Response:
    ctx = await open_context(datasette, request)
    session_id = tilde_decode(request.url_vars["session"])
    data = await session_data(ctx, session_id)
    json_twin = bool(request.url_vars.get("format"))
    query = request.query_string
    json_url = ctx.urls.session(session_id, json_twin=True) + (f"?{query}" if query else "")
    return await respond(ctx, SESSION_PAGE, data, json_twin, json_url)


def routes() -> list[tuple[str, View]]:
    return [
        (rf"^/(?P<database>[^/]+)/-/(?P<page>{SLUGS})(?P<format>\.json)?$", dashboard_page),
        (r"^/(?P<database>[^/]+)/-/sessions/(?P<session>[^/]+?)(?P<format>\.json)?$",
         session_page),
    ]
