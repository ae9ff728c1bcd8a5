"""Secret redaction for ledger text: a pure function, standard library only, no I/O.

Every secret found is replaced by a typed marker ``[REDACTED:<kind>]``. Where a secret sits in
a context (``password=...``, ``Bearer ...``, ``https://user:...@host``) the context is kept
and only the secret itself is replaced. The kinds, in the order they are applied (the first
rule to claim a span wins, so a specific shape always beats a generic context):

``private-key``
    A PEM private key block, ``-----BEGIN ... PRIVATE KEY-----`` to the matching END line,
    or to the end of the text when the END line is missing (truncated text). Covers RSA, EC,
    DSA, OPENSSH, ENCRYPTED and PGP (``PRIVATE KEY BLOCK``) keys.
``jwt``
    A JSON Web Token: ``eyJ<header>.eyJ<payload>.<signature>`` (signature may be empty).
``anthropic-key``
    An Anthropic API key, ``sk-ant-...``. Tried before ``openai-key``.
``openai-key``
    An OpenAI API key, ``sk-...`` or ``sk-proj-...`` (at least 20 key characters, one of
    them a digit or a capital, so kebab-case words after ``sk-`` are left alone).
``stripe-key``
    A Stripe secret or restricted key, ``sk_live_``/``rk_live_`` (and ``_test_``).
``github-token``
    A GitHub token: ``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_`` or ``github_pat_``.
``slack-token``
    A Slack token: ``xoxb-``, ``xoxa-``, ``xoxp-``, ``xoxr-`` or ``xoxs-``.
``google-api-key``
    A Google API key, ``AIza`` followed by 35 characters.
``aws-access-key``
    An AWS access key id, ``AKIA``/``ASIA`` followed by 16 capitals or digits (20 in all).
``url-password``
    The password of a URL with credentials: ``https://user:pass@host`` becomes
    ``https://user:[REDACTED:url-password]@host``.
``bearer-token``
    The token after ``Bearer``. In an ``Authorization`` header any token is redacted; a bare
    ``Bearer <token>`` elsewhere needs 8+ token characters including a digit, so prose such as
    "Bearer tokens" is left alone. The word ``Bearer`` is kept.
``basic-auth``
    The base64 credentials of an ``Authorization: Basic ...`` header.
``aws-secret-key``
    The value assigned to ``aws_secret_access_key`` / ``SecretAccessKey`` (any case, with
    ``=``, ``:`` or quotes).
``secret-assignment``
    The value assigned to a key ending in ``password``, ``passwd``, ``pwd``, ``secret``,
    ``secret_key``, ``token``, ``api_key``/``apikey``/``api-key`` (any case, any prefix:
    ``DB_PASSWORD``, ``client_secret``, ``accessToken``). Forms: ``key=value``,
    ``key: value``, ``"key": "value"``, ``key => 'value'``, ``key: str = "value"``,
    ``config["key"] = "value"``, also inside JSON-escaped text (``\\"key\\": \\"value\\"``).
    The key is kept. Not redacted: empty values, ``None``/``null``/``true``/``false`` and type
    names (``password: str``), references and templates (``$VAR``, ``${VAR}``, ``%s``,
    ``{x}``, ``<placeholder>``), calls and subscripts (``get_password()``,
    ``os.environ["X"]``), a value equal to the key name (``api_key=api_key``), the word
    ``Bearer``/``Basic`` (``token: Bearer ...`` is left to its own rule), comparisons
    (``password == x``), and a ``pwd`` holding a path (``PWD=/home/me``).

Hex strings (hashes of any length) are never redacted on their own: nothing here matches a
bare hex run. Redaction is idempotent: markers are never matched again, so redacting twice
changes nothing and counts zero the second time.

Performance: one precompiled regex search for any trigger substring rejects text with no
candidate at once; otherwise each rule runs only if one of its own trigger substrings occurs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["REDACTION_KINDS", "redact", "redact_counts"]

#: Every kind of marker :func:`redact` can emit, in the order the rules are applied.
REDACTION_KINDS: tuple[str, ...] = (
    "private-key",
    "jwt",
    "anthropic-key",
    "openai-key",
    "stripe-key",
    "github-token",
    "slack-token",
    "google-api-key",
    "aws-access-key",
    "url-password",
    "bearer-token",
    "basic-auth",
    "aws-secret-key",
    "secret-assignment",
)

_MARKERS = {kind: f"[REDACTED:{kind}]" for kind in REDACTION_KINDS}

#: Not at the start of a value: a marker left by an earlier rule or an earlier run.
_NOT_MARKER = r"(?!\[REDACTED:)"

# -- fixed-shape tokens: the whole match is the secret -------------------------------------

_PEM = (
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?s:.*?)"
    r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_JWT = r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"
_ANTHROPIC = r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,}"
# A digit or a capital must occur among the key characters (checked without leaving them).
_OPENAI = r"(?<![A-Za-z0-9_-])sk-(?!ant-)(?=[a-z_-]*[A-Z0-9])[A-Za-z0-9_-]{20,}"
_STRIPE = r"(?<![A-Za-z0-9_])[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"
_GITHUB = r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"
_SLACK = r"(?<![A-Za-z0-9_-])xox[abprs]-[A-Za-z0-9-]{10,}"
_GOOGLE = r"(?<![A-Za-z0-9_-])AIza[A-Za-z0-9_-]{35,}"
_AWS_ACCESS = r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"

# -- secrets in a context: group ``val`` is the secret, everything before it is kept -------

# scheme://user:PASSWORD@  (the scheme starts a run, so long words are not rescanned)
_URL = (
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@\[\]\"'<>\\]*:"
    + _NOT_MARKER
    + r"(?P<val>[^\s/?#\[\]\"'<>\\]+)(?=@)"
)

# An optional opening quote, possibly JSON-escaped, around a header value.
_HEADER = r"authorization\\*[\"'`]?[ \t]*[:=][ \t]*\\*[\"'`]?[ \t]*"
_BEARER = (
    r"(?<![A-Za-z0-9])(?:(?P<hdr>" + _HEADER + r"))?bearer[ \t]+"
    r"(?P<val>[A-Za-z0-9._~+/-]+=*)"
)
_BASIC = r"(?<![A-Za-z0-9])" + _HEADER + r"basic[ \t]+(?P<val>[A-Za-z0-9+/]+=*)"

_KEYWORDS = (
    "none|null|nil|true|false|undefined|str|string|bytes|int|bool|boolean|number|object"
    "|optional|any|secretstr"
)
#: What ends an unquoted value (and what must follow a keyword for it to be the whole value).
_VALUE_END = r"(?:[\s\"'`\\,;&)\]}]|\Z)"
_ASSIGNMENT = (
    # the key: any prefix is allowed (DB_PASSWORD, client_secret, accessToken)
    r"(?P<kw>secret[_-]?access[_-]?key|secret[_-]?key|secret|passw(?:or)?d|pwd|token"
    r"|api[_-]?key)"
    # the closing quote of a quoted key, maybe closing a subscript too: config["password"]
    r"(?:\\*[\"'`]\]?)?"
    # markdown emphasis around the key: **Password:** or **Password**:
    r"(?:\*{1,2}|__)?"
    # an optional type annotation before '=': password: str = "x"
    r"(?:[ \t]*:[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\r\n]*\])?(?:[ \t]*\|[ \t]*[A-Za-z_][\w.]*)*"
    r"(?=[ \t]*=(?!=)))?"
    r"[ \t]*(?:=>|:=|:(?!:)|=(?![=>]))[ \t]*"
    # markdown emphasis after the separator, taken atomically (lookahead + backreference) so
    # that a second run cannot give it back and redact the emphasis itself
    r"(?=(?P<md>(?:\*{1,2}|__)?[ \t]*))(?P=md)"
    # the opening quote of the value, maybe JSON-escaped
    r"(?P<q>\\*[\"'`])?"
    + _NOT_MARKER
    # values that are not secrets
    + r"(?!(?P=kw)" + _VALUE_END + ")"
    r"(?![$%{<=(\[])"
    r"(?!(?:bearer|basic)[ \t])"  # the scheme word of an auth header; its own rule redacts
    r"(?!(?:" + _KEYWORDS + r")" + _VALUE_END + ")"
    # the value: up to the same quote, or (unquoted) up to a delimiter; never across a marker
    r"(?P<val>(?(q)"
    r"(?:(?!(?P=q))" + _NOT_MARKER + r"[^\r\n])+"
    r"|"
    r"(?![A-Za-z_][\w.]*[(\[])(?:" + _NOT_MARKER + r"[^\s\"'`\\,;&)\]}])+"
    r"))"
)


@dataclass(frozen=True)
class _Rule:
    kind: str
    triggers: tuple[str, ...]  # lowercase substrings; the rule runs only if one occurs
    pattern: re.Pattern[str]
    # Given a match, the kind to record, or None to leave the match as it is.
    classify: Callable[[re.Match[str]], str | None] | None = None


def _bearer_kind(m: re.Match[str]) -> str | None:
    if m["hdr"] is not None:
        return "bearer-token"
    token = m["val"]
    if len(token) >= 8 and any(c.isdigit() for c in token):
        return "bearer-token"
    return None


def _assignment_kind(m: re.Match[str]) -> str | None:
    kw = m["kw"].lower()
    if "access" in kw:
        return "aws-secret-key"
    if kw == "pwd" and m["val"][:1] in ("/", "~"):
        return None  # PWD=/home/me is a working directory, not a password
    return "secret-assignment"


def _rule(
    kind: str,
    triggers: tuple[str, ...],
    pattern: str,
    flags: int = 0,
    classify: Callable[[re.Match[str]], str | None] | None = None,
) -> _Rule:
    return _Rule(kind, triggers, re.compile(pattern, flags), classify)


_I = re.IGNORECASE

_RULES: tuple[_Rule, ...] = (
    _rule("private-key", ("private key",), _PEM),
    _rule("jwt", ("eyj",), _JWT),
    _rule("anthropic-key", ("sk-ant-",), _ANTHROPIC),
    _rule("openai-key", ("sk-",), _OPENAI),
    _rule("stripe-key", ("k_live_", "k_test_"), _STRIPE),
    _rule("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"), _GITHUB),
    _rule("slack-token", ("xox",), _SLACK),
    _rule("google-api-key", ("aiza",), _GOOGLE),
    _rule("aws-access-key", ("akia", "asia"), _AWS_ACCESS),
    _rule("url-password", ("://",), _URL),
    _rule("bearer-token", ("bearer",), _BEARER, _I, _bearer_kind),
    _rule("basic-auth", ("authorization",), _BASIC, _I),
    _rule(
        "secret-assignment",
        ("secret", "passw", "pwd", "token", "api_key", "apikey", "api-key"),
        _ASSIGNMENT,
        _I,
        _assignment_kind,
    ),
)

#: The fast path: text with none of these substrings (any case) cannot hold a secret.
_CANDIDATE = re.compile(
    "|".join(sorted({re.escape(t) for r in _RULES for t in r.triggers}, key=len, reverse=True)),
    re.IGNORECASE,
)


def redact_counts(text: str) -> tuple[str, dict[str, int]]:
    """Same as :func:`redact`, but count the secrets per kind, e.g. ``{"aws-access-key": 1}``.

    Only kinds that were found appear in the dictionary.
    """
    if _CANDIDATE.search(text) is None:
        return text, {}
    lowered = text.lower()
    counts: dict[str, int] = {}
    for rule in _RULES:
        if not any(t in lowered for t in rule.triggers):
            continue
        text = rule.pattern.sub(_replacer(rule, counts), text)
    return text, counts


def redact(text: str) -> tuple[str, int]:
    """Return (text with every secret replaced by a typed marker, number of secrets replaced)."""
    cleaned, counts = redact_counts(text)
    return cleaned, sum(counts.values())


def _replacer(rule: _Rule, counts: dict[str, int]) -> Callable[[re.Match[str]], str]:
    has_val = "val" in rule.pattern.groupindex

    def replace(m: re.Match[str]) -> str:
        kind = rule.kind if rule.classify is None else rule.classify(m)
        if kind is None:
            return m[0]
        counts[kind] = counts.get(kind, 0) + 1
        if not has_val:
            return _MARKERS[kind]
        # The value always ends the match: keep what precedes it, replace the value.
        return m.string[m.start() : m.start("val")] + _MARKERS[kind]

    return replace
