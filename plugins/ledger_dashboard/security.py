"""Response headers and the Host allow-list: what a browser may run, and who may ask.

Configured under ``plugins: ledger_dashboard:`` (``agent-ledger serve`` writes both):

- ``security_headers: true`` sends a Content-Security-Policy and its companions on every
  response. Scripts run only from this server's files and the few inline scripts Datasette
  0.65's own templates hold, each allowed by its SHA-256 (read from the templates, so the
  policy follows the installed Datasette); ledger text can never become a script. Styles may
  be inline, as Datasette's pages colour and size elements in ``style`` attributes.
- ``allowed_hosts: [127.0.0.1, localhost, "[::1]"]`` answers only requests whose ``Host``
  names one of these (any port): a page on another site that rebinds its own name to
  127.0.0.1 (DNS rebinding) is refused instead of reading the ledger. Unset: any host.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from jinja2 import Environment

from .guard import App, Receive, Scope, Send, answer

if TYPE_CHECKING:
    from datasette.app import Datasette

PLUGIN = "ledger_dashboard"

#: ``<script>`` elements with JavaScript in them (not ``src=``, not JSON data blocks).
_INLINE_SCRIPT = re.compile(r"<script(?: type=\"module\")?>(.*?)</script>", re.S)
_EXPRESSION = re.compile(r"\{\{\s*(\w+)\s*\}\}")
#: Template variables inside Datasette 0.65's inline scripts, and every value each takes.
SCRIPT_VARIABLES: dict[str, tuple[str, ...]] = {"datasette_allow_facet": ("true", "false")}


def script_hashes(env: Environment) -> list[str]:
    """``'sha256-...'`` sources for every inline script the templates can print."""
    found: set[str] = set()
    for name in env.list_templates(extensions=["html"]):
        assert env.loader is not None
        source = env.loader.get_source(env, name)[0]
        for body in _INLINE_SCRIPT.findall(source):
            for text in _renderings(body):
                digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
                found.add(f"'sha256-{digest}'")
    return sorted(found)


def _renderings(body: str) -> list[str]:
    """The texts a script body becomes: itself, or one per value of its one variable. A body
    with other template code is left out (its script would be refused, and a test says so)."""
    if "{%" in body or "{#" in body:
        return []
    names = set(_EXPRESSION.findall(body))
    if not names:
        return [] if "{{" in body else [body]
    if len(names) != 1 or not names <= SCRIPT_VARIABLES.keys():
        return []
    (name,) = names
    return [_EXPRESSION.sub(value, body) for value in SCRIPT_VARIABLES[name]]


def policy(hashes: Iterable[str]) -> str:
    scripts = " ".join(["'self'", *hashes])
    return "; ".join([
        "default-src 'none'",
        f"script-src {scripts}",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'self'",
        "frame-ancestors 'none'",
    ])


def headers(csp: str) -> list[tuple[bytes, bytes]]:
    return [
        (b"content-security-policy", csp.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"same-origin"),
    ]


def host_name(host: str) -> str:
    """A ``Host`` header without its port, lower case: ``[::1]:8001`` -> ``[::1]``."""
    host = host.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def host_allowed(host: str | None, allowed: Sequence[str]) -> bool:
    if "*" in allowed:
        return True
    return host is not None and host_name(host) in {host_name(a) for a in allowed}


def settings(datasette: Datasette) -> tuple[bool, list[str] | None]:
    """``security_headers`` and ``allowed_hosts`` from the plugin's configuration."""
    config: dict[str, Any] = datasette.plugin_config(PLUGIN) or {}
    allowed = config.get("allowed_hosts")
    if allowed is not None and not (
        isinstance(allowed, list) and all(isinstance(h, str) for h in allowed)
    ):
        raise ValueError(f"plugins: {PLUGIN}: allowed_hosts must be a list of host names")
    return bool(config.get("security_headers")), allowed


def wrap(datasette: Datasette, app: App) -> App:
    """``app`` refusing foreign ``Host`` headers and sending the security headers."""
    extra: list[tuple[bytes, bytes]] | None = None

    async def secured(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal extra
        if scope["type"] != "http":
            return await app(scope, receive, send)
        send_headers, allowed = settings(datasette)
        if allowed is not None:
            host = dict(scope.get("headers", [])).get(b"host")
            name = host.decode("latin-1") if host is not None else None
            if not host_allowed(name, allowed):
                shown = repr(name) if name is not None else "no Host header"
                return await answer(
                    send, 400,
                    f"This server does not answer to the host {shown}. If that name is yours "
                    "(a reverse proxy), start it with agent-ledger serve --allow-host NAME.",
                    as_json=False,
                )
        if not send_headers:
            return await app(scope, receive, send)
        if extra is None:
            extra = headers(policy(script_hashes(datasette.jinja_env)))
        added = extra

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                kept = [h for h in added if h[0] not in present]
                message = dict(message, headers=[*message.get("headers", []), *kept])
            await send(message)

        await app(scope, receive, with_headers)

    return secured
