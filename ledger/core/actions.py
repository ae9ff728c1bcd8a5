"""Action classes for tool calls: every call of a real agent log is a think, read or write.

Seed 002: "Map every tool to an action class ... If you cannot classify it, do not register the
tool. Unclassified tools are how silent writes sneak in." An agent log cannot refuse a tool
after the fact, so an unclassified tool *fails closed* instead: it counts as a write for the
budget, and the verdicts list it as a meter gap until the map names it.

The map (:class:`ActionMap`, read from TOML by :mod:`ledger.config.action_map`) has two parts:

* ``tools``: a tool name (or a glob such as ``mcp__*__read_file``) to ``think``, ``read``,
  ``write``, ``shell`` (classed by its command, below), ``stdin`` (input typed into a running
  command: a read when it sends nothing, a poll for output; else a write) or ``agent`` (a
  sub-agent, classed by its type: the entry ``"Task:Explore"``; a type no entry names is a
  write);
* ``commands``: the words a shell command starts with (``"git status"``), optionally with
  flags (``"sed -i"``, ``"pytest --collect-only"``), to ``read`` or ``write``.

A shell command is split into its simple commands (pipelines, ``&&``/``||``/``;`` chains,
subshells, ``$(...)`` substitutions) and is a read only if every one of them is: a command no
entry matches is a write, an output redirect to a file, ``tee``, a here-document or ``sudo``
make it a write. The most specific matching entry (the most words) wins; between entries as
specific, ``write`` wins. Retries (the same call after it failed) are told apart by the
importers, which see the results: :mod:`ledger.formats.agent_records`.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import shlex
from collections.abc import Mapping
from functools import cached_property
from typing import Any, NamedTuple

from msgspec import Struct, field

from ledger.core.vendors import quote

THINK, READ, WRITE, RETRY = "think", "read", "write", "retry"
SHELL = "shell"
STDIN = "stdin"
AGENT = "agent"
#: What a ``[tools]`` entry may say.
TOOL_VALUES = (THINK, READ, WRITE, SHELL, STDIN, AGENT)
#: What the entry of a sub-agent type (``"Task:Explore"``) may say.
PLAIN_VALUES = (THINK, READ, WRITE)
#: What a ``[commands]`` entry may say.
COMMAND_VALUES = (READ, WRITE)

#: Keys of a tool's input that hold its shell command (Claude Code ``Bash``: ``command``;
#: Codex ``shell``: ``command`` as an argv list; ``exec_command``: ``cmd``).
COMMAND_KEYS = ("command", "cmd")
#: Keys of a ``stdin`` tool's input that hold the text it sends (Codex ``write_stdin``).
STDIN_KEYS = ("chars", "input", "text")
#: Keys of an ``agent`` tool's input that name the sub-agent's type (Claude Code ``Task``).
AGENT_KEYS = ("subagent_type", "agent_type")
#: ``bash -c SCRIPT`` and the like: the script is classed, not the shell.
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
#: Commands that run the command after their own options: that command is classed.
WRAPPERS = frozenset({"env", "time", "nice", "nohup", "command", "exec", "timeout", "xargs"})
#: Options of a wrapper (or of git, before its subcommand) that take the next word.
OPTION_ARGS: Mapping[str, frozenset[str]] = {
    "git": frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "xargs": frozenset({"-I", "-n", "-P", "-L", "-d", "-s", "-E", "-a", "--max-args",
                        "--max-procs", "--delimiter", "--arg-file", "--replace"}),
}
#: Shell words that open or close a compound command: they run nothing themselves.
KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until",
                      "esac", "{", "}", "!", "function"})
#: Compound headers whose own words run nothing (``for f in *.py``).
HEADERS = frozenset({"for", "select", "case"})
SEPARATORS = frozenset({"|", "||", "&&", ";", "&", ";;", "|&", "(", ")", "\n", ";&", ";;&"})
INPUT_REDIRECTS = frozenset({"<", "<<<", "<&"})
HERE_DOCUMENTS = frozenset({"<<", "<<-"})
#: Every operator the lexer may run together without spaces (``&&(``, ``;\n``), longest first.
OPERATORS = tuple(sorted(
    SEPARATORS | INPUT_REDIRECTS | HERE_DOCUMENTS
    | {">", ">>", ">&", "&>", "&>>", ">|", "<>"},
    key=len, reverse=True,
))
_PUNCTUATION = "();<>|&\n"
#: Redirect targets that store nothing.
HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
#: Arguments that make any program only print about itself.
ABOUT_ITSELF = frozenset({"--version", "--help"})
#: Commands that are writes whatever the map says: another user's rights, a file written.
ALWAYS_WRITES = frozenset({"sudo", "doas", "su", "tee"})
#: Programs whose program text may write (``awk '{print > "f"}'``, ``system()``).
AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
_AWK_WRITES = re.compile(r">|\||system\s*\(")
_SAFE_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+\-]{0,39}\Z")
_SHORT_BUNDLE = re.compile(r"-[A-Za-z]+\Z")


class Classified(NamedTuple):
    """A tool call's class, whether the map knew the tool, and what may be stored about it:
    the tool's command key (``git status``), never its input."""

    action: str
    known: bool
    detail: str | None = None


CommandKey = tuple[str, ...]


class ActionMap(Struct, frozen=True, dict=True):  # (dict: room for the cached lookups)
    """Tool names and shell commands to action classes (see the module docstring).

    ``tools`` holds exact names, ``patterns`` glob names in the order they are tried (the
    user's before the defaults), ``commands`` the shell entries by their words.
    """

    tools: Mapping[str, str] = field(default_factory=dict)
    patterns: tuple[tuple[str, str], ...] = ()
    commands: Mapping[CommandKey, str] = field(default_factory=dict)

    @cached_property
    def _by_program(self) -> dict[str, list[_Entry]]:
        found: dict[str, list[_Entry]] = {}
        for key, value in self.commands.items():
            found.setdefault(key[0], []).append(_Entry.of(key, value))
        for entries in found.values():  # most specific first; write before read among equals
            entries.sort(key=lambda e: (-len(e.key), e.value != WRITE))
        return found

    @cached_property
    def digest(self) -> str:
        """A short, stable name for this map (part of the fold digest: a changed map re-folds)."""
        data = {
            "tools": dict(sorted(self.tools.items())),
            "patterns": list(self.patterns),
            "commands": sorted([" ".join(k), v] for k, v in self.commands.items()),
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def tool_value(self, name: str) -> str | None:
        """The map's entry for a tool name: exact first, then the first glob that matches."""
        found = self.tools.get(name)
        if found is not None:
            return found
        return next((v for p, v in self.patterns if fnmatch.fnmatchcase(name, p)), None)

    def command_entry(self, words: list[str]) -> tuple[CommandKey, str] | None:
        """The most specific ``commands`` entry matching one simple command's words."""
        program = _base(words[0])
        entries = self._by_program.get(program)
        if not entries:
            return None
        rest = _after_options(program, words[1:])  # after git -C repo, pip -q, ...
        for entry in entries:
            if entry.matches(rest, words):
                return entry.key, entry.value
        return None


class _Entry(NamedTuple):
    """A ``commands`` entry, its words parted into subcommands and flags once."""

    key: CommandKey
    value: str
    subcommands: list[str]
    flags: tuple[str, ...]

    @classmethod
    def of(cls, key: CommandKey, value: str) -> _Entry:
        return cls(key, value, [w for w in key[1:] if not w.startswith("-")],
                   tuple(w for w in key[1:] if w.startswith("-")))

    def matches(self, rest: list[str], words: list[str]) -> bool:
        """Whether the entry matches a simple command's words (``rest``: its arguments after
        the program's own options): its subcommands are the first of ``rest``, its flags
        appear anywhere. A write flag also matches inside a bundle (``-ni`` has ``-i``)."""
        if rest[: len(self.subcommands)] != self.subcommands:
            return False
        loose = self.value == WRITE
        return all(any(_flag_matches(f, w, loose) for w in words[1:]) for f in self.flags)


def action_map_entry(tool: str, action: str = WRITE) -> str:
    """A ready-to-paste line for the ``[tools]`` table of an action map file, e.g.
    ``"mcp__foo__bar" = "write"`` (the fail-closed class, until someone picks the real one)."""
    return f"{quote(tool)} = {quote(action)}"


def command_key(text: str) -> CommandKey:
    """A ``[commands]`` key as written (``"git status"``) as the words it matches."""
    return tuple(text.split())


def classify(name: str | None, tool_input: Any, actions: ActionMap) -> Classified:
    """The action class of one tool call. ``known`` is false when the map does not name the
    tool: the call is then a write (fail closed) and a gap in the write meter."""
    value = actions.tool_value(name) if name else None
    if value is None:
        return Classified(WRITE, False)
    if value == SHELL:
        command = shell_command(tool_input)
        if command is None:
            return Classified(WRITE, True)
        return classify_command(command, actions)
    if value == STDIN:
        sent = _field(tool_input, STDIN_KEYS)
        return Classified(READ if sent in ("", None) else WRITE, True)
    if value == AGENT:
        kind = _field(tool_input, AGENT_KEYS)
        if not isinstance(kind, str):
            return Classified(WRITE, True)
        found = actions.tool_value(f"{name}:{kind}")
        detail = kind if _SAFE_WORD.match(kind) else None
        return Classified(found if found in PLAIN_VALUES else WRITE, True, detail)
    return Classified(value, True)


def shell_command(tool_input: Any) -> str | None:
    """The shell command of a tool's input: a string, or an argv list (``bash -lc SCRIPT``
    gives SCRIPT); None when the input holds none."""
    found = _field(tool_input, COMMAND_KEYS)
    if isinstance(found, str):
        return found
    if isinstance(found, list) and found and all(isinstance(w, str) for w in found):
        if len(found) >= 3 and _base(found[0]) in SHELLS and found[1].startswith("-") and (
            "c" in found[1]
        ):
            return found[2]
        return shlex.join(found)
    return None


def _field(tool_input: Any, keys: tuple[str, ...]) -> Any:
    """The first of ``keys`` in a tool's input (a dict, or JSON text of one, as Codex logs)."""
    if isinstance(tool_input, str) and tool_input.startswith("{"):
        try:
            tool_input = json.loads(tool_input)
        except ValueError:
            return None
    if not isinstance(tool_input, dict):
        return None
    return next((tool_input[k] for k in keys if k in tool_input), None)


def classify_command(command: str, actions: ActionMap) -> Classified:
    """A shell command: a read only if every simple command in it is a read."""
    outer, inner = _substitutions(command)
    parts = _simple_commands(outer)
    if parts is None:  # unbalanced quotes, a here-document: nothing to vouch for
        return Classified(WRITE, True)
    results = [_classify_words(words, actions) for words in parts]
    results += [classify_command(text, actions) for text in inner]
    if not results:
        return Classified(WRITE, True)  # an empty command: nothing to vouch for either
    chosen = next((r for r in results if r.action == WRITE), None) or next(
        (r for r in results if r.detail), results[0]
    )
    return Classified(chosen.action, True, chosen.detail)


def _classify_words(words: list[str], actions: ActionMap) -> Classified:
    """One simple command (redirects already turned into a ``>`` word for a file written)."""
    writes = ">" in words
    words = [w for w in words if w != ">"]
    words = _unwrapped(words)
    if not words:
        return Classified(WRITE if writes else READ, True, None)
    program = _base(words[0])
    if program in SHELLS and len(words) >= 3 and words[1].startswith("-") and "c" in words[1]:
        inner = classify_command(words[2], actions)
        return inner if not writes else Classified(WRITE, True, inner.detail)
    entry = None if program in ALWAYS_WRITES else actions.command_entry(words)
    if entry is not None:
        key, action = entry
        detail = " ".join(key)
        if program in AWKS and any(_AWK_WRITES.search(w) for w in words[1:]):
            action = WRITE
    else:
        detail = program if _SAFE_WORD.match(program) else None
        action = READ if len(words) == 2 and words[1] in ABOUT_ITSELF else WRITE
    return Classified(WRITE if writes else action, True, detail)


def _unwrapped(words: list[str]) -> list[str]:
    """Drop leading assignments, keywords and wrappers: the words of the command that runs."""
    while words:
        first = words[0]
        if first in HEADERS:
            return []
        if first in KEYWORDS or _is_assignment(first):
            words = words[1:]
            continue
        program = _base(first)
        if program not in WRAPPERS:
            return words
        if program == "command" and any(w in ("-v", "-V") for w in words[1:2]):
            return ["command", "-v"]
        words = _after_options(program, words[1:])
        if program == "timeout" and words:
            words = words[1:]  # the duration
    return words


def _after_options(program: str, words: list[str]) -> list[str]:
    """The words after a program's own leading options (and assignments, for ``env``)."""
    takes = OPTION_ARGS.get(program, frozenset())
    i = 0
    while i < len(words) and (words[i].startswith("-") or _is_assignment(words[i])):
        i += 2 if words[i] in takes else 1
    return words[i:]


def _is_assignment(word: str) -> bool:
    name, sep, _ = word.partition("=")
    return bool(sep) and name.isidentifier()


def _flag_matches(flag: str, word: str, loose: bool) -> bool:
    if word == flag or (flag.startswith("--") and word.startswith(flag + "=")):
        return True
    if not loose or len(flag) != 2:
        return False
    return word.startswith(flag) or (bool(_SHORT_BUNDLE.match(word)) and flag[1] in word[1:])


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _simple_commands(text: str) -> list[list[str]] | None:
    """The simple commands of a shell text, each as its words; a redirect that stores output
    in a file becomes the word ``>``. None when the text cannot be vouched for."""
    words = shell_words(text)
    if words is None:  # no closing quotation
        return None
    tokens = [t for token in words for t in _operators(token)]
    parts: list[list[str]] = [[]]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in SEPARATORS:
            parts.append([])
        elif token in HERE_DOCUMENTS:
            return None
        elif token in INPUT_REDIRECTS:
            i += 0 if i + 1 < len(tokens) and tokens[i + 1] == "(" else 1
        elif ">" in token and set(token) <= _REDIRECTING:
            current = parts[-1]
            if current and current[-1].isdigit():
                current.pop()  # the file descriptor of 2>
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            if target == "(":
                pass  # >(cmd): a process substitution, classed as the subshell it is
            else:
                i += 1
                if not (target in HARMLESS_TARGETS or (token.endswith("&") and (
                    target.isdigit() or target == "-"
                ))):
                    current.append(">")
        else:
            parts[-1].append(token)
        i += 1
    return [p for p in parts if p and not p[0].startswith("#")]


_UNQUOTED = r"[^ \t\r();<>|&\n'\"\\]"
_QUOTED = r"'[^']*+'|\"(?:[^\"\\]|\\.)*+\"|\\."
_TOKEN = re.compile(
    rf"[ \t\r]*+(?:((?:{_UNQUOTED}|{_QUOTED})++)|([{re.escape(_PUNCTUATION)}]++))", re.DOTALL
)
_REDIRECTING = frozenset("<>&|")  # the characters of a redirect's operator
_OPERATOR_RUN = re.compile(f"[{re.escape(_PUNCTUATION)}]+")
_BLANK = re.compile(r"[ \t\r]*+\Z")
_QUOTING = re.compile(r"'([^']*+)'|\"((?:[^\"\\]|\\.)*+)\"|\\(.)", re.DOTALL)
_ESCAPED_IN_DOUBLE = re.compile(r"\\([\"\\])")


def shell_words(text: str) -> list[str] | None:
    """The words and operator runs of a shell text, exactly as ``shlex.shlex(text, posix=True,
    punctuation_chars="();<>|&\\n")`` with ``whitespace=" \\t\\r"``, ``whitespace_split``
    and no comment characters gives them (a test holds the two equal), None where it raises
    (a quotation or an escape left open). Regular expressions instead of its character-by-
    character loop: a long command (a here-document, a commit message) costs microseconds,
    not milliseconds."""
    words: list[str] = []
    pos, end = 0, len(text)
    match = _TOKEN.match
    while True:
        found = match(text, pos)
        if found is None:
            return words if _BLANK.match(text, pos) else None
        word = found.group(1)
        if word is None:
            words.append(found.group(2))
        elif "'" in word or '"' in word or "\\" in word:
            words.append(_QUOTING.sub(_unquoted, word))
        else:
            words.append(word)
        pos = found.end()
        if pos == end:
            return words


def _unquoted(part: re.Match[str]) -> str:
    single, double, escaped = part.groups()
    if single is not None:
        return single
    if double is not None:  # only a quote or a backslash can be escaped in double quotes
        return _ESCAPED_IN_DOUBLE.sub(r"\1", double)
    return escaped


def _operators(token: str) -> list[str]:
    """A run of operator characters (the lexer gives ``&&(`` as one token) as its operators;
    any other token as it is."""
    if not token or token[0] not in _PUNCTUATION or _OPERATOR_RUN.fullmatch(token) is None:
        return [token]  # (a word, told by its first character for most: no regex call)
    found = []
    while token:
        operator = next(op for op in OPERATORS if token.startswith(op))
        found.append(operator)
        token = token[len(operator):]
    return found


_SUBSTITUTION_CHARS = re.compile(r"['\"$`]")
_PARENS = re.compile(r"[()]")


def _substitutions(text: str) -> tuple[str, list[str]]:
    """``$(...)`` and backquoted commands taken out of a shell text (each is run, so each is
    classed), leaving a placeholder word; ``$((...))`` is arithmetic and runs nothing."""
    out: list[str] = []
    inner: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        special = _SUBSTITUTION_CHARS.search(text, i)  # any other character is kept as it is
        if special is None:
            out.append(text[i:])
            break
        out.append(text[i:special.start()])
        i = special.start()
        char = text[i]
        if char == "'" and not quoted:
            end = text.find("'", i + 1)
            end = len(text) - 1 if end < 0 else end
            out.append(text[i:end + 1])
            i = end + 1
            continue
        if char == '"':
            quoted = not quoted
        if text.startswith("$((", i):
            end = _closing(text, i + 2)
            out.append("0")
            i = end + 2
            continue
        if text.startswith("$(", i):
            end = _closing(text, i + 1)
            inner.append(text[i + 2:end])
            out.append("_")
            i = end + 1
            continue
        if char == "`":
            end = text.find("`", i + 1)
            end = len(text) if end < 0 else end
            inner.append(text[i + 1:end])
            out.append("_")
            i = end + 1
            continue
        out.append(char)
        i += 1
    return "".join(out), inner


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis closing the one at ``start`` (the text's end if none)."""
    depth = 0
    for paren in _PARENS.finditer(text, start):
        if paren.group() == "(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return paren.start()
    return len(text)
