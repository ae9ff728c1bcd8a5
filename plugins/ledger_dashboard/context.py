"""What every dashboard page shares: its route, its URLs, the request's filters and paging."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from datasette.utils import tilde_decode, tilde_encode
from datasette.utils.asgi import BadRequest, NotFound, Request

from . import queries
from .filters import Filters, whole_number

if TYPE_CHECKING:
    from datasette.app import Datasette
    from datasette.database import Database



PLUGIN = "ledger_dashboard"
DEFAULT_THRESHOLD = 3
TIMELINE_PAGE = 500
#: How far back a timeline page looks to count repeated observations before its first step.
REPEATS_SEEN = 100
TOP = 5


@dataclass(frozen=True)
class PageInfo:
    slug: str
    title: str
    template: str


PAGES: tuple[PageInfo, ...] = (
    PageInfo("overview", "Overview", "ledger_overview.html"),
    PageInfo("retry-storms", "Retry storms", "ledger_retry_storms.html"),
    PageInfo("no-progress", "No-progress runs", "ledger_no_progress.html"),
    PageInfo(
        "unknown-vendors", "Unknown vendor stops and tools", "ledger_unknown_vendors.html"
    ),
)
PAGE_BY_SLUG = {p.slug: p for p in PAGES}
SLUGS = "|".join(p.slug for p in PAGES)


@dataclass(frozen=True)
class Urls:
    """Paths of the dashboard's pages for one database (with Datasette's base_url)."""

    datasette: Datasette
    database: str

    @property
    def base(self) -> str:
        return self.datasette.urls.database(self.database)

    def page(self, slug: str, query: str = "", json_twin: bool = False) -> str:
        return f"{self.base}/-/{slug}{'.json' if json_twin else ''}{query}"

    def session(self, session_id: str, at: int | None = None, json_twin: bool = False) -> str:
        path = f"{self.base}/-/sessions/{tilde_encode(session_id)}{'.json' if json_twin else ''}"
        return path if at is None else f"{path}?at={at}#step-{at}"

    def row(self, table: str, pk: str) -> str:
        return self.datasette.urls.row(self.database, table, tilde_encode(pk))

    def table(self, table: str, **args: Any) -> str:
        query = urlencode({k: v for k, v in args.items() if v is not None})
        return f"{self.datasette.urls.table(self.database, table)}{'?' + query if query else ''}"


@dataclass(frozen=True)
class Context:
    datasette: Datasette
    request: Request
    db: Database
    urls: Urls
    filters: Filters

    @property
    def database(self) -> str:
        return self.db.name


def threshold(datasette: Datasette, database: str) -> int:
    """The retry storm threshold from ``plugins: ledger_dashboard: retry_storm_threshold``."""
    config = datasette.plugin_config(PLUGIN, database=database) or {}
    value = config.get("retry_storm_threshold", DEFAULT_THRESHOLD)
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise BadRequest(
            f"plugins: {PLUGIN}: retry_storm_threshold must be a whole number of 2 or more, "
            f"not {value!r} (the fold records retry runs from 2 in a row)"
        )
    return value


def number_arg(request: Request, name: str, default: int, minimum: int) -> int:
    """A whole-number argument of the query string (FilterError if it is not one)."""
    text = request.args.get(name) or ""
    return whole_number(name, text, minimum) if text else default


async def open_context(datasette: Datasette, request: Request) -> Context:
    route = tilde_decode(request.url_vars["database"])
    try:
        db = datasette.get_database(route=route)
    except KeyError:
        raise NotFound(f"Database not found: {route}") from None
    await datasette.ensure_permissions(
        request.actor, [("view-database", db.name), "view-instance"]
    )
    if not await queries.is_ledger(db):
        raise NotFound(f"{db.name} is not an agent-ledger database (run agent-ledger ingest)")
    filters = Filters.from_args(request.args)
    return Context(datasette, request, db, Urls(datasette, db.name), filters)


def link_rows(ctx: Context, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add the timeline link of each incident row (at its first step)."""
    return [dict(r, timeline_url=ctx.urls.session(r["session_id"], r["start_idx"])) for r in found]


# --- page builders -------------------------------------------------------------------------


def page_size(request: Request) -> int:
    size = number_arg(request, "_size", queries.PAGE_SIZE, minimum=1)
    return min(size, queries.MAX_PAGE_SIZE)


#: Arguments a page's next link keeps, besides the filters.
KEPT = ("min_length", "_size")


def next_url(ctx: Context, slug: str, token: str | None) -> str | None:
    if token is None:
        return None
    kept = {name: ctx.request.args.get(name) for name in KEPT}
    return ctx.urls.page(slug, ctx.filters.query(**kept, _next=token))


# --- serving -------------------------------------------------------------------------------

Builder = Callable[[Context], Awaitable[dict[str, Any]]]
