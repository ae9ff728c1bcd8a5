"""Action classes of tool calls (ledger/core/actions.py, with the default map of
ledger/config/action_classes.toml): what each tool and shell command counts as."""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.config.action_map import (
    DEFAULT_FILE,
    ActionMapError,
    default_action_map,
    load_action_map,
    parse_action_map,
    remembered_default_map,
)
from ledger.core.actions import (
    READ,
    THINK,
    WRITE,
    ActionMap,
    action_map_entry,
    classify,
    classify_command,
    shell_command,
    shell_words,
)

DEFAULT = default_action_map()


@pytest.mark.parametrize(
    ("tool", "tool_input", "action"),
    [
        # Claude Code built-in tools
        ("Read", {"file_path": "/repo/a.py"}, READ),
        ("Grep", {"pattern": "TODO"}, READ),
        ("Glob", {"pattern": "**/*.py"}, READ),
        ("LS", {"path": "/repo"}, READ),
        ("WebFetch", {"url": "https://example.com"}, READ),
        ("WebSearch", {"query": "x"}, READ),
        ("BashOutput", {"bash_id": "1"}, READ),
        ("Edit", {"file_path": "a.py"}, WRITE),
        ("MultiEdit", {"file_path": "a.py"}, WRITE),
        ("Write", {"file_path": "a.py"}, WRITE),
        ("NotebookEdit", {"notebook_path": "a.ipynb"}, WRITE),
        ("KillBash", {"shell_id": "1"}, WRITE),
        ("Task", {"prompt": "look around"}, WRITE),  # no sub-agent type: fail closed
        ("Task", {"subagent_type": "general-purpose", "prompt": "fix it"}, WRITE),
        ("Task", {"subagent_type": "Explore", "prompt": "look around"}, READ),
        ("Agent", {"subagent_type": "Plan"}, READ),
        ("Task", {"subagent_type": "solution-architect"}, WRITE),  # a type no entry names
        ("TodoWrite", {"todos": []}, THINK),
        ("TaskCreate", {}, THINK),
        ("ExitPlanMode", {"plan": "..."}, THINK),
        ("Bash", {"command": "ls -la"}, READ),
        ("Bash", {"command": "rm -rf build"}, WRITE),
        # Codex CLI tools
        ("shell", {"command": ["bash", "-lc", "rg --files"]}, READ),
        ("shell", '{"command": ["bash", "-lc", "cargo build"]}', WRITE),
        ("exec_command", '{"cmd": "git status"}', READ),
        ("exec_command", '{"cmd": "npm install"}', WRITE),
        ("local_shell_call", {"type": "exec", "command": ["cat", "README.md"]}, READ),
        ("write_stdin", '{"session_id": 3, "chars": ""}', READ),  # a poll for output
        ("write_stdin", '{"session_id": 3, "chars": "y\\n"}', WRITE),
        ("apply_patch", "*** Begin Patch\n...", WRITE),
        ("update_plan", '{"plan": []}', THINK),
        ("read_file", '{"path": "a"}', READ),
        ("web_search_call", {"type": "search"}, READ),
        # MCP tools, whatever the server is called in the user's config
        ("mcp__fs__read_text_file", {"path": "a"}, READ),
        ("mcp__filesystem__write_file", {"path": "a"}, WRITE),
        ("mcp__supabase_ops__list_tables", {}, READ),
        ("mcp__supabase_ops__execute_sql", {"query": "select 1"}, WRITE),
        ("mcp__linear-server__create_issue", {}, WRITE),
        ("mcp__thinking__sequentialthinking", {}, THINK),
    ],
)
def test_built_in_tools_have_a_class(tool: str, tool_input: Any, action: str) -> None:
    assert classify(tool, tool_input, DEFAULT)[:2] == (action, True)


@pytest.mark.parametrize("tool", ["mcp__weather__get_weather", "getWeather", "js_eval", "", None])
def test_a_tool_the_map_does_not_name_fails_closed(tool: str | None) -> None:
    assert classify(tool, {"city": "Oslo"}, DEFAULT)[:2] == (WRITE, False)


@pytest.mark.parametrize(
    ("command", "action", "detail"),
    [
        # read-only commands, pipelines and chains of them
        ("ls -la", READ, "ls"),
        ("cat README.md | head -20", READ, "cat"),
        ("git -C /repo log --oneline 2>&1 | head -5", READ, "git log"),
        ("git --no-pager diff HEAD~1", READ, "git diff"),
        ("cd src && grep -rn TODO . || true", READ, "cd"),  # a read: named by its first part
        ("find . -name '*.py' -type f 2>/dev/null | wc -l", READ, "find"),
        ("rg --files -g 'AGENTS.md'", READ, "rg"),
        ("(cd web && ls)", READ, "cd"),
        ("for f in $(ls *.md); do wc -l $f; done", READ, "wc"),
        ("GOMODCACHE=$(go env GOMODCACHE) && ls $GOMODCACHE", READ, "ls"),
        ("echo $((1 + 2))", READ, "echo"),
        ("command -v jq", READ, "command -v"),
        ("ls | xargs -I{} cat {}", READ, "ls"),
        ("timeout 10 cat big.log", READ, "cat"),
        ("bash -lc 'git status --short'", READ, "git status"),
        ("sort -n data.txt | uniq -c", READ, "sort"),
        ("git branch -a", READ, "git branch -a"),
        ("node --version", READ, "node"),
        ("ls # then clean up", READ, "ls"),
        ("while read line; do echo $line; done < list.txt", READ, "read"),
        ("pip -q list", READ, "pip list"),
        # dry test runs: nothing under test runs
        ("pytest --collect-only -q", READ, "pytest --collect-only"),
        ("python -m pytest --co", WRITE, "python"),  # python runs code: the map names pytest
        ("make -n build", READ, "make -n"),
        # test runs execute the code under test: writes
        ("pytest -q", WRITE, "pytest"),
        ("npm test", WRITE, "npm"),
        ("go test ./...", WRITE, "go"),
        # anything that changes files, refs, packages or processes
        ("cd .. && mkdir -p src", WRITE, "mkdir"),
        ("git add -A && git commit -m 'x'", WRITE, "git"),
        ("git branch -vD old", WRITE, "git branch -D"),
        ("git stash", WRITE, "git"),
        ("git stash list", READ, "git stash list"),
        ("pip install requests", WRITE, "pip"),
        ("pip list", READ, "pip list"),
        ("sed -i 's/a/b/' f.txt", WRITE, "sed -i"),
        ("sed -ni 's/a/b/p' f.txt", WRITE, "sed -i"),
        ("sed -n '1,5p' f.txt", READ, "sed"),
        ("sort -o out.txt in.txt", WRITE, "sort -o"),
        ("find . -name '*.pyc' -delete", WRITE, "find -delete"),
        ("find . -exec rm {} +", WRITE, "find -exec"),
        ("awk '{print > \"out\"}' in.txt", WRITE, "awk"),
        ("awk '{print $1}' in.txt", READ, "awk"),
        ("ls | xargs rm", WRITE, "rm"),
        ("echo hi > notes.txt", WRITE, "echo"),
        ("echo hi >> notes.txt", WRITE, "echo"),
        ("ls 2>&1 >/dev/null", READ, "ls"),
        ("cat a | tee b", WRITE, "tee"),
        ("sudo ls /root", WRITE, "sudo"),
        ("ls; rm -rf /tmp/x", WRITE, "rm"),
        ("cd x&&(rm -rf y)", WRITE, "rm"),  # operators run together without spaces
        ("ls;\nrm x", WRITE, "rm"),
        ("ls|&rm x", WRITE, "rm"),
        ("find . -fprint0 list", WRITE, "find -fprint0"),
        ("ls\nrm -rf /tmp/x", WRITE, "rm"),
        ("ls # note\nrm x", WRITE, "rm"),
        ("echo $(rm -rf x)", WRITE, "rm"),
        ("echo `touch x`", WRITE, "touch"),
        ("cat <<EOF > f\nhi\nEOF", WRITE, None),  # a here-document: nothing to vouch for
        ("echo 'unbalanced", WRITE, None),
        ("", WRITE, None),
        ("./deploy.sh --prod", WRITE, "deploy.sh"),
        ("FOO=1 python script.py", WRITE, "python"),
        ("kill -9 1234", WRITE, "kill"),
    ],
)
def test_shell_commands_are_classed_by_what_they_run(
    command: str, action: str, detail: str | None
) -> None:
    assert classify_command(command, DEFAULT) == (action, True, detail)


@pytest.mark.parametrize(
    ("tool_input", "command"),
    [
        ({"command": "ls"}, "ls"),
        ({"cmd": "ls -la"}, "ls -la"),
        ({"command": ["bash", "-lc", "ls"]}, "ls"),
        ({"command": ["git", "status", "a b"]}, "git status 'a b'"),
        ('{"cmd": "pwd"}', "pwd"),
        ("[REDACTED_ARGUMENTS len=83]", None),  # a public sample's redacted arguments
        ({"command": 3}, None),
        (None, None),
    ],
)
def test_the_shell_command_of_a_tool_input(tool_input: Any, command: str | None) -> None:
    assert shell_command(tool_input) == command


def test_a_shell_tool_without_a_command_is_a_write() -> None:
    assert classify("exec_command", "[REDACTED_ARGUMENTS len=83]", DEFAULT)[:2] == (WRITE, True)


@given(st.lists(st.sampled_from(["ls", "cat f", "git status", "grep x f", "rm f", "touch f",
                                 "pytest", "echo a > f"]), min_size=1, max_size=5),
       st.sampled_from([" | ", " && ", " || ", "; ", "\n"]))
def test_a_chain_is_a_read_only_if_every_part_is(parts: list[str], joiner: str) -> None:
    each = {classify_command(p, DEFAULT).action for p in parts}
    whole = classify_command(joiner.join(parts), DEFAULT).action
    assert whole == (WRITE if WRITE in each else READ)


@given(st.lists(st.sampled_from(["ls", "cat f", "git status", "rm f", "(touch f)", "echo a>f",
                                 "pytest"]), min_size=2, max_size=5),
       st.lists(st.sampled_from(["|", "&&", "||", ";", "\n", "&"]), min_size=4, max_size=4))
def test_spaces_around_operators_change_nothing(parts: list[str], joiners: list[str]) -> None:
    tight = parts[0] + "".join(j + p for j, p in zip(joiners, parts[1:], strict=False))
    spaced = parts[0] + "".join(f" {j} {p}" for j, p in zip(joiners, parts[1:], strict=False))
    assert classify_command(tight, DEFAULT) == classify_command(spaced, DEFAULT)


def _shlex_words(text: str) -> list[str] | None:
    lexer = shlex.shlex(text, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # a quotation or an escape left open
        return None


@given(st.text(alphabet="ab \t\r\n();<>|&'\"\\$`#=-\u00e9", max_size=30))
def test_shell_words_split_as_shlex_does(text: str) -> None:
    assert shell_words(text) == _shlex_words(text)


@pytest.mark.parametrize("text", [
    "", "   ", "a'b c'd", "'' x", '"a\\"b\\\\c\\d"', "a\\ b", "x\\", "'open", '"open',
    "cat > f << 'EOF'\nhi\nEOF", "a&&(b;c)|d", 'echo ";" &', "x\\\n y",
])
def test_shell_words_on_the_edges(text: str) -> None:
    assert shell_words(text) == _shlex_words(text)


# --- the map file ----------------------------------------------------------------------------


def test_every_default_entry_cites_its_source() -> None:
    text = (Path(__file__).parents[2] / "ledger/config/action_classes.toml").read_text()
    tools = text.split("\n[tools]\n")[1].split("\n[commands]\n")[0]
    section = ""
    for line in tools.splitlines():
        if line.startswith("#"):
            section = line
        elif "=" in line and not line.startswith('"mcp__'):
            assert "# CC" in line or "# CX" in line, line
        elif line.startswith('"mcp__'):
            assert section, line  # under a comment naming the server it comes from


def write_map(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "actions.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _same_map(found: ActionMap) -> bool:
    return (found.tools, found.patterns, found.commands, found.digest) == (
        DEFAULT.tools, DEFAULT.patterns, DEFAULT.commands, DEFAULT.digest)


@pytest.mark.parametrize("cached", [
    None,  # no cache yet: the file is parsed, and its parse kept
    "remembered",  # the parse kept by the call before
    '{"key": [0, 0], "data": {"tools": {"Bash": "read"}}}',  # of another file: parsed again
    "not json",
    '{"data": 3}',
])
def test_the_remembered_default_map_is_the_default_map(tmp_path: Path, cached: str | None) -> None:
    cache = tmp_path / "action_map.json"
    if cached == "remembered":
        remembered_default_map(cache)
    elif cached is not None:
        cache.write_text(cached, encoding="utf-8")
    assert _same_map(remembered_default_map(cache))
    assert _same_map(remembered_default_map(cache))  # and from what this call kept
    assert json.loads(cache.read_bytes())["key"][0] == DEFAULT_FILE.stat().st_size


def test_a_cache_that_cannot_be_written_is_not_used(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    assert _same_map(remembered_default_map(tmp_path / "a-file" / "action_map.json"))
    assert _same_map(remembered_default_map(tmp_path / "new-folder" / "action_map.json"))
    assert (tmp_path / "new-folder" / "action_map.json").exists()


def test_a_user_map_extends_the_default(tmp_path: Path) -> None:
    mine = load_action_map(write_map(tmp_path, """
[tools]
"mcp__weather__get_weather" = "read"
"mcp__*__get_*" = "read"
SlashCommand = "unclassified"
"Task:code-reviewer" = "read"
Grep = "write"
[commands]
"mise run lint" = "read"
"rg" = "write"
"""))
    assert classify("mcp__weather__get_weather", {}, mine)[:2] == (READ, True)
    assert classify("mcp__jira__get_ticket", {}, mine)[:2] == (READ, True)
    assert classify("SlashCommand", {}, mine)[:2] == (WRITE, False)
    assert classify("Task", {"subagent_type": "code-reviewer"}, mine) == (READ, True,
                                                                          "code-reviewer")
    assert classify("Grep", {}, mine)[:2] == (WRITE, True)
    assert classify("Read", {}, mine)[:2] == (READ, True)  # the default still applies
    assert classify_command("mise run lint", mine).action == READ
    assert classify_command("mise run deploy", mine).action == WRITE
    assert classify_command("rg TODO", mine).action == WRITE
    assert mine.digest != DEFAULT.digest


def test_a_user_glob_is_tried_before_the_defaults(tmp_path: Path) -> None:
    mine = load_action_map(write_map(tmp_path, '[tools]\n"mcp__*__execute_*" = "read"\n'))
    assert classify("mcp__db__execute_sql", {}, mine).action == READ


def test_replace_starts_from_an_empty_map(tmp_path: Path) -> None:
    mine = load_action_map(write_map(tmp_path, 'replace = true\n[tools]\nRead = "read"\n'))
    assert classify("Read", {}, mine)[:2] == (READ, True)
    assert classify("Grep", {}, mine)[:2] == (WRITE, False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[tools\n", "invalid TOML"),
        ("[other]\n", 'unknown top-level key or table "other"'),
        ("replace = 1\n", "'replace' must be true or false"),
        ("tools = 3\n", "'tools' must be a table"),
        ('[tools]\nRead = "retry"\n', "[tools] 'Read' = 'retry': expected one of think, read"),
        ('[tools]\nRead = 1\n', "expected one of"),
        ('[commands]\nls = "think"\n', "[commands] 'ls' = 'think': expected one of read, write"),
        ('[commands]\n" " = "read"\n', "[commands] has an empty key"),
    ],
)
def test_a_bad_map_names_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = write_map(tmp_path, text)
    with pytest.raises(ActionMapError) as caught:
        load_action_map(path)
    assert str(path) in str(caught.value) and message in str(caught.value)


def test_an_empty_map_classes_nothing() -> None:
    empty = parse_action_map({}, "nothing", ActionMap())
    assert classify("Read", {}, empty)[:2] == (WRITE, False)
    assert classify("Read", {}, ActionMap())[:2] == (WRITE, False)


@pytest.mark.parametrize(
    "tool", ["mcp__foo__bar", 'odd "quoted" \\ name', "tab\there", "ünïcode", "mcp__a.b__c"]
)
def test_the_paste_ready_line_round_trips(tool: str) -> None:
    line = action_map_entry(tool)
    assert tomllib.loads(line) == {tool: "write"}
    assert classify(tool, {}, parse_action_map(tomllib.loads(f"[tools]\n{line}"), "x"))[:2] == (
        WRITE, True)
