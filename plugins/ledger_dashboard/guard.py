"""No URL answers 500: Datasette 0.65's own failures on bad input, answered 400, 404 or 405.

Each rule names one failure mode of Datasette 0.65 and the input that causes it; anything
else still fails loudly, so a real bug is never hidden behind a 400. Two layers:

- ``bad_argument`` and ``refused_post`` look at a request before Datasette does (arguments it
  reads with ``int()`` or ``json.loads`` unchecked, POSTs its views do not handle);
- ``as_client_error`` maps an exception Datasette raised to the error a person should see.
"""

from __future__ import annotations

import errno
import json
import sqlite3
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from datasette.database import QueryInterrupted
from datasette.utils import tilde_decode
from datasette.utils.asgi import BadRequest, Base400, NotFound
from datasette.views.base import DatasetteError

if TYPE_CHECKING:
    from datasette.app import Datasette

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SCALARS = (str, int, float, bool, type(None))
THROUGH_KEYS = ("table", "column", "value")


def bad_argument(args: Sequence[tuple[str, str]]) -> str | None:
    """Why Datasette's table view would fail with a 500 on these arguments, or None.

    ``_timelimit`` goes through ``int()``; ``_through``, a ``column__in=[...]`` (or
    ``__notin``) list and a ``_facet...={...}`` through ``json.loads``, their values bound as
    SQL parameters or read as column names."""
    for name, value in args:
        if name == "_timelimit":
            try:
                int(value)
            except ValueError:
                return f"_timelimit: {value[:40]!r} is not a whole number of milliseconds"
        elif name == "_through" and not _is_through(value):
            return (
                f"_through: {value[:40]!r} is not a JSON object "
                '{"table": ..., "column": ..., "value": ...}'
            )
        elif name.endswith(("__in", "__notin")) and value.startswith("[") and not _is_list(value):
            return f"{name}: {value[:40]!r} is not a JSON list of strings and numbers"
        elif name.startswith("_facet") and value.startswith("{") and not _is_facet(value):
            return f'{name}: {value[:40]!r} is not a JSON object {{"simple": COLUMN}}'
    return None


def _is_through(value: str) -> bool:
    parsed = _json(value)
    return (
        isinstance(parsed, dict)
        and all(key in parsed for key in THROUGH_KEYS)
        and isinstance(parsed["table"], str)
        and isinstance(parsed["column"], str)
        and isinstance(parsed["value"], SCALARS)
    )


def _is_list(value: str) -> bool:
    parsed = _json(value)
    return isinstance(parsed, list) and all(isinstance(v, SCALARS) for v in parsed)


def _is_facet(value: str) -> bool:
    parsed = _json(value)
    return (
        isinstance(parsed, dict)
        and isinstance(parsed.get("simple"), str)
        and all(isinstance(v, str) for v in parsed.values())
    )


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return None


async def refused_post(datasette: Datasette, path: str) -> str | None:
    """Why a POST to ``path`` cannot be served, or None.

    Datasette 0.65 accepts a POST only for a canned query with ``write: true``: a POST to a
    table fails an assertion and one to a read-only canned query returns a tuple, both 500."""
    parts = path.strip("/").split("/")
    if len(parts) != 2 or parts[1].startswith("-"):
        return None
    route, name = tilde_decode(parts[0]), tilde_decode(parts[1])
    try:
        database = datasette.get_database(route=route).name
    except KeyError:
        return None
    for candidate in (name, name.rsplit(".", 1)[0]):
        query = await datasette.get_canned_query(database, candidate, None)
        if query is not None:
            return None if query.get("write") else f"{candidate} is a read-only canned query"
    return f"{name} is not a canned query that writes"


def as_client_error(exception: Exception, url_vars: Mapping[str, str]) -> Base400 | None:
    """The 4xx that Datasette 0.65 should have raised for ``exception``, or None."""
    if (
        "pks" in url_vars
        and isinstance(exception, sqlite3.ProgrammingError)
        and "did not supply a value for binding parameter" in str(exception)
    ):
        # A row URL with fewer key values than the table's primary key has columns.
        return NotFound(f"No row {url_vars['pks'][:80]!r}: give a value for each key column")
    if isinstance(exception, OverflowError) and "SQLite INTEGER" in str(exception):
        return BadRequest(
            "A number in the URL is too large: SQLite's integers end at 9223372036854775807"
        )
    if isinstance(exception, DatasetteError) and exception.status == 500:
        # Datasette 0.65 keeps its default status for bad ``_sort``, ``_sort_desc`` and
        # ``_through`` arguments only; every other error of its views sets one.
        return BadRequest(exception.message)
    if isinstance(exception, sqlite3.ProgrammingError) and "null character" in str(exception):
        return BadRequest("A NUL character (%00) cannot be part of a column name or query")
    if isinstance(exception, QueryInterrupted):
        return BadRequest("The query took too long and was stopped (see _timelimit)")
    if isinstance(exception, OSError) and exception.errno == errno.ENAMETOOLONG:
        return NotFound("No such file: the name is too long")
    return None


def wrap(datasette: Datasette, app: App) -> App:
    """``app`` with bad arguments answered 400 and refused POSTs 405, before Datasette."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        query = scope.get("query_string", b"").decode("latin-1")
        problem = bad_argument(parse_qsl(query, keep_blank_values=True))
        status = 400
        if problem is None and scope.get("method") == "POST":
            problem, status = await refused_post(datasette, scope.get("path", "")), 405
        if problem is None:
            return await app(scope, receive, send)
        await answer(send, status, problem, scope.get("path", "").endswith(".json"))

    return guarded


async def answer(send: Send, status: int, message: str, as_json: bool) -> None:
    """A plain error response, as JSON for a ``.json`` path (as Datasette's errors are)."""
    if as_json:
        body = json.dumps({"ok": False, "error": message, "status": status}).encode()
        kind = b"application/json; charset=utf-8"
    else:
        body = f"Error {status}: {message}\n".encode()
        kind = b"text/plain; charset=utf-8"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

