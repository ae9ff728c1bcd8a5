"""No secret reaches the database: every ledger text is redacted before it is stored.

Real-shaped (fake) secrets of every kind go into every place ledger text can land: details,
observations, tool names, vendor stop strings, trace tasks, lines put aside (their raw text
and the reasons that quote them), whole files of unknown dialect, over-long lines. Then every
text column of every table, and the raw bytes of the database and its write-ahead log, are
searched for them.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.core.events import observation_hash
from ledger.db import connection, writes
from ledger.formats.agent_records import ERROR_EXCERPT
from ledger.ingest import options as ingest_options
from ledger.ingest.ingester import ingest
from ledger.ingest.options import Options
from tests.helpers import FIXTURES, REAL_LOGS, rows

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA7bqFakeKeyBody0123456789\n"
    "-----END RSA PRIVATE KEY-----"
)

#: kind: (the text an agent logs, the part of it that must never be stored)
SECRETS: dict[str, tuple[str, str]] = {
    "openai-key": ("key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f",
                   "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    "anthropic-key": ("sk-ant-api03-Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8Cb7Aa6Zx5Yw4Vu3Ts2Rq1Po0NmLk",
                      "Zx8Yw7Vu6Ts5Rq4Po3Nm2Lk1Jh0Gf9Ed8"),
    "aws-access-key": ("aws AKIA2E0A8F3B244C9986 in env", "AKIA2E0A8F3B244C9986"),
    "github-token": ("push with ghp_R2d2C3poBb8Yoda9Luke7Leia6Han5Solo4",
                     "R2d2C3poBb8Yoda9Luke7Leia6Han5Solo4"),
    "github-pat": ("github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz0123456789ABCDEF",
                   "11ABCDEFG0abcdefghijklmnopqrstuvwxyz0123456789"),
    "slack-token": ("xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                    "1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    "google-api-key": ("maps AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "SyD-9tSrke72PouQMnMX"),
    "bearer-token": ("Authorization: Bearer 8d7f6e5c4b3a29180716", "8d7f6e5c4b3a29180716"),
    "password": ("export password=hunter2correcthorse", "hunter2correcthorse"),
    "token": ("retry with token=9f8e7d6c5b4aZZ3f2e", "9f8e7d6c5b4aZZ3f2e"),
    "url-password": ("postgres://admin:s3cr3tP4ss@db.internal:5432/prod", "s3cr3tP4ss"),
    "private-key": (PEM, "MIIEowIBAAKCAQEA7bqFakeKeyBody0123456789"),
}
#: A key cut in two by the 2000-byte window kept of a line put aside: its head must not stay.
CUT_KEY = "AKIAQWERTYUIOP123456"
NEEDLES = [needle for _, needle in SECRETS.values()] + [CUT_KEY[:8]]


def native_lines(kind: str, text: str) -> list[str]:
    s = f"n-{kind}"
    good = [
        {"session": s, "type": "start", "detail": f"task with {text}"},
        {"session": s, "type": "round", "vendor_stop": f"halt {text}"},  # unknown: stops
        {"session": s, "type": "round", "tool": f"run {text}", "observation": f"saw {text}",
         "tool_calls": [{"name": "sh", "arguments": {"cmd": text}}]},
        {"session": s, "type": "round", "observation": f"saw {text}"},
        {"session": s, "type": "action", "action": "retry", "tool": f"re {text}",
         "detail": f"again {text}"},
        {"session": s, "type": "action", "action": "retry", "tool": f"re {text}"},
    ]
    bad = [
        json.dumps({"session": s, "type": "action", "action": text}),  # unknown action 'text'
        json.dumps({"session": s, "type": "round", "ts": text}),  # ts quoted in the reason
        json.dumps({"session": s, "type": "round", "detail": text})[:-1],  # invalid JSON
    ]
    return [json.dumps(e) for e in good] + bad


def trace(texts: list[str]) -> dict:
    return {
        "task": "fix it: " + " ".join(texts),
        "rounds": [
            {"tool_calls": [{"name": f"t {t}"}], "output_tokens": 10, "observation": f"o {t}",
             "vendor_stop": "tool_use"}
            for t in texts
        ] + [{"vendor_stop": f"odd {texts[0]}"}],
    }


def cut_line() -> bytes:
    """A bad line whose 2000-byte window ends inside an AWS key, after a long private key
    block that redaction shrinks to a marker, so the head of the cut key would otherwise land
    in the 500 characters kept."""
    body = "\\n".join(["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7fakefakefake"] * 28)
    pem = f"-----BEGIN PRIVATE KEY-----\\n{body}\\n-----END PRIVATE KEY-----"
    head = '{"detail": "' + pem + " "
    start = 2000 - 12  # 12 characters of the key inside the window, 8 outside
    line = (head + "x" * (start - len(head)) + CUT_KEY + '"').encode()
    assert line[start:2000] == CUT_KEY[:12].encode() and len(head) > 1900
    return line


@pytest.fixture
def ledgers(tmp_path: Path) -> Path:
    return write_ledgers(tmp_path / "runs")


def write_ledgers(root: Path) -> Path:
    (root / "native").mkdir(parents=True)
    lines = [line for kind, (text, _) in SECRETS.items() for line in native_lines(kind, text)]
    (root / "native" / "agent.jsonl").write_text("\n".join(lines) + "\n")
    gate = [{"step": n, "action": "read", "detail": text}
            for n, (text, _) in enumerate(SECRETS.values(), 1)]
    (root / "gate").mkdir()
    (root / "gate" / "gate.jsonl").write_text("\n".join(map(json.dumps, gate)) + "\n")
    texts = [text for text, _ in SECRETS.values()]
    (root / "trace.json").write_text(json.dumps(trace(texts), indent=2))
    (root / "unknown.jsonl").write_text(
        "\n".join(json.dumps({"hello": t}) for t in texts) + "\n")
    odd = root / "odd" / "odd.jsonl"
    odd.parent.mkdir()
    long_line = json.dumps({"session": "odd", "type": "round", "detail": " ".join(texts)})
    odd.write_bytes(
        json.dumps({"session": "odd", "type": "start"}).encode() + b"\n"
        + long_line.encode() + b" " * 5000 + b"\n"  # longer than the limit: put aside
        + cut_line() + b"\n"
    )
    return root


@pytest.mark.parametrize("jobs", [0, 2])  # folded here, or by workers that clean their rows
def test_no_secret_reaches_any_column_or_byte(ledgers: Path, db_path: Path, jobs: int) -> None:
    connection.connect(db_path).conn.close()
    keep_wal_open = sqlite3.connect(db_path)  # so the -wal file outlives the ingest
    keep_wal_open.execute("select count(*) from sqlite_master").fetchall()
    try:
        options = Options(max_line=5000, jobs=jobs, parallel_min_bytes=0)
        summary = ingest(db_path, [ledgers], options)
        assert summary.workers == jobs
        wal = db_path.with_name(db_path.name + "-wal").read_bytes()
        assert wal, "the write-ahead log was checkpointed away; nothing to scan"
        found = [
            (table, column, needle)
            for table, column, value in every_text(db_path)
            for needle in NEEDLES
            if needle in value
        ]
        assert found == [], sorted({(t, c) for t, c, _ in found})
        for blob in (db_path.read_bytes(), wal):
            for needle in NEEDLES:
                assert needle.encode() not in blob
    finally:
        keep_wal_open.close()
    assert summary.errors > 0 and summary.steps > 0
    markers = sum(value.count("[REDACTED:") for _, _, value in every_text(db_path))
    assert markers >= summary.redactions > 0


# -- a hostile corpus: every kind of the vendors' corpus in every text field of every dialect --

VENDORS = [
    tuple(row.split("\t", 2))
    for row in (FIXTURES / "secrets" / "vendors.tsv").read_text(encoding="utf-8").splitlines()
]
#: Keys whose values the readers need as they are to read a record at all (record types,
#: roles, times): everything else of a real log gets a secret appended.
STRUCTURE = {"type", "role", "subtype", "timestamp", "ts", "startTime", "endTime"}
WINDOW = 12  # a secret is leaked if this many of its characters in a row are stored


def with_secrets(value: Any, lines: Iterator[str], key: str | None = None) -> Any:
    """A JSON value with a vendor's secret line appended to every string in it (ids and tool
    names too, so tool calls lose their results and stay open in the readers' state)."""
    if isinstance(value, str):
        return value if key in STRUCTURE else f"{value} {next(lines)}"
    if isinstance(value, list):
        return [with_secrets(item, lines, key) for item in value]
    if isinstance(value, dict):
        return {k: with_secrets(item, lines, k) for k, item in value.items()}
    return value


def write_hostile(root: Path) -> Path:
    """Every dialect: the real Claude Code, Codex and Langfuse samples with secrets in every
    string; native, gate and trace ledgers, and lines put aside, carrying every kind; a tool
    error whose first line has a token across the excerpt's cut."""
    lines = itertools.cycle([line for _, _, line in VENDORS])
    root.mkdir(parents=True)
    for src in sorted(REAL_LOGS.glob("0*")):
        if src.suffix == ".json":
            doc = with_secrets(json.loads(src.read_text(encoding="utf-8")), lines)
            (root / src.name).write_text(json.dumps(doc))
        else:
            records = [json.loads(r) for r in src.read_text(encoding="utf-8").splitlines() if r]
            (root / src.name).write_text(
                "".join(json.dumps(with_secrets(r, lines)) + "\n" for r in records))
    texts = [line for _, _, line in VENDORS]
    native = [line for kind, _, text in VENDORS for line in native_lines(kind, text)]
    (root / "native.jsonl").write_text("\n".join(native) + "\n")
    gate = [{"step": n, "action": "read", "detail": text} for n, text in enumerate(texts, 1)]
    (root / "gate").mkdir()
    (root / "gate" / "gate.jsonl").write_text("\n".join(map(json.dumps, gate)) + "\n")
    (root / "trace.json").write_text(json.dumps(trace(texts)))
    (root / "codex-error.jsonl").write_text(codex_error(VENDORS[0][1]))
    return root


def codex_error(secret: str) -> str:
    """A Codex session whose command fails with a first line that the excerpt's cut crosses
    inside ``secret``."""
    at = "2026-01-01T00:00:00.000Z"
    output = "x" * (ERROR_EXCERPT - 8) + " " + secret + " failed\nstack"
    records = [
        {"timestamp": at, "type": "session_meta",
         "payload": {"id": "cut-1", "cwd": "/w/cut", "model_provider": "openai"}},
        {"timestamp": at, "type": "response_item",
         "payload": {"type": "function_call", "name": "shell", "call_id": "c1",
                     "arguments": json.dumps({"command": ["false"]})}},
        {"timestamp": at, "type": "response_item",
         "payload": {"type": "function_call_output", "call_id": "c1",
                     "output": json.dumps({"output": output, "metadata": {"exit_code": 1}})}},
    ]
    return "".join(json.dumps(r) + "\n" for r in records)


def leaks(secret: str, haystack: str) -> bool:
    n = min(WINDOW, len(secret))
    return any(secret[i : i + n] in haystack for i in range(len(secret) - n + 1))


@pytest.mark.parametrize("jobs", [0, 2])  # folded here, or by workers that clean their rows
def test_a_hostile_corpus_leaves_no_secret_in_any_column_or_byte(
    tmp_path: Path, db_path: Path, jobs: int
) -> None:
    runs = write_hostile(tmp_path / "runs")
    connection.connect(db_path).conn.close()
    keep_wal_open = sqlite3.connect(db_path)  # so the -wal file outlives the ingest
    keep_wal_open.execute("select count(*) from sqlite_master").fetchall()
    try:
        summary = ingest(db_path, [runs], Options(jobs=jobs, parallel_min_bytes=0))
        assert summary.workers == jobs
        wal = db_path.with_name(db_path.name + "-wal").read_bytes()
        stored = every_text(db_path)
        dialects = {row["dialect"] for row in rows(db_path, "select dialect from sessions")}
        database = db_path.read_bytes()
    finally:
        keep_wal_open.close()
    assert dialects >= {"native", "gate", "trace", "claude-code", "codex", "langfuse"}
    assert wal and summary.errors > 0 and summary.steps > 0
    tables = {table for table, _, _ in stored}
    assert {"sources", "ingest_errors", "fold_state", "steps", "sessions"} <= tables
    by_column: dict[tuple[str, str], list[str]] = {}
    for table, column, value in stored:
        by_column.setdefault((table, column), []).append(value)
    leaked = [
        (kind, table, column)
        for (table, column), values in by_column.items()
        for kind, secret, _ in VENDORS
        if leaks(secret, "\x00".join(values))
    ]
    assert leaked == []
    for blob in (database, wal):
        text = blob.decode("utf-8", "replace")
        assert [kind for kind, secret, _ in VENDORS if leaks(secret, text)] == []


def every_text(db_path: Path) -> list[tuple[str, str, str]]:
    out = []
    conn = sqlite3.connect(db_path)
    try:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        for table in tables:
            cursor = conn.execute(f"select * from [{table}]")
            names = [d[0] for d in cursor.description]
            for row in cursor:
                pairs = zip(names, row, strict=True)
                out += [(table, n, v) for n, v in pairs if isinstance(v, str)]
    finally:
        conn.close()
    return out


def test_redactions_are_counted_per_session_and_in_the_summary(
    ledgers: Path, db_path: Path
) -> None:
    summary = ingest(db_path, [ledgers], Options(max_line=5000))
    counts = {r["session_id"]: r["redactions"] for r in rows(db_path, "select * from sessions")}
    # A native session: the start detail; the unknown vendor string and the stop detail that
    # quotes it; the tool and the first observation (its excerpt); the retry's tool and detail;
    # the second retry's tool. The repeated observation is not stored again.
    assert {counts[f"n-{kind}"] for kind in SECRETS} == {8}
    (gate,) = [n for s, n in counts.items() if s.endswith("-1")]
    assert gate == len(SECRETS)  # one detail per step
    (trace_count,) = [n for s, n in counts.items() if s not in (f"n-{k}" for k in SECRETS)
                      and not s.endswith("-1") and s != "odd"]
    # Task and tools, one vendor stop. Each observation is seen once: no no-progress run, so no
    # excerpt is stored and nothing is counted (only stored text is).
    assert trace_count == 2 * len(SECRETS) + 1
    # Lines put aside: each native bad line's raw text, and the reasons that quote the value.
    in_errors = summary.redactions - sum(counts.values())
    assert in_errors >= 5 * len(SECRETS)
    assert ingest(db_path, [ledgers], Options(max_line=5000)).redactions == 0


def test_a_secret_repeated_in_short_texts_counts_each_time_in_the_summary_too(
    tmp_path: Path, db_path: Path, write_jsonl: Callable[..., Path]
) -> None:
    """Short texts are redacted once and remembered; every time one is stored, its secrets
    count, on the session and in the summary alike."""
    tool = "deploy sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f"
    ledger = write_jsonl(tmp_path / "runs" / "deploy.jsonl", [
        {"session": session, "type": "action", "action": "write", "tool": tool}
        for session in ("d-1", "d-2", "d-1", "d-2", "d-1")
    ])
    summary = ingest(db_path, [ledger])
    counts = {r["session_id"]: r["redactions"] for r in rows(db_path, "select * from sessions")}
    assert counts == {"d-1": 3, "d-2": 2}
    assert summary.redactions == 5
    assert summary.errors == 0


def test_observation_hashes_are_taken_before_redaction(tmp_path: Path, monkeypatch) -> None:
    """Redaction changes what is shown, never what the budget sees: two observations that
    differ only in their secret are different observations, two identical ones are a repeat."""
    same = "deploy failed: password=hunter2correcthorse"
    other = "deploy failed: password=tr0ub4dor&3horse"
    ledger = tmp_path / "runs" / "l.jsonl"
    ledger.parent.mkdir()
    ledger.write_text("\n".join(json.dumps(e) for e in [
        {"session": "repeat", "type": "round", "observation": same},
        {"session": "repeat", "type": "round", "observation": same},
        {"session": "differ", "type": "round", "observation": same},
        {"session": "differ", "type": "round", "observation": other},
    ]) + "\n")
    redacted_db, plain_db = tmp_path / "redacted.db", tmp_path / "plain.db"
    ingest(redacted_db, [ledger])
    monkeypatch.setattr(ingest_options, "redact", lambda text: (text, 0))
    ingest(plain_db, [ledger])

    def budget_view(db: Path) -> list[dict]:
        return rows(db, "select s.session_id, s.stop_reason, s.stop_at, t.idx, "
                        "t.observation_hash from sessions s join steps t using (session_id) "
                        "order by s.session_id, t.idx")

    assert budget_view(redacted_db) == budget_view(plain_db)
    stops = {r["session_id"]: r["stop_reason"] for r in budget_view(redacted_db)}
    assert stops == {"repeat": "no_progress", "differ": "task_complete"}
    hashes = [r["observation_hash"] for r in budget_view(redacted_db)]
    assert hashes == [observation_hash(t) for t in (same, other, same, same)]  # differ, repeat
    (incident,) = rows(redacted_db, "select detail from incidents where kind = 'no_progress'")
    assert incident["detail"] == "deploy failed: password=[REDACTED:secret-assignment]"


def test_rows_read_again_leave_no_trace_in_free_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database written by an agent-ledger that missed a secret (fold version 1 kept retry
    keys unredacted) loses the secret from its bytes once the file is read again, even where
    SQLite's build does not zero deleted content by default."""
    connect = sqlite3.connect

    def connect_secure_delete_off(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)  # type: ignore[arg-type]
        conn.execute("pragma secure_delete = off")  # as most builds are
        return conn

    monkeypatch.setattr(connection.sqlite3, "connect", connect_secure_delete_off)
    ledger = tmp_path / "runs" / "agent.jsonl"
    ledger.parent.mkdir()
    secret = "9f8e7d6c5b4aZZ3f2e"
    ledger.write_text("".join(
        json.dumps({"session": f"s{n}", "type": "action", "action": "retry",
                    "detail": f"token={secret}"}) + "\n" for n in range(2000)))
    db = tmp_path / "ledger.db"
    with monkeypatch.context() as old_version:  # a version that redacted neither in the fold
        old_version.setattr(ingest_options, "redact", lambda text: (text, 0))
        old_version.setattr(writes, "redact", lambda text: (text, 0))  # nor in the writer
        ingest(db, [ledger])
    assert secret.encode() in db.read_bytes()
    ledger.write_text(json.dumps({"session": "new", "type": "round"}) + "\n")  # replaced
    ingest(db, [ledger])
    assert secret.encode() not in db.read_bytes()


@pytest.mark.parametrize("as_json", [True, False])
def test_replay_exports_no_secret(tmp_path: Path, as_json: bool) -> None:
    """``agent-ledger replay`` prints what the database would hold: redacted, ids and all."""
    from click.testing import CliRunner

    from ledger.cli import cli

    token = dict((kind, secret) for kind, secret, _ in VENDORS)["github-classic-pat"]
    ledger = tmp_path / "runs" / "agent.jsonl"
    ledger.parent.mkdir()
    ledger.write_text("".join(json.dumps(e) + "\n" for e in [
        {"session": f"s-{token}", "type": "round", "tool": f"sh {token}"},
        {"session": f"s-{token}", "type": "round", "ts": token},  # put aside, quoted
    ]))
    result = CliRunner().invoke(cli, ["replay", str(ledger), *(["--json"] if as_json else [])])
    assert result.exit_code == 0, result.output
    assert "[REDACTED:" in result.output and not leaks(token, result.output)
