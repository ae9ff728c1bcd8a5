"""Secret redaction for ledger text: a pure function (the same text, the same result).

Every secret found is replaced by a typed marker ``[REDACTED:<kind>]``. Where a secret sits in
a context (``password=...``, ``Bearer ...``, ``https://user:...@host``) the context is kept
and only the secret itself is replaced.

Two passes. First the rules below, written for what agent logs carry: the tokens agents use
most, with markers named for them, and the contexts of shells, configs and headers that a
scanner of source code does not look for. Then the maintained rule set of a secret-scanning
project (:mod:`ledger.core.secret_rules`: some 490 vendor formats, GitLab, npm, PyPI,
Hugging Face, Vault, ...) on what the first pass left; its markers are named for its rules
(``[REDACTED:gitlab-pat]``). Both passes skip placeholders (:func:`is_placeholder`:
``ghp_xxxx...``, ``YOUR_API_KEY``, ``AKIAIOSFODNN7EXAMPLE``, ``changeme``, ``********``).

The kinds of the first pass, in the order they are applied (the first rule to claim a span
wins, so a specific shape always beats a generic context):

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
``telegram-bot-token``
    The secret half of a Telegram bot token, ``<bot id>:AA`` + 33 characters.
``discord-bot-token``
    A Discord bot token: the bot's id in base64, a timestamp and an HMAC, ``.``-separated.
``webhook-token``
    The token of a webhook URL, ``.../api/webhooks/<id>/<token>`` (Discord).
``sentry-token``
    A Sentry auth token, ``sntrys_`` (organisation) or ``sntryu_`` (user).
``tavily-key``
    A Tavily API key, ``tvly-``.
``jfrog-token``
    A JFrog API key (``AKCp``) or reference token (``cmVmdGtu``).
``dropbox-token``
    A Dropbox access token, ``sl.`` + 120 characters or more.
``azure-key``
    An Azure storage or Service Bus key (``AccountKey=``, ``SharedAccessKey=``) or the
    signature of a SAS URL (``sig=``).
``url-password``
    The password of a URL with credentials: ``https://user:pass@host`` becomes
    ``https://user:[REDACTED:url-password]@host``.
``cli-password``
    A password or token on a command line: ``curl -u user:pw`` (``--user``), ``sshpass -p
    pw``, ``mysql -ppw``, and the value of a flag named for one (``--token X``,
    ``--password X``, ``--api-key X``).
``bearer-token``
    The token after ``Bearer`` (or ``Token``, ``Bot`` in an ``Authorization`` header). In an
    ``Authorization`` header any token is redacted; a bare
    ``Bearer <token>`` elsewhere needs 8+ token characters including a digit, so prose such as
    "Bearer tokens" is left alone. The word ``Bearer`` is kept.
``basic-auth``
    The base64 credentials of an ``Authorization: Basic ...`` header.
``google-oauth-token``
    A Google OAuth access token, ``ya29.`` (outside an ``Authorization`` header, where it is a
    ``bearer-token``).
``aws-secret-key``
    The value assigned to ``aws_secret_access_key`` / ``SecretAccessKey`` (any case, with
    ``=``, ``:`` or quotes).
``secret-assignment``
    The value assigned to a key ending in ``password``, ``passwd``, ``passphrase``, ``pass``
    (after a non-letter: ``db_pass``, not ``bypass``), ``pwd``, ``secret``, ``secret_key``,
    ``secretString``, ``token``, ``api_key``/``apikey``/``api-key``, ``credential(s)`` (any
    case, any prefix: ``DB_PASSWORD``, ``client_secret``, ``accessToken``,
    ``mySecretString``). Forms: ``key=value``,
    ``key: value``, ``"key": "value"``, ``key => 'value'``, ``key: str = "value"``,
    ``config["key"] = "value"``, also inside JSON-escaped text (``\\"key\\": \\"value\\"``).
    The key is kept. Not redacted: empty values, ``None``/``null``/``true``/``false`` and type
    names (``password: str``), references and templates (``$VAR``, ``${VAR}``, ``%s``,
    ``{x}``, ``<placeholder>``), calls and subscripts (``get_password()``,
    ``os.environ["X"]``), a value equal to the key name (``api_key=api_key``), the word
    ``Bearer``/``Basic`` (``token: Bearer ...`` is left to its own rule), comparisons
    (``password == x``), and a ``pwd`` holding a path (``PWD=/home/me``).

Hex strings (hashes of any length) are never redacted on their own: nothing here matches a
bare hex run. Redaction is idempotent: a marker is never matched again, so redacting twice
changes nothing and counts zero the second time.

Speed (this runs on every ingested text): the rule set's pass has a prefilter of its own
(:data:`ledger.core.secret_rules.MIN_RUN`). The first pass's fast path is one search for all
its triggers at once (``PRIVATE KEY``, ``eyJ``, ``sk-``, ``AKIA``, ``://``, ... and, in the
lowercased text, ``password``, ``token``, ``bearer``, ...; an Aho-Corasick automaton, one pass
over the lowercased text). Text that wakes neither is returned as it is,
the very same object. Otherwise only the rules whose triggers occur run (the key-word rule only
when a key word is followed by ``=`` or ``:``), and every pattern starts with a literal or a
character class so that the regex engine jumps from candidate to candidate.

One module of about 550 lines, most of it the first pass's rule table: the rules and the
functions that apply them are read together when a shape is added.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from ahocorasick_rs import BytesAhoCorasick, Implementation
from msgspec import Struct

from ledger.core.secret_rules import secret_spans

__all__ = [
    "PLAIN_TEXT",
    "REDACTION_KINDS",
    "drop_cut_token",
    "is_placeholder",
    "redact",
    "redact_counts",
    "redact_json",
]

#: Every kind of marker the first pass can emit, in the order its rules are applied (the rule
#: set's kinds: :func:`ledger.core.secret_rules.rule_kinds`).
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
    "telegram-bot-token",
    "discord-bot-token",
    "webhook-token",
    "sentry-token",
    "tavily-key",
    "jfrog-token",
    "dropbox-token",
    "azure-key",
    "url-password",
    "cli-password",
    "bearer-token",
    "basic-auth",
    "google-oauth-token",
    "aws-secret-key",
    "secret-assignment",
)

_MARKERS = {kind: f"[REDACTED:{kind}]" for kind in REDACTION_KINDS}

#: Not at the start of a value: a marker left by an earlier rule or an earlier run (in the
#: text as it is, and in the folded text that the key-word rules read; see _fold).
_NOT_MARKER = r"(?!\[REDACTED:)"
_NOT_FOLDED_MARKER = r"(?!\[redacted:)"

# -- fixed-shape tokens, matched in the text as it is: the whole match is the secret --------
#
# Each pattern starts with a literal or a character class and checks "not inside a longer
# word" after it with a fixed-width lookbehind: the regex engine can then skip ahead to the
# candidates instead of trying the whole pattern at every position.

_PEM = (
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
    r"(?s:.*?)"
    r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_JWT = r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"
_ANTHROPIC = r"sk-ant-(?<![A-Za-z0-9_-]sk-ant-)[A-Za-z0-9_-]{20,}"
# A digit or a capital must occur among the key characters (checked without leaving them).
_OPENAI = r"sk-(?<![A-Za-z0-9_-]sk-)(?!ant-)(?=[a-z_-]*[A-Z0-9])[A-Za-z0-9_-]{20,}"
_STRIPE = r"[rs](?<![A-Za-z0-9_][rs])k_(?:live|test)_[A-Za-z0-9]{16,}"
_GITHUB = r"g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})"
_SLACK = r"xox(?<![A-Za-z0-9_-]xox)[abprs]-[A-Za-z0-9-]{10,}"
_GOOGLE = r"AIza(?<![A-Za-z0-9_-]AIza)[A-Za-z0-9_-]{35,}"
_AWS_ACCESS = r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"

# Formats the maintained rule set (ledger/core/secret_rules.py) does not know, or knows only
# with context an agent's log does not have: added here for agent logs.
_GOOGLE_OAUTH = r"ya29\.(?<![A-Za-z0-9_-]ya29\.)[A-Za-z0-9_-]{20,}"
_TELEGRAM = r":AA[A-Za-z0-9_-]{33}(?![A-Za-z0-9_-])"  # after the bot's id, which is public
# A Discord bot token: the user id in base64 (digits, so it starts with M, N or O), a
# timestamp, an HMAC. Gated by its middle (".", six characters, ".", then the HMAC): a gate
# that starts with a literal is a fast scan, where the token's own start is not.
_DISCORD = (
    r"[MNO](?<![A-Za-z0-9_-][MNO])[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"
    r"(?![A-Za-z0-9_-])"
)
_DISCORD_GATE = r"\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27}"
_WEBHOOK = r"/api/webhooks/[0-9]+/(?P<val>[A-Za-z0-9_-]{20,})"
_SENTRY = r"sntry[su]_(?<![A-Za-z0-9]sntry[su]_)[A-Za-z0-9_+/=]{30,}"
_TAVILY = r"tvly-(?<![A-Za-z0-9]tvly-)(?:dev-|prod-)?[A-Za-z0-9]{24,}"
_JFROG = r"(?:AKCp[A-Za-z0-9]{60,}|cmVmdGtu[A-Za-z0-9]{40,})"
_DROPBOX = r"sl\.(?<![A-Za-z0-9_.-]sl\.)[A-Za-z0-9_-]{120,}"
_AZURE_KEY = r"(?:Account|SharedAccess)Key=(?P<val>[A-Za-z0-9+/%]{20,}=*)"
_AZURE_SAS = r"sig=(?<=[?&]sig=)(?P<val>[A-Za-z0-9%+/=_-]{16,})"
# Passwords on a command line: curl -u user:pw, sshpass -p pw, mysql -ppw, --password pw.
_CURL_USER = (
    r"-(?<![\w-]-)(?:u|-user)[ \t=]+[\"']?[^\s:\"']+:(?![0-9]+(?:\s|\Z))"
    r"(?P<val>" + _NOT_MARKER + r"[^\s\"']+)"
)
_SSHPASS = r"sshpass[ \t]+-p[ \t]*[\"']?(?P<val>" + _NOT_MARKER + r"[^\s\"']+)"
_MYSQL = (
    r"mysql(?<![\w-]mysql)(?:dump|admin)?[ \t][^\n]*?[ \t]-p(?P<val>" + _NOT_MARKER
    + r"[^\s\"'-][^\s\"']*)"
)
_FLAG = (
    r"--[a-z0-9-]*(?:token|passw(?:or)?d|secret|api-?key)[ \t]+[\"']?"
    r"(?![-$<{%])(?P<val>" + _NOT_FOLDED_MARKER + r"[^\s\"']+)"
)

# scheme://user:PASSWORD@ ; the match starts at "://" (a scheme character must precede it).
# Group ``val`` is the secret; everything before it is kept.
_URL = (
    r"://(?<=[A-Za-z0-9+.-]://)[^\s:/?#@\[\]\"'<>\\]*:"
    + _NOT_MARKER
    + r"(?P<val>[^\s/?#\[\]\"'<>\\]+)(?=@)"
)

# -- key words in any case, matched in the folded (lowercased) text -------------------------
#
# These patterns are written in lowercase and run on _fold(text), which has the same length
# as the text, so the spans found there are cut out of the text itself. Group ``val`` is the
# secret; everything before it is kept.

# "authorization:" with the quotes it may have in JSON, escaped JSON or a Python dict.
_HEADER = r"authorization(?<![a-z0-9]authorization)\\*[\"'`]?[ \t]*[:=][ \t]*\\*[\"'`]?[ \t]*"
#: An unquoted value: up to a delimiter, never across a marker.
_WORD = r"(?:" + _NOT_FOLDED_MARKER + r"[^\s\"'`\\,;&)\]}])+"
# The credentials after "bearer"/"basic" start like a token and run to a delimiter, so that
# "Bearer password=hunter2" cannot leave half of a secret behind. In an Authorization header
# any such token is redacted ...
_BEARER_HEADER = _HEADER + r"(?:bearer|token|bot)[ \t]+(?=[a-z0-9._~+/-])(?P<val>" + _WORD + ")"
# ... a bare "bearer" needs a token of 8+ characters with a digit. Such conditions live in
# the patterns, never in a callback: a match that was then declined would still consume its
# text and could hide a secret right after it.
_BEARER = (
    r"bearer(?<![a-z0-9]bearer)[ \t]+(?=[a-z._~+/-]*[0-9])(?=[a-z0-9._~+/-]{8})"
    r"(?P<val>" + _WORD + ")"
)
_BASIC = _HEADER + r"basic[ \t]+(?=[a-z0-9+/])(?P<val>" + _WORD + ")"

_KEYWORDS = (
    "none|null|nil|true|false|undefined|str|string|bytes|int|bool|boolean|number|object"
    "|optional|any|secretstr|include|omit|same-origin"
)
#: What ends an unquoted value (and what must follow a keyword for it to be the whole value).
_VALUE_END = r"(?:[\s\"'`\\,;&)\]}]|\Z)"
#: The key words, any prefix allowed before them (DB_PASSWORD, client_secret, accessToken).
_KW = (
    r"(?:secret(?:[_-]?access[_-]?key|[_-]?(?:key|string|value))?|passw(?:or)?d|passphrase"
    r"|(?<![a-z])pass|pwd|token|api[_-]?key|credentials?)"
)
#: A separator ahead (":" or "=", not "::" or "=="), after optional blanks.
_SEP_AHEAD = r"[ \t]*(?::(?!:)|=(?!=))"
#: After a key, before the separator: the closing quote of a quoted key, maybe closing a
#: subscript too (config["password"]), then markdown emphasis (**Password:**, **Password**:).
_KEY_END = r"(?:\\*[\"'`]\]?)?(?:\*{1,2}|__)?"
_ASSIGNMENT = (
    # the key: any prefix is allowed (DB_PASSWORD, client_secret, accessToken). Every branch
    # starts with a letter, for speed; the empty groups mark the AWS and pwd keys.
    r"(?P<kw>secret(?:[_-]?access(?P<aws>)[_-]?key|[_-]?(?:key|string|value))?"
    r"|passw(?:or)?d|passphrase|(?<![a-z])pass|p(?P<pwd>)wd|token|api[_-]?key|credentials?)"
    + _KEY_END
    # an optional type annotation before '=': password: str = "x". Taken atomically (a
    # lookahead, then a backreference): once read as an annotation, never re-read as
    # "key: value" by a second run.
    + r"(?=(?P<ann>(?:[ \t]*:[ \t]*[a-z_][\w.]*(?:\[[^\]\r\n]*\])?"
    r"(?:[ \t]*\|[ \t]*[a-z_][\w.]*)*(?=[ \t]*=(?![=>])))?))(?P=ann)"
    r"[ \t]*(?:=>|:=|:(?!:)|=(?![=>]))"
    # spaces and markdown emphasis after the separator, also taken atomically
    r"(?=(?P<md>[ \t]*(?:\*{1,2}|__)?[ \t]*))(?P=md)"
    # the opening quote of the value, maybe JSON-escaped
    r"(?P<q>\\*[\"'`])?"
    + _NOT_FOLDED_MARKER
    # values that are not secrets
    + r"(?!(?P=kw)" + _VALUE_END + ")"  # api_key=api_key
    r"(?![$%{<=(\[])"  # $VAR ${VAR} %s {x} <placeholder> == ( [
    r"(?(pwd)(?![/~])|)"  # PWD=/home/me is a working directory, not a password
    r"(?!(?:bearer|basic)[ \t])"  # token: Bearer ... is left to the bearer rules
    r"(?!(?:" + _KEYWORDS + r")" + _VALUE_END + ")"  # None, null, str, ...
    # A "value" that is itself one of these keys with its separator is the next assignment
    # ("password= 'token': 'abc'", "password: token: abc"): taking it as a value would hide
    # that key and leave its value behind.
    r"(?!(?(q)[\w.-]*" + _KW + r"(?P=q)" + _SEP_AHEAD
    + r"|[\w.-]*" + _KW + r"(?:\*{1,2}|__)?(?:[:=](?=\s|\Z)|" + _SEP_AHEAD + r")))"
    # the value: up to the same quote, or (unquoted) up to a delimiter; never across a marker
    r"(?P<val>(?(q)"
    r"(?:(?!(?P=q))" + _NOT_FOLDED_MARKER + r"[^\r\n])+"
    r"|"
    r"(?![a-z_][\w.]*[(\[])" + _WORD  # not a call
    + r"))"
)
#: Cheap confirmations before _ASSIGNMENT runs: a key word followed by a separator. Each
#: starts with a literal (one of the rule's triggers, given with it), so each is a fast scan;
#: "input_tokens": 12 fails them all.
_ASSIGNMENT_GATES = tuple(
    (trigger, re.compile(word + _KEY_END + r"[ \t]*[:=]"))
    for trigger, word in (
        ("secret", r"secret(?:[_-]?access)?(?:[_-]?(?:key|string|value))?"),
        ("pass", r"pass(?:w(?:or)?d|phrase)?"),
        ("credential", r"credentials?"),
        ("pwd", r"pwd"),
        ("token", r"token"),
        ("api", r"api[_-]?key"),
    )
)


def _fold(text: str) -> str:
    """``text`` in lowercase, one character for one character (same length, same offsets).

    U+0130 is the one character whose lowercase is two characters long; it becomes "i".
    """
    if "\u0130" in text:
        text = text.replace("\u0130", "i")
    return text.lower()


class _Rule(Struct, frozen=True, dict=True):  # (dict: the cached pattern)
    kind: str
    #: The rule's regular expression, compiled when the rule first runs (:attr:`pattern`):
    #: most ingests wake a few of the rules, and compiling them all cost every process ~5 ms.
    source: str
    #: The rule runs only if one of these substrings occurs in the text ...
    triggers: tuple[str, ...]
    #: ... (or in the folded text, where the pattern then runs too) ...
    folded: bool = False
    #: ... and, if given, one of these also matches there (in the folded text). Each gate is
    #: given with the trigger it starts with, and tried only where that trigger was found:
    #: elsewhere it cannot match (the Discord gate's "." too: folding keeps every ".").
    gates: tuple[tuple[str, re.Pattern[str]], ...] = ()
    #: Given a match, the kind to record (default: ``kind``). Never declines a match: a match
    #: left unchanged would still consume its text and could hide a secret inside it.
    classify: Callable[[re.Match[str]], str] | None = None

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source)


def _assignment_kind(m: re.Match[str]) -> str:
    return "aws-secret-key" if m["aws"] is not None else "secret-assignment"


_RULES: tuple[_Rule, ...] = (
    _Rule("private-key", _PEM, ("PRIVATE KEY",)),
    _Rule("jwt", _JWT, ("eyJ",)),
    _Rule("anthropic-key", _ANTHROPIC, ("sk-ant-",)),
    _Rule("openai-key", _OPENAI, ("sk-",)),
    _Rule("stripe-key", _STRIPE, ("k_live_", "k_test_")),
    _Rule(
        "github-token",
        _GITHUB,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    _Rule("slack-token", _SLACK, ("xox",)),
    _Rule("google-api-key", _GOOGLE, ("AIza",)),
    _Rule("aws-access-key", _AWS_ACCESS, ("AKIA", "ASIA")),
    _Rule("telegram-bot-token", _TELEGRAM, (":AA",)),
    _Rule(
        "discord-bot-token", _DISCORD, (".",),
        gates=((".", re.compile(_DISCORD_GATE)),),
    ),
    _Rule("webhook-token", _WEBHOOK, ("/api/webhooks/",)),
    _Rule("sentry-token", _SENTRY, ("sntrys_", "sntryu_")),
    _Rule("tavily-key", _TAVILY, ("tvly-",)),
    _Rule("jfrog-token", _JFROG, ("AKCp", "cmVmdGtu")),
    _Rule("dropbox-token", _DROPBOX, ("sl.",)),
    _Rule("azure-key", _AZURE_KEY, ("Key=",)),
    _Rule("azure-key", _AZURE_SAS, ("sig=",)),
    _Rule("url-password", _URL, ("://",)),
    _Rule("cli-password", _CURL_USER, (" -u ", "--user")),
    _Rule("cli-password", _SSHPASS, ("sshpass",)),
    _Rule("cli-password", _MYSQL, ("mysql",)),
    _Rule("cli-password", _FLAG, ("--",), folded=True),
    _Rule("bearer-token", _BEARER_HEADER, ("authorization",), folded=True),
    _Rule("bearer-token", _BEARER, ("bearer",), folded=True),
    _Rule("basic-auth", _BASIC, ("authorization",), folded=True),
    _Rule("google-oauth-token", _GOOGLE_OAUTH, ("ya29.",)),
    _Rule(
        "secret-assignment",
        _ASSIGNMENT,
        ("secret", "pass", "pwd", "token", "api", "credential"),
        folded=True,
        gates=_ASSIGNMENT_GATES,
        classify=_assignment_kind,
    ),
)

#: Every trigger once, with the rules it wakes: (substring, in the folded text?, rule ids).
_TRIGGERS: tuple[tuple[str, bool, tuple[int, ...]], ...] = tuple(
    (t, folded, tuple(i for i, r in enumerate(_RULES) if t in r.triggers and r.folded == folded))
    for t, folded in dict.fromkeys((t, r.folded) for r in _RULES for t in r.triggers)
)
#: Each trigger lowercased, once, and the triggers that lowercase to it. A trigger occurs in
#: the text only where its lowercase occurs in the folded text (folding is character for
#: character), so one pass over the folded text finds every candidate; a trigger of the text
#: as it is is then confirmed there, a substring test.
_LOWERED = tuple(dict.fromkeys(t.lower() for t, _, _ in _TRIGGERS))
_CANDIDATES = tuple(tuple(trig for trig in _TRIGGERS if trig[0].lower() == low) for low in _LOWERED)
#: Every occurrence of every lowercased trigger (``overlapping``) in the folded text's UTF-8
#: bytes: the triggers are ASCII, so they occur in the bytes exactly where in the text.
_FIND = BytesAhoCorasick([t.encode() for t in _LOWERED], implementation=Implementation.DFA)


def _active_rules(text: str) -> list[_Rule]:
    """The fast path: the rules whose trigger occurs in ``text``, in order; usually none.

    The folded text is searched for every trigger at once by an Aho-Corasick automaton: one
    pass over it in Rust, whatever the number of triggers. Measured against a substring test
    per trigger (``in``, 41 of them): 3-4 against 7-9 us for a detail of 140 characters, and
    a fraction of the time for the few KB of a session's saved state; a regex alternation of
    the triggers, tried position by position, is slower than both.
    """
    folded = _fold(text)
    hits = {i for i, _, _ in _FIND.find_matches_as_indexes(
        folded.encode("utf-8", "surrogatepass"), overlapping=True)}
    if not hits:
        return []
    woken: set[int] = set()
    found: set[str] = set()
    for i in hits:
        for trigger, in_folded, ids in _CANDIDATES[i]:
            if in_folded or trigger in text:
                woken.update(ids)
                found.add(trigger)
    rules = []
    for i in sorted(woken):
        rule = _RULES[i]
        if not rule.gates or any(
            trigger in found and gate.search(folded) for trigger, gate in rule.gates
        ):
            rules.append(rule)
    return rules


#: Texts that no rule can find a secret in: hex digits (hashes, ids), numbers, timestamps and
#: UUIDs. A bare hex run is a secret only in a context (``key=...``), which it then does not
#: have. The commonest texts of a row (hashes, times) are given back after one regex match.
PLAIN_TEXT = re.compile(r"[0-9a-fA-F:.,TZ +-]{0,100}")


def redact_counts(text: str) -> tuple[str, dict[str, int]]:
    """Same as :func:`redact`, but count the secrets per kind, e.g. ``{"aws-access-key": 1}``.

    Only kinds that were found appear in the dictionary.
    """
    if PLAIN_TEXT.fullmatch(text):
        return text, {}
    return _redacted_counts(text)


def _redacted_counts(text: str) -> tuple[str, dict[str, int]]:
    """:func:`redact_counts` of a text known not to be :data:`PLAIN_TEXT`."""
    counts: dict[str, int] = {}
    for rule in _active_rules(text):
        text = _apply(rule, text, counts)
    return _apply_rule_set(text, counts), counts


def redact(text: str) -> tuple[str, int]:
    """Return (text with every secret replaced by a typed marker, number of secrets replaced).

    Remembered for texts up to :data:`MEMO_CHARS` long (a bounded memo, cleared when full),
    its result too: redaction is idempotent, so a text that was redacted once, and what it
    became, are known at the cost of a dict lookup when they come back (the database writer
    redacts again every text the fold gave it; see :mod:`ledger.db.writes`).
    """
    known = _MEMO.get(text)
    if known is not None:
        return known
    if PLAIN_TEXT.fullmatch(text):  # not remembered: most such texts (hashes, times) are unique
        return text, 0
    cleaned, counts = _redacted_counts(text)
    result = (cleaned, sum(counts.values()))
    if len(text) <= MEMO_CHARS:
        if len(_MEMO) >= MEMO_ENTRIES:
            _MEMO.clear()
        _MEMO[text] = result
        if result[1]:
            _MEMO[cleaned] = (cleaned, 0)
    return result


MEMO_CHARS = 1024  # stored texts are cut to 500 characters at most (fold.DETAIL_MAX)
MEMO_ENTRIES = 16384
_MEMO: dict[str, tuple[str, int]] = {}


def forget() -> None:
    """The memo emptied (the same results, found again): for a process about to fork
    workers, each of which would copy the pages of the memo it goes on filling."""
    _MEMO.clear()


def redact_json(
    value: Any, redactor: Callable[[str], tuple[str, int]] | None = None
) -> tuple[Any, int]:
    """A JSON value with every string in it (keys too) redacted (by :func:`redact`, or
    ``redactor``), and the secrets found.

    The value itself when nothing was found, so a caller can keep its text as it was.
    """
    if isinstance(value, str):
        return (redactor or redact)(value)
    found = 0
    if isinstance(value, list):
        items = []
        for item in value:
            item, n = redact_json(item, redactor)
            items.append(item)
            found += n
        return (items if found else value), found
    if isinstance(value, dict):
        pairs = {}
        for key, item in value.items():
            key, n = (redactor or redact)(key) if isinstance(key, str) else (key, 0)
            item, m = redact_json(item, redactor)
            pairs[key] = item
            found += n + m
        return (pairs if found else value), found
    return value, 0


#: A token at the very end of a text: all of it, or its head if the text was cut inside it.
_CUT_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=.~:@%]+\Z")


def drop_cut_token(text: str) -> str:
    """``text`` without the token it ends in: a window cut out of a longer text may end inside
    a secret, whose head no rule would recognise, so that last token is dropped whole before
    the window is redacted."""
    return _CUT_TOKEN.sub("", text)


def _apply(rule: _Rule, text: str, counts: dict[str, int]) -> str:
    """Replace every match of ``rule`` in ``text``; a folded rule is matched in _fold(text)."""
    has_val = "val" in rule.pattern.groupindex
    parts: list[str] = []
    last = 0
    for m in rule.pattern.finditer(_fold(text) if rule.folded else text):
        # The secret always ends the match: keep what precedes it (from the text itself).
        start = m.start("val") if has_val else m.start()
        if is_placeholder(text[start : m.end()]):
            continue
        kind = rule.kind if rule.classify is None else rule.classify(m)
        counts[kind] = counts.get(kind, 0) + 1
        parts.append(text[last:start])
        parts.append(_MARKERS[kind])
        last = m.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _apply_rule_set(text: str, counts: dict[str, int]) -> str:
    """Replace what the maintained rule set finds in what the rules above left."""
    spans = [s for s in secret_spans(text) if not is_placeholder(text[s[0] : s[1]])]
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, end, kind in spans:
        counts[kind] = counts.get(kind, 0) + 1
        parts += [text[last:start], f"[REDACTED:{kind}]"]
        last = end
    parts.append(text[last:])
    return "".join(parts)


#: What marks a value as a placeholder, not a secret: a run of one character (``xxxxxxxx``,
#: ``********``, ``00000000``), an ellipsis, and the words of documentation and templates.
_PLACEHOLDER = re.compile(
    r"(.)\1{5,}|\.\.\.|…|example|your[_-]|changeme|change[_-]me|placeholder|redacted|dummy"
    r"|replace[_-]?me|insert[_-]|fixme|todo",
    re.IGNORECASE,
)


#: What opens a private key block's body: base64 lines, whose line ends JSON may escape.
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\s\\]*")


def _is_key_placeholder(block: str) -> bool:
    """A private key block with no key in it: its body opens with something other than
    base64 (``...``, ``<your key>``, nothing), or with a few characters cut short by an
    ellipsis (``MIIE...``). Not the allow-list of other secrets: a key's body encodes zero
    bytes as runs of ``A`` (every OpenSSH key's holds ``AAAAAA``) and its letters spell
    ``todo`` or ``dummy`` by chance."""
    parts = block.split("-----", 3)  # "", "BEGIN ... KEY", the body, what ends it
    body = parts[2] if len(parts) > 2 else ""
    lead = _PEM_BODY.match(body).group()  # (a match always, if only of "")
    size = len("".join(lead.replace("\\", " ").split()))
    cut_short = lead[-1:].isalnum() and body.startswith(("...", "\u2026"), len(lead))
    return size == 0 or (size < 16 and cut_short)


#: A would-be secret this long is a placeholder only where the allow-list's match stands
#: apart (see :func:`_stands_apart`): in a long random token, ``todo`` or ``Dummy`` occur by
#: chance (1 in some 7,000 random tokens of 200 characters held one), and it is still a key.
LONG_SECRET = 32


def is_placeholder(secret: str) -> bool:
    """Whether a would-be secret is a placeholder (the allow-list): ``ghp_xxxx...``,
    ``YOUR_API_KEY``, ``AKIAIOSFODNN7EXAMPLE``, ``password: changeme``, ``********``, a
    private key block with no key in it."""
    if secret.startswith("-----BEGIN"):
        return _is_key_placeholder(secret)
    if len(secret) < LONG_SECRET:
        return _PLACEHOLDER.search(secret) is not None
    return any(_stands_apart(secret, m) for m in _PLACEHOLDER.finditer(secret))


def _stands_apart(secret: str, m: re.Match[str]) -> bool:
    """Whether a match of the allow-list marks a long secret as a placeholder: a run of one
    character over half of it (``ghp_xxxx...``), an ellipsis, or a word with no letter or
    digit just before it nor, for a whole word, just after (``your_token_here``,
    ``sk-proj-example-key-...``), not ``...7tOdOq...`` inside a token."""
    if m.group(1) is not None:
        return 2 * (m.end() - m.start()) > len(secret)
    word = m.group()
    if not word[0].isalpha():  # "..." or its one character
        return True
    before = secret[m.start() - 1 : m.start()]
    after = "" if word[-1] in "_-" else secret[m.end() : m.end() + 1]
    return not (before.isascii() and before.isalnum()) and not (after.isascii() and after.isalnum())
