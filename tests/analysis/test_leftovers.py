"""Leftover categories and patterns: what each finds, what it leaves alone, how to configure."""

from __future__ import annotations

import re

import pytest

from ledger.analysis.leftovers import (
    CATEGORIES,
    SKIP_DIRS,
    Category,
    Finding,
    PatternsError,
    Tally,
    load_categories,
    scan_text,
    to_markdown,
)

BY_NAME = {c.name: c for c in CATEGORIES}

# (category, a line it must find, a line it must leave alone)
CASES = [
    # seed 000's first rg: max_iterations|tool_limit|continue_on_error|agent.loop
    ("loop_setting", "max_iterations: 40", "iterations = 3"),
    ("loop_setting", "TOOL_LIMIT = 5".lower(), "tool = limit"),
    ("loop_setting", "continue_on_error=True", "continue-on-error: true"),
    ("loop_setting", "from vendor import agent.loop", "the agent's loop"),  # . is any char
    ("loop_setting", "agent_loop: enabled", "agentloop"),
    # seed 000's second rg: PAID_AGENT|CODING_AGENT_URL|RESUME_THREAD
    ("paid_agent_path", "PAID_AGENT_TOKEN=xyz", "paid_agent_token"),
    ("paid_agent_path", "url = os.environ['CODING_AGENT_URL']", "CODING_AGENT"),
    ("paid_agent_path", "RESUME_THREAD=1", "resume thread"),
    ("ide_extension", '    "GitHub.copilot",', '    "ms-python.python",'),
    ("ide_extension", '"continue.enableTabAutocomplete": true', '"cursor": "abc123"'),
    ("ide_extension", "const model = await vscode.lm.selectChatModels()", "vscode.window"),
    ("ide_extension", "tests.onDidChangeTestResults(() => askAgent())", "onDidChange"),
    ("ci_retry", "      - uses: nick-fields/retry@v3", "      - uses: actions/checkout@v4"),
    ("ci_retry", "  retry: 2", "  script: retry.sh"),
    ("ci_retry", "  retry:", "if retry: pass"),
    ("ci_retry", "    when: [stuck_or_timeout_failure]", "    when: manual"),
    ("ci_retry", "          retry_on: timeout", "          retry_on: error"),
    ("ci_retry", "@retry(stop=stop_after_attempt(3))", "@retry"),
    ("ci_retry", "# retry the agent on timeout", "# retry the agent"),
    ("resume_webhook", "client.beta.threads.runs.submit_tool_outputs(", "submit_output("),
    ("resume_webhook", "create(previous_response_id=last)", "response_id = x"),
    ("resume_webhook", "graph.invoke(Command(resume=answer), config)", "Command(goto=x)"),
    ("resume_webhook", "@app.post('/webhook')  # continue the run", "@app.post('/webhook')"),
    ("resume_webhook", "def resume_thread(thread_id):", "def resume(thread_id):"),
    ("continue_prompt", 'CONTINUE_PROMPT = "go on"', 'CONTINUED = "x"'),
    ("continue_prompt", "prompt = 'Please continue where you left off.'", "continue"),
    ("continue_prompt", '{"role": "user", "content": "continue"}', '{"content": "continued"}'),
    ("continue_prompt", "auto_continue: true", "autocomplete: true"),
    ("file_watcher", "from watchdog.observers import Observer", "import logging"),
    ("file_watcher", "chokidar.watch('.').on('change', runAgent)", "watch(x)"),
    ("file_watcher", "fs.watch(dir, () => agent())", "fs.readFile(dir)"),
    ("file_watcher", "inotifywait -m src | while read f; do agent; done", "notify -m"),
    ("file_watcher", "ls *.py | entr agent run", "ls *.py | sort"),
    ("vendor_dashboard", '"expr": "rate(vendor_iterations_total[5m])"', '"expr": "up"'),
    ("vendor_dashboard", "agent_rounds_count", "rounds_played"),
    ("vendor_dashboard", "copilot_turns", "turns"),
]


@pytest.mark.parametrize(("name", "hit", "miss"), CASES)
def test_each_category_finds_its_leftovers_and_leaves_the_rest(name, hit, miss) -> None:
    category = BY_NAME[name]
    assert [f.category for f in scan_text("f", hit, [category])] == [name]
    assert scan_text("f", miss, [category]) == []


def test_the_seed_patterns_are_the_seeds_own() -> None:
    assert BY_NAME["loop_setting"].patterns == (
        "max_iterations|tool_limit|continue_on_error|agent.loop",
    )
    assert BY_NAME["paid_agent_path"].patterns == ("PAID_AGENT|CODING_AGENT_URL|RESUME_THREAD",)


def test_the_six_leftovers_of_the_seed_are_all_there() -> None:
    assert [c.name for c in CATEGORIES][2:] == [
        "ide_extension", "ci_retry", "resume_webhook", "continue_prompt", "file_watcher",
        "vendor_dashboard",
    ]
    assert all(c.action and c.description for c in CATEGORIES)


def test_one_finding_per_line_and_category_with_line_numbers() -> None:
    text = "a\nmax_iterations = tool_limit\n\nPAID_AGENT max_iterations\n"
    found = scan_text("x.py", text, CATEGORIES)
    assert [(f.line, f.category, f.matched) for f in found] == [
        (2, "loop_setting", "max_iterations"),
        (4, "loop_setting", "max_iterations"),
        (4, "paid_agent_path", "PAID_AGENT"),
    ]
    assert found[0] == Finding("x.py", 2, "loop_setting", "max_iterations",
                               "max_iterations = tool_limit")


def test_a_line_without_a_newline_and_crlf_endings() -> None:
    found = scan_text("x", "ok\r\nmax_iterations: 3\r\nmax_iterations", CATEGORIES[:1])
    assert [(f.line, f.text) for f in found] == [(2, "max_iterations: 3"), (3, "max_iterations")]


def test_secrets_on_a_matching_line_are_redacted() -> None:
    line = "PAID_AGENT_KEY=sk-ant-api03-AAAAbbbbCCCCdddd1234EEEE"
    (found,) = scan_text(".env", line, [BY_NAME["paid_agent_path"]])
    assert "sk-ant" not in found.text
    assert found.text == "PAID_AGENT_KEY=[REDACTED:anthropic-key]"


def test_a_long_line_is_cut_to_a_window_around_the_match() -> None:
    line = "x" * 1000 + " max_iterations " + "y" * 1000
    (found,) = scan_text("min.js", line, CATEGORIES[:1])
    assert "max_iterations" in found.text
    assert found.text.startswith("…") and found.text.endswith("…")
    assert len(found.text) <= 202


@pytest.mark.parametrize(
    ("paths", "path", "applies"),
    [
        ((), "any/file.py", True),
        (("*.yml",), "ci/deep/build.yml", True),  # no slash: the file name
        (("*.yml",), "build.yaml", False),
        ((".github/workflows/*",), ".github/workflows/a.yml", True),
        ((".github/workflows/*",), "docs/.github/workflows/a.yml", False),
        (("Jenkinsfile",), "ci/Jenkinsfile", True),
    ],
)
def test_paths_limit_where_a_category_searches(paths, path, applies) -> None:
    category = Category("c", "C", "", "do", ("x",), paths)
    assert category.applies_to(path) is applies
    assert bool(scan_text(path, "x", [category])) is applies


# --- configuration --------------------------------------------------------------------------


def test_a_patterns_file_extends_by_default() -> None:
    patterns = load_categories(
        {
            "skip_dirs": ["vendor"],
            "categories": {
                "ci_retry": {"patterns": [r"retries=\d+"], "action": "Share one counter."},
                "file_watcher": {"enabled": False},
                "gateway": {"title": "Agent gateway", "patterns": ["AGENT_GATEWAY_URL"]},
            },
        },
        "p.toml",
    )
    names = [c.name for c in patterns.categories]
    assert "file_watcher" not in names and names[-1] == "gateway"
    ci = next(c for c in patterns.categories if c.name == "ci_retry")
    assert ci.patterns == BY_NAME["ci_retry"].patterns + (r"retries=\d+",)
    assert ci.action == "Share one counter."
    assert ci.title == BY_NAME["ci_retry"].title
    assert patterns.skip_dirs == (*SKIP_DIRS, "vendor")
    gateway = patterns.categories[-1]
    assert scan_text("a", "AGENT_GATEWAY_URL=x", [gateway])[0].category == "gateway"
    assert "LoopBudget" in gateway.action  # the seed's advice when none is given


def test_replace_keeps_only_the_file_categories_and_folders() -> None:
    patterns = load_categories(
        {"replace": True, "skip_dirs": ["build"], "categories": {"x": {"patterns": ["X"]}}},
        "p.toml",
    )
    assert [c.name for c in patterns.categories] == ["x"]
    assert patterns.skip_dirs == ("build",)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"replace": "yes"}, "'replace' must be true or false"),
        ({"extra": 1}, "unknown key 'extra'"),
        ({"categories": {"x": {"patterns": ["("]}}}, "bad pattern '('"),
        ({"categories": {"x": {"title": "X"}}}, "category 'x' has no patterns"),
        ({"categories": {"x": {"patterns": "X"}}}, "patterns must be an array"),
        ({"categories": {"x": {"patterns": ["X"], "colour": "red"}}}, "unknown key 'colour'"),
        ({"categories": {"ci_retry": {"action": ""}}}, "'action' must be a non-empty string"),
        ({"categories": {"ci_retry": 3}}, "must be a table"),
        ({"replace": True}, "no categories left"),
        ({"skip_dirs": "vendor"}, "skip_dirs must be an array"),
    ],
)
def test_a_bad_patterns_file_is_a_clear_error(data, message) -> None:
    with pytest.raises(PatternsError, match=re.escape(message)) as info:
        load_categories(data, "p.toml")
    assert str(info.value).startswith("p.toml")


# --- leftovers.md -------------------------------------------------------------------------


def test_markdown_is_a_checklist_grouped_by_category() -> None:
    findings = [
        Finding("b.py", 3, "loop_setting", "max_iterations", "max_iterations = 3"),
        Finding("a.py", 9, "loop_setting", "tool_limit", "use `tool_limit` here"),
    ]
    text = to_markdown("/repo", findings, CATEGORIES[:2], Tally(files=4, binary=1))
    assert text.startswith("# Leftovers: second control planes\n")
    assert "Either delete it or pass the same LoopBudget into it." not in text  # seed's words,
    assert "either delete it or pass the same LoopBudget into it." in text  # mid-sentence
    assert "Searched 4 files (skipped: .git, node_modules; 1 binary)" in text
    section = text.split("## Vendor loop settings (2)\n", 1)[1].split("## ", 1)[0]
    assert section.index("`a.py:9`") < section.index("`b.py:3`")
    assert "- [ ] `a.py:9`: ``use `tool_limit` here``" in section
    assert f"**What to do:** {BY_NAME['loop_setting'].action}" in section
    assert "## Paths to the paid agent (0)\n" in text
    assert text.rstrip().endswith("None found.")


def test_the_readme_patterns_example_loads() -> None:
    import tomllib

    from tests.helpers import ROOT

    readme = (ROOT / "docs" / "leftovers.md").read_text(encoding="utf-8")
    example = readme.split("`--patterns FILE` extends", 1)[1].split("```toml\n", 1)[1]
    patterns = load_categories(tomllib.loads(example.split("```", 1)[0]), "docs/leftovers.md")
    names = [c.name for c in patterns.categories]
    assert "file_watcher" not in names and names[-1] == "agent_gateway"
    assert patterns.skip_dirs[-2:] == ("vendor", "dist")
