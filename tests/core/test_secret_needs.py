"""What a text must hold before the rule set is loaded: sound for every rule, cheap for ids."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core import secret_needs, secret_rules
from ledger.core.secret_needs import could_match, installed_needs, need_of, words_of

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def rules() -> dict[str, str]:
    """Every rule's pattern (loads the rule set once for this module)."""
    from kingfisher_sdk import Rules

    book = Rules(confidence=secret_rules.CONFIDENCE)
    return {m["id"]: book.detail(m["id"])["pattern"] for m in book.metadata()}


def python_pattern(pattern: str) -> re.Pattern[str] | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            flags = 0 if secret_needs.keeps_case(pattern) else re.IGNORECASE
            return re.compile(secret_needs._python_syntax(pattern), flags)
    except (re.error, FutureWarning, ValueError):
        return None


@pytest.mark.parametrize(
    ("pattern", "needs", "words"),
    [
        ("(?i)ghp_[0-9a-zA-Z]{36}", ("ghp_(?:[0-9a-zA-Z]){36}",), ("ghp",)),
        # With no i flag anywhere Kingfisher keeps case, and so do the needs (the words, a
        # prefilter of the case-folded text, are the same).
        ("ghp_[0-9a-zA-Z]{36}", ("(?-i:ghp_(?:[0-9a-zA-Z]){36})",), ("ghp",)),
        (r"\b((?:EAAA|sq0atp-)[\w-]{22,60})", (r"(?-i:(?:EAAA|sq0atp\-))",), ("eaaa", "sq0atp")),
        # A scoped i flag, anywhere, makes the whole pattern's needs ignore case.
        ("EAAA[a-z]{3}(?i:x)", ("EAAA(?:[a-z]){3}(?:x)",), ("eaaa",)),
        # A keyword beats a longer run of a class (ids are runs of classes), and both are kept.
        (r"(?i)(?:heroku)(?:[ \t\w.-]{0,20})=([0-9a-f]{8}-[0-9a-f]{4})",
         ("heroku", r"=(?:(?:[0-9a-f]){8}\-(?:[0-9a-f]){4})"), ("heroku",)),
        # An alternation's need: one of its branches (its common head factored out).
        (r"(?i)\b((?:A3T[A-Z0-9]|AKIA|ASIA)[A-Z2-7]{16})\b",
         ("(?:A(?:3T[A-Z0-9]|KIA|SIA)(?:[A-Z2-7]){16})",), ("3t", "kia", "sia")),
        ("(?i)(?:ghu|ghs)_[0-9a-zA-Z]{36}", ("gh[us]_(?:[0-9a-zA-Z]){36}",), ("gh",)),
        # A repeat of varying width ends a run, and its least count starts the next one.
        (r"(?i)[a-f0-9]{32,40}\.x", (r"(?:[a-f0-9]){32}\.x", "(?:[a-f0-9]){32}"), ()),
        (r"(?i)pat[[:alnum:]]{14}\.", (r"pat(?:[0-9A-Za-z]){14}\.",), ("pat",)),
        # A class or literal past ASCII is no part of a run (a byte-wise engine may match one
        # byte of a longer character there).
        (r"(?i)[\x00-\xff]abc[a-z]{30}", ("abc(?:[a-z]){30}",), ("abc",)),
        ("(?i)éabc[a-z]{3}", ("abc(?:[a-z]){3}",), ("abc",)),
        # Not understood: no need, so every text is a candidate.
        (r"\p{L}{30}", None, None),
    ],
)
def test_need_of(
    pattern: str, needs: tuple[str, ...] | None, words: tuple[str, ...] | None
) -> None:
    found = need_of(pattern)
    assert found == needs
    assert (words_of(found[0]) if found is not None else None) == words


def test_the_table_is_made_from_the_installed_rule_set() -> None:
    table = ROOT / "ledger/core/secret_needs_table.py"
    assert table.read_text(encoding="utf-8") == secret_needs.generate(), (
        "run: python -m ledger.core.secret_needs"
    )
    assert installed_needs() is not None


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_text_a_rule_matches_holds_its_need(data: st.DataObject) -> None:
    """Texts a rule's pattern matches (drawn from the pattern, with text around them) pass
    :func:`could_match`; those Kingfisher itself finds a secret in, in particular."""
    rule = data.draw(st.sampled_from(sorted(rules())))
    compiled = python_pattern(rules()[rule])
    assert compiled is not None, rule  # every rule of this rule set is understood
    text = data.draw(st.from_regex(compiled, fullmatch=False), label=rule)
    assert could_match(text, installed_needs()), (rule, text)


def test_every_rule_has_a_need() -> None:
    assert [rule for rule, pattern in rules().items() if need_of(pattern) is None] == []


NO_CANDIDATE = [
    "258c7280-ae70-4798-800f-63464d01a85d",
    "/home/me/.claude/projects/-home-me-proj/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
    "toolu_01ABCdefGHIjklMNOpqrSTUvwx msg_014JNhngjN2p7S7sWot8tf58 5c945e1bf142aeaf5c945e1bf142",
    "claude-code-subagent-sidechain consecutive_tool_errors",
    json.dumps({"id": "258c7280-ae70-4798-800f-63464d01a85d", "steps": 12, "cost": 0.5}),
    # A saved state's shape: a hex id holding eaaa (Square's EAAA keeps case), false (fal.ai's
    # fal), dots and hyphens (weak gates, searched only past a run of 32 hex digits).
    json.dumps({"id": "5c945e1bf142eaaa5c945e1bf142", "open": False, "tool": "a.b-c_d",
                "session": "258c7280-ae70-4798-800f-63464d01a85d", "key": "sk-lf-skills"}),
]


def _rules_loaded_after(texts: list[str]) -> bool:
    """Whether redacting ``texts`` in a fresh process loads the rule set."""
    code = (
        "import json, sys\n"
        "from ledger.core.redact import redact\n"
        "from ledger.core import secret_rules\n"
        "for t in json.loads(sys.stdin.read()): redact(t)\n"
        "print(json.dumps(['kingfisher_sdk' in sys.modules,"
        " secret_rules._scanner.cache_info().currsize]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True,
        check=True,
    )
    imported, loaded = json.loads(out.stdout)
    return bool(imported or loaded)


def test_text_with_no_candidate_never_loads_the_rules() -> None:
    assert not _rules_loaded_after(NO_CANDIDATE)


def test_text_with_a_candidate_loads_them() -> None:
    assert _rules_loaded_after(["heroku: 8463c716-a2ea-4c14-9efa-87158ebd9f20"])


def _ids(count: int) -> list[str]:
    """Texts of 740 bytes that pass the run prefilter and hold no rule's needs, all different."""
    return [f"{i:08d}-ae70-4798-800f-63464d01a85d " * 20 for i in range(count)]


@pytest.mark.parametrize(("share", "loaded"), [(0.1, False), (1.1, True)])
def test_the_rules_are_loaded_once_the_needs_were_asked_about_enough_text(
    share: float, loaded: bool
) -> None:
    """Past NEEDS_BUDGET bytes asked of the needs, loading the rules costs less than asking
    on (a long ingest's saved states): they are loaded; a tenth of that leaves them alone."""
    count = int(secret_rules.NEEDS_BUDGET * share / 740) + 1
    assert _rules_loaded_after(_ids(count)) is loaded


SQUARE = "token EAAAbKr8xQ2mZ7pLw9VnT3hJ5cYfD1gS4uA6eB0oN done"


@pytest.mark.parametrize(
    ("text", "found"),
    [(SQUARE, True), (SQUARE.replace("EAAA", "eaaa"), False),
     (SQUARE.replace("EAAA", "EaAA"), False), (SQUARE.lower(), False)],
)
def test_a_pattern_with_no_i_flag_keeps_case_in_the_engine_and_in_its_need(
    text: str, found: bool
) -> None:
    """What :func:`secret_needs.keeps_case` relies on: Kingfisher finds Square's token (a
    pattern with no i flag) only as written, and its need says the same."""
    assert secret_needs.keeps_case(rules()["betterleaks.square-access-token"])
    kinds = {f.rule_id for f in secret_rules._scanner().scan(text.encode())}
    assert ("betterleaks.square-access-token" in kinds) is found
    assert could_match(text, installed_needs()) is found


def test_an_unknown_rule_set_makes_every_text_a_candidate() -> None:
    assert could_match("258c7280-ae70-4798-800f-63464d01a85d", None)


NEEDS = installed_needs() or ()
WORDS = sorted({w for words, _needs in NEEDS for w in words})
NEEDS_TEXT = st.lists(
    st.one_of(st.sampled_from(WORDS or ["heroku"]), st.sampled_from(WORDS or ["heroku"]).map(
        str.upper), st.text(max_size=4), st.sampled_from(
        ["=", ": ", "-", "_", "\u212a", "\u017f", "\u0130", "\u00df", "\ud83d", "0" * 32])),
    max_size=12,
).map("".join)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(text=NEEDS_TEXT)
def test_could_match_is_its_definition(text: str) -> None:
    """The one pass for every word chooses the rules the definition does: a rule whose words
    include one the case-folded text holds (or that has none), and then all its needs."""
    folded = text.casefold()
    expected = any(
        (not words or any(w in folded for w in words))
        and all(re.compile(need, re.IGNORECASE).search(text) for need in needs)
        for words, needs in NEEDS
    )
    assert could_match(text, NEEDS) == expected


def test_the_characters_matched_as_ascii_ignoring_case_are_the_four_folded() -> None:
    """What :func:`secret_needs._lowered` relies on, over every code point: past ASCII, only
    the four characters it maps match an ASCII character ignoring case, and none lowers to one
    (but ``İ``, which it maps first)."""
    every = "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000)
    matched = set(re.findall("[\x00-\x7f]", every, re.IGNORECASE))
    assert matched == {"\u0130", "\u0131", "\u017f", "\u212a"}
    assert {c for c in every if not c.lower().isascii() and any(
        x.isascii() for x in c.lower())} == {"\u0130"}
    assert {c: secret_needs._lowered(c) for c in matched} == {
        "\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


ALL_NEEDS = sorted({need for _words, needs in NEEDS for need in needs})
#: Characters a damaged match is given: the four re matches as ASCII, and others near them.
DAMAGE = ["", " ", "-", "_", ".", "\u0130", "\u0131", "\u017f", "\u212a", "\u00df", "I", "k", "S"]


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_each_need_is_told_as_its_expression_tells_it(data: st.DataObject) -> None:
    """A need's cheap test (a substring, a search from a run's start, a gated search) gives
    its regular expression's answer, on texts drawn from it and then damaged in places."""
    need = data.draw(st.sampled_from(ALL_NEEDS))
    text = data.draw(st.from_regex(re.compile(need, re.IGNORECASE), fullmatch=False))
    for at, char in data.draw(st.lists(
        st.tuples(st.integers(0, max(len(text) - 1, 0)), st.sampled_from(DAMAGE)), max_size=3,
    )):
        text = text[:at] + char + text[at + 1:]
    expected = re.search(need, text, re.IGNORECASE) is not None
    assert secret_needs._plan(need)(text, secret_needs._lowered(text)) is expected, (need, text)


RUNS = [need for need in ALL_NEEDS if secret_needs._class_run(list(re._parser.parse(need)))]
#: Every character that matches an ASCII one ignoring case (the test above: no other does).
ASCII_LIKE = [chr(c) for c in range(0x80)] + ["\u0130", "\u0131", "\u017f", "\u212a"]


@pytest.mark.parametrize("need", RUNS)
def test_a_class_run_holds_each_character_its_expression_matches(need: str) -> None:
    """A run of one class, told by translating bytes, admits a character exactly where the
    expression ignoring case does (a run of it, with what cannot match around it)."""
    count = secret_needs._class_run(list(re._parser.parse(need)))[1]
    test = secret_needs._plan(need)
    for char in ASCII_LIKE:
        text = "\u00e9" + char * count + "\u00e9"
        expected = re.search(need, text, re.IGNORECASE) is not None
        assert test(text, secret_needs._lowered(text)) is expected, (need, char)
        cut = char * (count - 1)
        assert not test(cut, secret_needs._lowered(cut))
