"""What a text must hold for a rule of the rule set to match it: a cheap test, run before the
rule set is loaded (:mod:`ledger.core.secret_rules`).

Loading Kingfisher's rule set costs a process about 0.3 s, more than everything else a hook
call does; most texts that pass its first prefilter (a run of 20 token characters: ids,
hyphenated words, paths) can match none of its rules. For each rule's pattern
:func:`need_of` derives a *need*: a regular expression that every match of the pattern
contains, read off the pattern's parse tree (a literal run such as ``heroku`` or ``ghp_``, a
fixed-width run such as ``[0-9a-f]{32}\\.``). Texts that hold none of the needs cannot give a
finding, so the rule set is not loaded for them and the redaction is the same.

A need only ever widens what the pattern matches (so it is sound): the pattern's flags are
dropped and the need is matched ignoring case (keeping it only for a pattern with no ``i``
flag anywhere, which Kingfisher matches keeping case: :func:`keeps_case`); a class with a
category (``\\w``) or a negation, ``.``, and anything of varying width end a run;
look-arounds and anchors are left out. A rule whose need cannot be derived makes every text
a candidate.

The needs of the installed rule set are generated into :mod:`ledger.core.secret_needs_table`
(``python -m ledger.core.secret_needs``, which loads the rules); that table is used only while
the installed scanner is the version it was made from (a test checks it is up to date).
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]
from typing import Any

from ahocorasick_rs import BytesAhoCorasick, Implementation

DIST = "kingfisher-secret-scanner"
#: Bits a position is worth: a letter or digit ignoring case is one of some 36 characters.
_LITERAL_BITS = math.log2(36)
_PRINTABLE = 95
#: Rust's POSIX classes, which Python's parser reads as nested sets.
_POSIX = {
    "[:alnum:]": "0-9A-Za-z", "[:alpha:]": "A-Za-z", "[:digit:]": "0-9",
    "[:xdigit:]": "0-9A-Fa-f", "[:upper:]": "A-Z", "[:lower:]": "a-z",
}


class _Vary(Exception):
    """An item of varying width (or one not understood): a run of fixed items ends here."""


#: One rule's needs: the words (letters and digits, case folded) of which a text that holds
#: its first need holds at least one (empty: no such word), and the needs, all required.
Entry = tuple[tuple[str, ...], tuple[str, ...]]


def could_match(text: str, entries: Sequence[Entry] | None) -> bool:
    """Whether ``text`` holds the needs of some rule (``None``: the needs are unknown, so
    every text might). A rule's needs are searched for only in a text that holds one of its
    words: a plain substring of the case-folded text (Kingfisher's ignoring of case folds
    Unicode's ``K`` and ``ſ`` to ASCII, as :meth:`str.casefold` does), every word of every
    rule looked for at once (an Aho-Corasick automaton, one pass over the folded text's
    bytes, where a word occurs exactly where it does in the text). Its needs are then asked
    the cheapest first (:func:`_plan`), each exactly as its regular expression would answer."""
    if entries is None:
        return True
    wordless, find, holders = _finder(entries)
    chosen = set(wordless)
    if find is not None:
        folded = text.casefold().encode("utf-8", "surrogatepass")
        for word in {w for w, _, _ in find.find_matches_as_indexes(folded, overlapping=True)}:
            chosen.update(holders[word])
    if not chosen:
        return False
    lowered = _lowered(text)
    return any(
        all(_plan(need)(text, lowered) for need in _cheapest_first(entries[i][1]))
        for i in sorted(chosen)
    )


#: The characters past ASCII that Python's ``re`` matches an ASCII letter with when it
#: ignores case (found by trying every code point): ``İ`` and ``ı`` match ``i``, ``ſ`` ``s``
#: and ``K`` ``k``; no other character matches an ASCII character, or lowers to one.
_MATCHED_AS_ASCII = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def _lowered(text: str) -> str:
    """``text`` in which an ASCII literal occurs exactly where ``re`` ignoring case finds it:
    ASCII lowered, and the four characters of :data:`_MATCHED_AS_ASCII` made the letter."""
    return (text if text.isascii() else text.translate(_MATCHED_AS_ASCII)).lower()


#: A need's test: (text, :func:`_lowered` text) -> whether the need occurs in the text.
Test = Callable[[str, str], bool]


@functools.cache
def _cheapest_first(needs: tuple[str, ...]) -> tuple[str, ...]:
    """A rule's needs, those that read as plain text first (all of them must be found, so the
    order changes no answer, only how soon a missing one ends the search; a need is parsed
    and planned only once asked, so a rule ended by a missing word costs no parse)."""
    return tuple(sorted(needs, key=lambda need: _SYNTAX.search(_ESCAPED.sub("", need)) is not None))


#: Escaped characters, and what else makes a need more than plain text.
_ESCAPED = re.compile(r"\\.")
_SYNTAX = re.compile(r"[()\[\]{}.*+?|^$]")


#: How a need is told (:func:`plan_of`): ``("any", literals)``, ``("run", members, count)``
#: or ``("gate", literals, runs)`` (``runs``: ``(members, count)`` pairs).
Plan = tuple[Any, ...]


@functools.cache
def _plan(need: str) -> Test:
    """The test of ``need``'s :func:`plan_of`, read from the generated table when it is
    there (no parse in the process: the needs a text wakes cost some 10 ms to parse)."""
    kind, *args = _table_plans().get(need) or plan_of(need)
    if kind == "any":
        (literals,) = args
        return lambda _text, lowered: any(lit in lowered for lit in literals)
    if kind == "run":
        held = _run_test(*args)
        return lambda _text, lowered: held(lowered)
    gate, runs = args
    tests = [_run_test(members, count) for members, count in runs]
    regex = functools.cache(lambda: re.compile(need, re.IGNORECASE))
    return lambda text, lowered: (
        any(lit in lowered for lit in gate)
        and all(held(lowered) for held in tests)
        and regex().search(text) is not None
    )


def _run_test(members: str, count: int) -> Callable[[str], bool]:
    """Whether a :func:`_lowered` text holds ``count`` characters of ``members`` in a row:
    its bytes translated (each member made ``a``, any other byte a space), one substring test."""
    table = bytes(ord("a") if chr(b) in members else ord(" ") for b in range(256))
    needle = b"a" * count
    return lambda lowered: needle in lowered.encode("utf-8", "surrogatepass").translate(table)


@functools.cache
def _table_plans() -> dict[str, Plan]:
    from ledger.core.secret_needs_table import PLANS

    return PLANS


def plan_of(need: str) -> Plan:
    """How to tell whether ``need`` (searched ignoring case) occurs in a text, as cheaply as
    its parse allows, always with the regular expression's answer: an alternation of ASCII
    literals (``any``) is a substring of the lowered text; a run of one class (``run``), a
    run of ``a`` in the lowered text's bytes with each member of the class made ``a`` and
    every other byte a space (one translation, one substring test, no expression compiled);
    anything else the expression, searched only once the lowered text holds one of the
    literals every match holds (``gate``, :func:`_gate`) and the runs of one class it is made
    of (:func:`_runs`: ``[0-9a-f]{32}``, told as a ``run`` is), compiled when first searched.
    A gate of one common character (``.``, ``-``) passes most long texts; a run of 32 hex
    digits, few: on the 2,019 saved states of the bench's real corpus (1.8 MB) the
    searches went from 7,833 to 843, and the needs' CPU from 0.42-0.59 s to 0.17-0.21 s."""
    items = list(P.parse(need))
    kept = _case_kept(items)
    if kept is not None:  # what the need holds ignoring case gates it, the expression tells
        return ("gate", _literals(kept) or _gate(kept) or ("",), _runs(kept))
    literals = _literals(items)
    if literals is not None:
        return ("any", literals)
    run = _class_run(items)
    if run is not None:
        members, count = run
        return ("run", "".join(sorted(members)), count)
    return ("gate", _gate(items) or ("",), _runs(items))


def _runs(items: list[tuple[Any, Any]]) -> tuple[tuple[str, int], ...]:
    """The runs of one class among ``items`` (each a :func:`_class_run`, so every match holds
    it), the rarest in random text first (``members`` as a ``run`` plan gives them)."""
    found = {
        ("".join(sorted(run[0])), run[1])
        for run in (_class_run([item]) for item in items) if run is not None
    }
    return tuple(sorted(found, key=lambda run: -run[1] * math.log2(_PRINTABLE / len(run[0]))))


def _case_kept(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]] | None:
    """The items of a need that is one ``(?-i:...)`` group (:func:`keeps_case`), else None."""
    if len(items) == 1 and items[0][0] is C.SUBPATTERN and items[0][1][2] & re.IGNORECASE:
        return list(items[0][1][3])
    return None


def _literals(items: list[tuple[Any, Any]]) -> tuple[str, ...] | None:
    """The ASCII texts (lowered) one of which every match of ``items`` is, if it is a literal
    run, an alternation of them or a class of literal characters; else None."""
    if len(items) == 1 and items[0][0] is C.BRANCH:
        branches = [_literals(list(b)) for b in items[0][1][1]]
        if any(b is None for b in branches):
            return None
        return tuple(lit for b in branches for lit in b)  # type: ignore[union-attr]
    if len(items) == 1 and items[0][0] is C.IN:
        members = items[0][1]
        if all(op is C.LITERAL and av <= 0x7F for op, av in members):
            return tuple(chr(av).lower() for _op, av in members)
        return None
    if items and all(op is C.LITERAL and av <= 0x7F for op, av in items):
        return ("".join(chr(av) for _op, av in items).lower(),)
    return None


def _class_run(items: list[tuple[Any, Any]]) -> tuple[set[str], int] | None:
    """``(members, count)`` if ``items`` are ``count`` characters of one class of ASCII
    literals and ranges; ``members``: its characters lowered. Ignoring case, a character
    matches the class exactly where its :func:`_lowered` self is a member (ASCII is lowered
    one for one, and the only others that match are the four made ASCII there)."""
    if len(items) != 1 or items[0][0] is not C.MAX_REPEAT:
        return None
    low, high, body = items[0][1]
    body = list(body)
    if low != high or len(body) != 1 or body[0][0] is not C.IN:
        return None
    members: set[str] = set()
    for op, av in body[0][1]:
        first, last = (av, av) if op is C.LITERAL else av if op is C.RANGE else (-1, 0x80)
        if first < 0 or last > 0x7F:
            return None
        members.update(chr(c).lower() for c in range(first, last + 1))
    return members, low


def _gate(items: list[tuple[Any, Any]]) -> tuple[str, ...] | None:
    """ASCII texts (lowered) one of which every match of ``items`` holds, the longest found
    among its literal runs (a class of one letter in either case, ``[Ss]``, is one), its
    classes of literals and its alternations of them; None if none is found."""
    found: list[tuple[str, ...]] = []
    run = ""
    for op, av in [*items, (None, None)]:
        one = _literals([(op, av)]) if op is not None else None
        if one is not None and len(set(one)) == 1 and len(one[0]) == 1:
            run += one[0]
            continue
        repeated = _literals(list(av[2])) if op is C.MAX_REPEAT and av[0] >= 1 else None
        if repeated is not None and len(repeated) == 1:  # (?:ab){3}: ababab, and more if wider
            run += repeated[0] * av[0]
            if av[0] == av[1]:
                continue
        if run:
            found.append((run,))
        run = ""
        if one is not None:
            found.append(tuple(dict.fromkeys(one)))
        elif op is C.BRANCH:
            branches = [_gate(list(b)) for b in av[1]]
            if all(branches):
                found.append(tuple(lit for b in branches for lit in b))  # type: ignore[union-attr]
    return max(found, key=lambda lits: min(map(len, lits)), default=None)


#: By the id of a table: the table (kept, so that its id is never another's), its entries
#: with no word, the automaton of all its words (None: it has none), and by word the entries
#: that have it.
_FINDERS: dict[int, tuple[Sequence[Entry], tuple[int, ...], Any, list[list[int]]]] = {}


def _finder(entries: Sequence[Entry]) -> tuple[tuple[int, ...], Any, list[list[int]]]:
    found = _FINDERS.get(id(entries))
    if found is None:
        by_word: dict[str, list[int]] = {}
        for i, (words, _needs) in enumerate(entries):
            for word in words:
                by_word.setdefault(word, []).append(i)
        wordless = tuple(i for i, (words, _needs) in enumerate(entries) if not words)
        find = BytesAhoCorasick(
            [w.encode("utf-8", "surrogatepass") for w in by_word],
            implementation=Implementation.DFA,
        ) if by_word else None
        found = _FINDERS[id(entries)] = (entries, wordless, find, list(by_word.values()))
    return found[1], found[2], found[3]


def installed_needs() -> tuple[Entry, ...] | None:
    """The table's needs if it was made from the installed scanner, else ``None``."""
    from ledger.core.installed import installed_version
    from ledger.core.secret_needs_table import NEEDS, VERSION

    return NEEDS if installed_version("kingfisher_sdk", DIST) == VERSION else None


def words_of(need: str) -> tuple[str, ...]:
    """Words one of which every match of ``need`` holds (case folded; empty if none)."""
    return tuple(sorted(_words(list(P.parse(need))) or ()))


def _words(items: list[tuple[Any, Any]]) -> set[str] | None:
    best: set[str] | None = None
    run = ""

    def consider(found: set[str] | None) -> None:
        nonlocal best
        if found and (best is None or min(map(len, found)) > min(map(len, best))):
            best = found

    for op, av in [*items, (None, None)]:
        if op is C.LITERAL and chr(av).isascii() and chr(av).isalnum():
            run += chr(av).casefold()
            continue
        consider({run} if len(run) >= 2 else None)
        run = ""
        if op is C.SUBPATTERN:
            consider(_words(list(av[3])))
        elif op is C.BRANCH:
            branches = [_words(list(b)) for b in av[1]]
            if all(branches):
                consider(set().union(*branches))  # type: ignore[arg-type]
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
            consider(_words(list(av[2])))
    return best


#: How many of a pattern's needs are kept (all of them must be found): a keyword and the
#: run the secret is made of (``token`` and 40 key characters) are rarer together than alone.
#: Three, not two: every session's saved state (JSON, redacted whole) holds ``session`` and
#: ``token``, the two rarest needs of AWS's session token rule, and loaded the rule set for
#: it in every ingest that wrote one; its third need, ``aws``, they do not hold.
KEPT = 3


def need_of(pattern: str) -> tuple[str, ...] | None:
    """Regular expressions every match of ``pattern`` (Kingfisher's Rust syntax) contains,
    each, to be searched ignoring case, the rarest first; ``None`` if none can be derived."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a nested set or set operation: not understood
            tree = P.parse(_python_syntax(pattern))
    except (re.error, FutureWarning, ValueError, RecursionError):
        return None
    found: list[str] = []
    for need in sorted(_candidates(list(tree)), key=_rarity, reverse=True):
        if need[0] not in found:
            found.append(need[0])
    if keeps_case(pattern):
        found = [f"(?-i:{need})" for need in found]
    return tuple(found[:KEPT]) or None


def keeps_case(pattern: str) -> bool:
    """Whether Kingfisher matches ``pattern`` (Rust's syntax) keeping case: it ignores case
    only under an ``i`` flag (``(?i)``, ``(?i:``, ``(?xi)``), and the engine adds none (Square's
    ``EAAA`` does not find ``eaaa``). Its needs are then searched keeping case too (each in a
    ``(?-i:...)`` group), so a hex id's ``eaaa`` wakes no rule. Anything read as an ``i`` flag
    (even inside a class) counts as one: ignoring case only widens the needs."""
    return re.search(r"\(\?[a-zA-Z]*i", pattern) is None


def _python_syntax(pattern: str) -> str:
    if "(?-u" in pattern or "\\p" in pattern or "\\P" in pattern:
        raise ValueError("byte or Unicode-property syntax")
    for posix, ascii_range in _POSIX.items():
        pattern = pattern.replace(posix, ascii_range)
    pattern = pattern.replace("\\z", "\\Z").replace("(?<", "(?P<").replace("(?P<=", "(?<=")
    pattern = pattern.replace("(?P<!", "(?<!")
    verbose = pattern.startswith("(?x)")
    pattern = re.sub(r"\(\?[imsU]+\)", "", pattern[4:] if verbose else pattern)
    if re.search(r"\(\?[a-zA-Z]*x", pattern):
        raise ValueError("a verbose flag inside the pattern")
    return ("(?x)" if verbose else "") + pattern


# A need is (regex, bits, literals): the regex, how rare a match of it is in random text
# (higher: rarer), and how many literal letters and digits it holds at least.
Need = tuple[str, float, int]
#: A need with this many literal letters or digits beats any without: in ledger text, runs
#: of token characters (ids, hashes, UUIDs) are common, and words (``heroku``, ``ghp``) rare.
_LITERALS_FIRST = 2


def _rarity(need: Need) -> tuple[bool, float]:
    return need[2] >= _LITERALS_FIRST, need[1]


def _sequence_need(items: list[tuple[Any, Any]]) -> Need | None:
    """The best need of a sequence: the rarest of its fixed runs and of its parts' needs."""
    return max(_candidates(items), key=_rarity, default=None)


def _candidates(items: list[tuple[Any, Any]]) -> list[Need]:
    """Every need of a sequence (a match holds each of them): its runs of fixed items, and
    the needs of its items of varying width (all of theirs, for a group that must occur)."""
    candidates: list[Need] = []
    run: list[Need] = []

    def close() -> None:
        if run:
            candidates.append(_joined(run))
            run.clear()

    for op, av in items:
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue  # zero width: leaving it out only widens the match
        try:
            run.append(_fixed(op, av))
            continue
        except _Vary:
            pass
        head, tail, inner = _varying(op, av)
        if head is not None:
            run.append(head)
        close()
        candidates += inner
        if tail is not None:
            run.append(tail)
    close()
    return candidates


def _joined(parts: list[Need]) -> Need:
    return "".join(p[0] for p in parts), sum(p[1] for p in parts), sum(p[2] for p in parts)


def _varying(op: Any, av: Any) -> tuple[Need | None, Need | None, list[Need]]:
    """An item of varying width: what it adds at the end of the run before it (``head``), at
    the start of the run after it (``tail``), and its own needs (``inner``)."""
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        low, _high, body = av
        if low == 0:
            return None, None, []
        try:
            regex, bits, literals = _fixed_sequence(list(body))
        except _Vary:
            return None, None, _candidates(list(body))
        least = (f"(?:{regex}){{{low}}}", bits * low, literals * low)
        return least, least, []
    if op is C.SUBPATTERN:
        return None, None, _candidates(list(av[3]))
    if op is C.ATOMIC_GROUP:
        return None, None, _candidates(list(av))
    if op is C.BRANCH:
        either = _either(_sequence_need(list(b)) for b in av[1])
        return None, None, [] if either is None else [either]
    return None, None, []


def _either(needs: Iterable[Need | None]) -> Need | None:
    """The need of an alternation: one of its branches' needs (none if a branch has none)."""
    found = list(needs)
    if not found or any(n is None for n in found):
        return None
    parts = [n for n in found if n is not None]
    # Ignoring case, a text holding one of the branches holds the alternation of them.
    return _alternation(parts)


def _alternation(parts: list[Need]) -> Need:
    regex = "(?:" + "|".join(p[0] for p in parts) + ")"
    return regex, min(p[1] for p in parts), min(p[2] for p in parts)


def _fixed_sequence(items: list[tuple[Any, Any]]) -> Need:
    return _joined([_fixed(op, av) for op, av in items if op not in (C.AT, C.ASSERT, C.ASSERT_NOT)])


def _fixed(op: Any, av: Any) -> Need:
    """An item of one character, or of a fixed number of them (raises :class:`_Vary`)."""
    if op is C.LITERAL and av <= 0x7F:
        return re.escape(chr(av)), _LITERAL_BITS, int(chr(av).isalnum())
    if op is C.IN:
        return _class(av)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) and av[0] == av[1]:
        regex, bits, literals = _fixed_sequence(list(av[2]))
        return f"(?:{regex}){{{av[0]}}}", bits * av[0], literals * av[0]
    if op is C.SUBPATTERN:
        regex, bits, literals = _fixed_sequence(list(av[3]))
        return f"(?:{regex})", bits, literals
    if op is C.BRANCH:
        branches = [_fixed_sequence(list(b)) for b in av[1]]
        widths = {_width(b[0]) for b in branches}
        if len(widths) != 1 or None in widths:
            raise _Vary
        return _alternation(branches)
    raise _Vary


def _class(members: list[tuple[Any, Any]]) -> Need:
    """A character class of ASCII literals and ranges; anything else (a category such as
    ``\\w``, a negation, a character past ASCII, which a byte-wise engine may read as one byte
    of a longer character) is not a fixed run: Rust's categories and Python's differ."""
    chars: list[tuple[int, int]] = []
    for op, av in members:
        if op is C.LITERAL:
            chars.append((av, av))
        elif op is C.RANGE:
            chars.append(av)
        else:
            raise _Vary
    body = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in chars
    )
    if any(b > 0x7F for _a, b in chars):
        raise _Vary
    size = sum(b - a + 1 for a, b in chars)
    return f"[{body}]", max(0.0, math.log2(_PRINTABLE / max(size, 1))), 0


def _width(regex: str) -> int | None:
    """The width of a fixed need (each of its alternatives alike), or None."""
    try:
        low, high = P.parse(regex).getwidth()
    except re.error:
        return None
    return low if low == high else None


def generate() -> str:
    """The text of :mod:`ledger.core.secret_needs_table` for the installed rule set."""
    from importlib.metadata import version

    from kingfisher_sdk import Rules

    from ledger.core.secret_rules import CONFIDENCE

    rules = Rules(confidence=CONFIDENCE)
    needs = {need_of(rules.detail(m["id"])["pattern"]) for m in rules.metadata()}
    lines = [
        '"""Generated by ``python -m ledger.core.secret_needs``: do not edit."""',
        "# ruff: noqa: E501",
        "",
        f"VERSION = {version(DIST)!r}",
    ]
    if None in needs:  # a rule has no need: every text is a candidate
        lines += ["NEEDS = None", "PLANS = {}"]
    else:
        entries = sorted((words_of(n[0]), n) for n in needs if n is not None)
        lines += ["NEEDS = ("] + [f"    ({w!r}, {n!r})," for w, n in entries] + [")"]
        plans = sorted({need for _words, each in entries for need in each})
        lines += ["PLANS = {"] + [f"    {n!r}: {plan_of(n)!r}," for n in plans] + ["}"]
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    Path(__file__).with_name("secret_needs_table.py").write_text(generate(), encoding="utf-8")
