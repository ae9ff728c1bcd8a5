"""Secrets found by a maintained rule set: Kingfisher's built-in rules, run in-process.

The rules are those that ``kingfisher-secret-scanner`` (MongoDB's Kingfisher) ships: the rule
set of Betterleaks (the successor of Gitleaks, by its author) and Google's Veles detectors,
some 490 vendor token formats, each with the scanner project's own filters against
placeholders and low-entropy look-alikes. They are compiled once per process by Kingfisher's
Rust engine (Vectorscan), which caches the compiled database on disk; a scan never touches the
network. ``bench/secret_detectors.py`` compares it with the alternatives (``docs/ingest.md``
says why this one).

Speed: a text that has no run of :data:`MIN_RUN` token characters (``/`` and ``.`` not
counted: they cut paths and host names into words) is not handed to the engine at all (its
bytes translated and one substring test, in C). The formats of the rule set are tokens of
that length or longer; a key that ``/`` cuts short is base64, which the first pass recognises
by its context (``AccountKey=``, ``aws_secret_access_key``). Most ingested text (tool names,
short details, paths, prose) stops there. A text that passes it is then searched for what
some rule's pattern needs (:mod:`ledger.core.secret_needs`: ``heroku``, ``ghp_``, ...): ids,
hashes and hyphenated words hold none, and the rule set is not even loaded until a text holds one.

Pure in the sense that matters here: the same text always gives the same spans.
"""

from __future__ import annotations

import _thread
import functools
import os
import re
import string
from pathlib import Path
from typing import Any

from ledger.core.secret_needs import could_match, installed_needs

__all__ = ["MIN_RUN", "kind_of", "rule_kinds", "secret_spans"]

#: The run of token characters (not counting ``/`` and ``.``, which split paths and host
#: names into short words) that a text must have for the rule set to look at it.
MIN_RUN = 20
RUN_CHARS = string.ascii_letters + string.digits + "_+=~%-"
#: The prefilter, on the text's UTF-8 bytes: each byte of a token character made ``a``, any
#: other byte a space (the token characters are ASCII, so a run of them is a run of ``a``),
#: then one substring test. Three to four times as fast as the regex search
#: ``[A-Za-z0-9_+=~%-]{20}``, which the engine tries position by position.
_RUN_BYTES = bytes(ord("a") if chr(i) in RUN_CHARS else ord(" ") for i in range(256))
_RUN = b"a" * MIN_RUN
#: A span is widened to the whole token around it: a rule that matched only part of a token
#: (its head, or a tail after a prefix) must not leave the rest behind.
_BEFORE = re.compile(r"[A-Za-z0-9_+/~%-]*\Z")
_AFTER = re.compile(r"[A-Za-z0-9_+/~%-]*=*")
#: The prefixes of Kingfisher's rule ids, dropped from the marker's kind.
_ID_PREFIXES = ("betterleaks.", "kingfisher.", "veles.secrets/", "veles.", "custom.")
#: Every confidence level (the scanner's own filters still drop placeholders).
CONFIDENCE = "low"


#: Held while the rule set loads: a process loads it once, whichever thread asks first (an
#: ingest loads it on a thread of its own, :func:`ledger.ingest.parallel.Workers`); any other
#: that asks meanwhile waits for it. (``_thread``: the hook's light path imports no threading.)
_LOADING = _thread.allocate_lock()


class NotLoaded(Exception):
    """Raised where the rule set would be loaded, in a process told not to load it
    (:func:`refuse_loading`)."""


_REFUSED = [False]


def refuse_loading() -> None:
    """From now on a text that needs the rule set raises :class:`NotLoaded` in this process
    instead of loading it: a worker forked without it hands its file back, and the process it
    was forked from loads it once for all (:class:`ledger.ingest.parallel.Workers`)."""
    _REFUSED[0] = True


@functools.cache
def _scanner() -> Any:
    if _REFUSED[0]:
        raise NotLoaded
    with _LOADING:
        return _built()


@functools.cache
def _built() -> Any:
    from kingfisher_sdk import Rules, Scanner

    # No Base64 decoding: a secret inside Base64 is stored as Base64 text, and its span is the
    # encoding.
    return Scanner(Rules(confidence=CONFIDENCE, cache_dir=_cache_dir()), base64=False)


def load() -> None:
    """The rule set loaded now (or once the thread loading it is done): for a process about
    to fork workers that will scan much (they share it, and each skips the needs once it is
    there: :func:`secret_spans`), or a server before it answers."""
    _scanner()


def loaded() -> bool:
    """Whether this process holds the rule set (not while a thread is loading it)."""
    return _scanner.cache_info().currsize > 0


def engine_file() -> str:
    """The rule engine's native library (Rust and Vectorscan): most of what :func:`load`
    reads of it is read only then (see :func:`ledger.ingest.memory.give_back`)."""
    from kingfisher_sdk import _native

    return str(_native.__file__)


_needs = functools.cache(installed_needs)


#: How many bytes of text the needs are asked about before the rule set is loaded instead.
#: The needs cost about 0.15 us a byte of a long text (the 1.8 MB of saved states of the
#: bench's real corpus, Claude Code and Codex: 0.27-0.31 s in one process, each state waking
#: some 24 rules, whose weak gates are searched only past a run of their class) and 0.3 us
#: a byte of short ones (the real logs' texts), loading the rules 0.4 s once: so a process
#: that has asked about this much loads them, as a renter buys what it has paid the price of
#: in rent (at most about twice the cost of knowing in advance). A hook's call or an ingest
#: of a few new lines stays well under it; so does that corpus folded in one process (1.84
#: MB asked, no text needing the rules: they are never loaded).
NEEDS_BUDGET = 2_000_000
_asked = [0]


def _asked_enough(size: int) -> bool:
    """Count ``size`` bytes more asked of the needs; whether :data:`NEEDS_BUDGET` is spent."""
    _asked[0] += size
    return _asked[0] > NEEDS_BUDGET


def _cache_dir() -> str | None:
    """Where the compiled rules are cached: the library's own choice (``KF_RULE_CACHE_DIR``,
    else the user's cache folder), or, in an environment with no home (a hook, a service, a
    bare ``env -i``), a folder of this user's own under the temporary folder, where the library
    would cache nothing and compile the rules again in every process (seconds each)."""
    if any(os.environ.get(v) for v in ("KF_RULE_CACHE_DIR", "XDG_CACHE_HOME", "HOME")):
        return None
    import tempfile  # only here: it imports shutil and random, some 4 ms of every ingest

    folder = Path(tempfile.gettempdir()) / f"agent-ledger-rules-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)  # the library refuses a folder others can write
    return str(folder)


def rule_kinds() -> frozenset[str]:
    """Every kind of marker the rule set can give (one per rule)."""
    return frozenset(kind_of(rule["id"]) for rule in _scanner().rules.metadata())


def kind_of(rule_id: str) -> str:
    """The marker kind of a rule: its id without the rule set's prefix (``gitlab-pat``)."""
    for prefix in _ID_PREFIXES:
        if rule_id.startswith(prefix):
            rule_id = rule_id[len(prefix) :]
            break
    return re.sub(r"[^a-z0-9]+", "-", rule_id.lower()).strip("-") or "secret"


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """The secrets the rule set finds in ``text``: (start, end, kind), sorted, not overlapping.

    Each secret is located in ``text`` by its value (every occurrence of it), widened to the
    token it sits in.
    """
    data = text.encode("utf-8", "surrogatepass")
    if _RUN not in data.translate(_RUN_BYTES):
        return []
    # The needs spare a process that has not loaded the rules from loading them; once they
    # are loaded, the scanner itself is cheaper than the needs' searches (an ingest ran in
    # half the CPU) and finds the same, since a text lacking the needs matches no rule.
    if not loaded() and not _asked_enough(len(data)):
        if not could_match(text, _needs()):
            return []
    found: list[tuple[int, int, str]] = []
    for finding in _scanner().scan(data):
        secret = finding.secret
        if len(secret) < 8:  # a rule whose value is a fragment: its wider match is kept below
            continue
        kind = kind_of(finding.rule_id)
        start = text.find(secret)
        while start >= 0:
            end = start + len(secret)
            before = _BEFORE.search(text, 0, start)
            after = _AFTER.match(text, end)
            found.append((before.start() if before else start, after.end() if after else end,
                          kind))
            start = text.find(secret, end)
    return _disjoint(found)


def _disjoint(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Overlapping spans merged (the first one's kind kept), in order."""
    out: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(spans):
        if out and start <= out[-1][1]:
            last = out[-1]
            out[-1] = (last[0], max(last[1], end), last[2])
        else:
            out.append((start, end, kind))
    return out
