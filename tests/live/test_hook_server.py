"""The resident brake: the client ``hook install`` writes starts its server, which answers as
the process would, alone per socket, until idle or its package changes.

No test here assumes how fast this machine is: a server is waited for by polling with a
generous deadline (:data:`DEADLINE_S`), and the assertions are on behaviour (the answer, the
rows, the server's own counter), never on time. Every server a test starts is stopped by the
:func:`reaper` fixture (by the process ids whose command line names the test's folder), and
runs with a small idle time as a second safety.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.cli.hook import hook_command
from ledger.core.budget import Budget
from ledger.ingest.options import Options
from ledger.live import hook_client, hook_server, hook_store
from ledger.live.hook_main import Arguments, hook_args, kept, options_for
from ledger.live.hook_run import run
from tests.helpers import REAL_LOGS, rows
from tests.live.test_hook import calls_of, ingest_stops

SIDECHAIN = REAL_LOGS / "02_claude_code_subagent_sidechain_v2.1.39.jsonl"
#: Seconds to wait at most for a server to get somewhere (up, answered, gone): only a hang
#: gets near it, however slow or loaded the machine (a server imports the package and loads
#: the rule set first: seconds where the CPU is shared).
DEADLINE_S = 120.0
IDLE_S = 60  # the servers' idle time in these tests: they end by themselves soon after
#: Idle times to try, shortest first, in a test of a server ending by itself: it must be seen
#: up (its pid file) before it ends, which a loaded machine may not do within a short one. A
#: server that ended unseen proves nothing, so it is started again with the next idle time.
IDLES = (0.5, 5.0, 60.0)
COLUMNS = "session_id, tool_use_id, decision, stop_reason, event_idx, action, counters"


def _servers_of(folder: Path) -> list[int]:
    """The ids of the hook servers whose command line names ``folder``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"serve" in argv and any(str(folder).encode() in a for a in argv) and state != "Z":
            found.append(int(entry))
    return found


@pytest.fixture
def reaper(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path``; at the end, every server started for it stopped (SIGTERM, then SIGKILL)."""
    yield tmp_path
    pids = _servers_of(tmp_path)
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while _servers_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in _servers_of(tmp_path):
        os.kill(pid, signal.SIGKILL)


def poll(what: Callable[[], Any], deadline_s: float = DEADLINE_S) -> Any:
    """``what()`` once it is true, failing after ``deadline_s`` (a slow machine is not a bug)."""
    deadline = time.monotonic() + deadline_s
    while not (found := what()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {deadline_s} s: {what}")
        time.sleep(0.05)
    return found


def budget_file(folder: Path, text: str) -> Path:
    path = folder / "budget.toml"
    path.write_text(text)
    return path


def installed(db: Path, budget: Path | None, idle: float = IDLE_S) -> list[str]:
    """The command ``hook install`` writes (the self-starting client), as argv."""
    return shlex.split(hook_command(db, str(budget) if budget else None, False, True, idle))


def call(argv: list[str], payload: dict[str, Any]) -> str:
    done = subprocess.run(argv, input=json.dumps(payload).encode(), capture_output=True,
                          check=True)
    assert b"Traceback" not in done.stderr
    return done.stdout.decode().strip()


def transcript_and_calls(folder: Path, lines: int = 40) -> tuple[Path, list[dict[str, Any]]]:
    raw = SIDECHAIN.read_bytes().splitlines(keepends=True)[:lines]
    transcript = folder / "t.jsonl"
    transcript.write_bytes(b"".join(raw))
    calls = [c for line in raw for c in calls_of(line)]
    for c in calls:
        c["transcript_path"] = str(transcript)
    return transcript, calls


def in_process(db: Path, budget: Path | None, calls: list[dict[str, Any]]) -> list[str]:
    make = options_for([], None, None)
    found = str(budget) if budget else None
    return [run(json.dumps(c).encode(), db, make, found) for c in calls]


def test_the_first_call_starts_the_server_and_the_next_is_its(reaper: Path) -> None:
    """The first call finds no server: it is answered in its own process and a server
    appears; the second is answered by that server (its counter), the same as in process."""
    _, calls = transcript_and_calls(reaper)
    budget = budget_file(reaper, "max_steps = 4\nmax_seconds = 'off'\n")
    db = reaper / "l.db"
    argv = installed(db, budget)
    first = call(argv, calls[0])
    server = poll(lambda: hook_server.running(db))[0]
    assert server.calls == 0 and server.pid != os.getpid()
    poll(lambda: os.path.exists(server.socket))
    last = call(argv, calls[-1])
    # (the server counts a call once it has sent the answer: the client may read it first)
    poll(lambda: [i.calls for i in hook_server.running(db)] == [1])
    assert [i.pid for i in hook_server.running(db)] == [server.pid]
    assert [first, last] == in_process(reaper / "alone.db", budget, [calls[0], calls[-1]])
    assert first == "" and "max_steps" in json.loads(last)["hookSpecificOutput"][
        "permissionDecisionReason"]
    assert rows(db, f"select {COLUMNS} from hook_decisions") == rows(
        reaper / "alone.db", f"select {COLUMNS} from hook_decisions")


def test_first_calls_at_once_start_one_server(reaper: Path) -> None:
    """Parallel tool calls with no server yet: each is answered, each starts a server, and one
    server remains (the others found the lock held)."""
    _, calls = transcript_and_calls(reaper)
    budget = budget_file(reaper, "max_steps = 4\nmax_seconds = 'off'\n")
    db = reaper / "l.db"
    argv = installed(db, budget)
    pair = [calls[1], calls[-1]]
    assert at_once([argv, argv], pair) == in_process(reaper / "alone.db", budget, pair)
    [server] = poll(lambda: hook_server.running(db))
    poll(lambda: len(_servers_of(reaper)) == 1)  # the other one ended at once
    assert _servers_of(reaper) == [server.pid]
    assert at_once([argv, argv], pair) == in_process(reaper / "alone2.db", budget, pair)


def test_a_projects_own_ledger_package_is_not_imported(reaper: Path) -> None:
    """Claude Code runs the hook in the project's folder: a ``ledger`` package there is not
    the one the client's server and light hook import."""
    project = reaper / "project"
    (project / "ledger" / "live").mkdir(parents=True)
    for init in ("ledger/__init__.py", "ledger/live/__init__.py"):
        (project / init).write_text("raise SystemExit('the project's ledger was imported')\n")
    _, calls = transcript_and_calls(reaper)
    budget = budget_file(reaper, "max_steps = 4\nmax_seconds = 'off'\n")
    db = reaper / "l.db"
    argv = installed(db, budget)
    expected = in_process(reaper / "alone.db", budget, [calls[0], calls[-1]])

    def in_project(payload: dict[str, Any]) -> str:
        done = subprocess.run(argv, input=json.dumps(payload).encode(), capture_output=True,
                              check=True, cwd=project)
        return done.stdout.decode().strip()

    assert in_project(calls[0]) == expected[0]  # the light hook
    poll(lambda: hook_server.running(db))
    assert in_project(calls[-1]) == expected[1]  # the server
    poll(lambda: [i.calls for i in hook_server.running(db)] == [1])


def test_live_equals_replay_through_the_installed_client(reaper: Path) -> None:
    """Driven as Claude Code would, the installed command, call by call over a growing real
    transcript: the same decisions, rows and counters as the hook run in process."""
    source = SIDECHAIN.read_bytes().splitlines(keepends=True)
    budget = budget_file(reaper, "[budget]\nmax_steps = 12\nmax_seconds = 'off'\n")
    db, transcript = reaper / "l.db", reaper / "t.jsonl"
    argv = installed(db, budget)
    answers = []
    with transcript.open("wb") as out:
        for raw in source:
            out.write(raw)
            out.flush()
            for c in calls_of(raw):
                c["transcript_path"] = str(transcript)
                answers.append((c, call(argv, c)))
                if len(answers) == 1:  # the next calls are the server's, once it listens
                    poll(lambda: hook_server.running(db))
    assert poll(lambda: [i.calls > len(answers) // 2 for i in hook_server.running(db)] == [True])
    alone = reaper / "alone"
    alone.mkdir()
    expected = []
    make = options_for([], None, None)
    with (alone / "t.jsonl").open("wb") as out:
        for raw in source:
            out.write(raw)
            out.flush()
            for c in calls_of(raw):
                c["transcript_path"] = str(alone / "t.jsonl")
                expected.append(run(json.dumps(c).encode(), alone / "l.db", make, str(budget)))
    assert [a for _, a in answers] == expected
    assert rows(db, f"select {COLUMNS} from hook_decisions order by id") == rows(
        alone / "l.db", f"select {COLUMNS} from hook_decisions order by id")
    # and the first denied call is the step ingest of the whole transcript stops at
    stops = ingest_stops(transcript, make(str(budget)), reaper / "ingested.db")
    denied = rows(db, "select session_id, stop_reason, event_idx from hook_decisions "
                  "where decision = 'deny' order by id")
    assert denied, "the budget stops the transcript"
    for session, (reason, first) in stops.items():
        mine = [d for d in denied if d["session_id"] == session]
        assert (mine[0]["stop_reason"], mine[0]["event_idx"]) == (reason, first) if mine else (
            first is None)


def test_two_servers_at_once_one_survives(reaper: Path) -> None:
    db = reaper / "l.db"
    argv = [sys.executable, "-m", "ledger.live.hook_main", "serve", "--db", str(db),
            f"--idle-seconds={IDLE_S}"]
    both = [subprocess.Popen(argv, stderr=subprocess.PIPE) for _ in range(2)]
    try:
        poll(lambda: any(p.poll() is not None for p in both))
        ended = next(p for p in both if p.poll() is not None)
        alive = next(p for p in both if p is not ended)
        assert ended.returncode == hook_server.EXIT_BUSY
        assert alive.poll() is None
        server = poll(lambda: hook_server.running(db))
        assert [s.pid for s in server] == [alive.pid]
        # a third, later, leaves the running server's socket alone
        third = subprocess.run(argv, capture_output=True)
        assert third.returncode == hook_server.EXIT_BUSY
        assert os.path.exists(server[0].socket)
    finally:
        for p in both:
            p.terminate()
            p.wait()
            p.stderr.close()  # type: ignore[union-attr]
    assert not os.path.exists(server[0].socket)  # removed by the server on SIGTERM
    assert hook_server.running(db) == []


def seen_up(start: Callable[[float], subprocess.Popen[bytes]],
            up: Callable[[], list[Any]]) -> tuple[subprocess.Popen[bytes], list[Any]]:
    """A server started by ``start(idle)`` under the first of :data:`IDLES` it is seen up
    (``up()`` not empty) within, and what ``up()`` then said."""
    for idle in IDLES:
        server = start(idle)
        found = poll(lambda server=server: up() or server.poll() is not None)
        if found is not True:
            return server, found
        assert server.returncode == 0, f"the server ended with {server.returncode}"
    pytest.fail(f"the server ended unseen even with an idle time of {IDLES[-1]} s")


def test_an_idle_server_ends_and_takes_its_socket_away(reaper: Path) -> None:
    db = reaper / "l.db"
    server, (info,) = seen_up(lambda idle: subprocess.Popen(
        [sys.executable, "-m", "ledger.live.hook_main", "serve", "--db", str(db),
         f"--idle-seconds={idle}"]), lambda: hook_server.running(db))
    try:
        assert server.wait(timeout=DEADLINE_S) == 0
    finally:
        server.kill()
        server.wait()
    assert not os.path.exists(info.socket)
    assert not hook_server.pid_file(db, Path(info.socket)).exists()


class Thread:
    """:func:`hook_server.serve` in a thread of this process, answering with ``run``."""

    def __init__(self, sock: Path, db: Path, make: Callable[[str | None], Options],
                 found: str | None = None, **kwargs: Any) -> None:
        self.stop, ready = threading.Event(), threading.Event()
        self.served: list[bool] = []
        self.thread = threading.Thread(target=lambda: self.served.append(hook_server.serve(
            sock, db, lambda b: run(b, db, make, found), stop=self.stop, ready=ready,
            **kwargs)))
        self.thread.start()
        poll(ready.is_set)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(DEADLINE_S)


def client(sock: Path, *args: str) -> list[str]:
    return [sys.executable, "-S", hook_client.__file__, str(sock), *args]


def test_a_server_whose_package_changed_answers_then_ends(tmp_path: Path) -> None:
    _, calls = transcript_and_calls(tmp_path)
    db = tmp_path / "l.db"
    package = tmp_path / "pkg.py"
    package.write_text("v = 1\n")
    stamp = hook_server.PackageStamp.of([str(package)])
    looked: list[bool] = []  # the server's looks at its package, one after each call

    def stale() -> bool:
        looked.append(stamp.changed())
        return looked[-1]

    sock = hook_server.socket_path(db, hook_args(db))
    options = Options(budget=Budget(max_steps=4))
    server = Thread(sock, db, lambda _f: options, stale=stale)
    try:
        assert call(client(sock), calls[0]) == ""
        poll(lambda: looked)  # (the client has its answer before the server looks)
        package.write_text("v = 22\n")  # a new version installed under the server
        assert "max_steps" in call(client(sock), calls[-1])  # answered, by the old one
        server.thread.join(DEADLINE_S)
        assert not server.thread.is_alive() and server.served == [True]
    finally:
        server.close()
    assert not sock.exists() and looked == [False, True]
    assert rows(db, "select count(*) as n from hook_decisions") == [{"n": 2}]


def test_the_stamp_is_of_the_package_as_loaded() -> None:
    stamp = hook_server.PackageStamp.loaded()
    assert hook_server.__file__ in stamp.files and not stamp.changed()
    assert all("/ledger/" in p for p in stamp.files)


def test_a_budget_edited_between_calls_is_the_next_calls(tmp_path: Path) -> None:
    """The options are kept per budget file (not built for every call), and built again once
    the file changes."""
    _, calls = transcript_and_calls(tmp_path)
    budget = budget_file(tmp_path, "max_steps = 400\nmax_seconds = 'off'\n")
    os.utime(budget, (time.time() - 60, time.time() - 60))  # no longer racy (test_hook_main)
    db = tmp_path / "l.db"
    built: list[str | None] = []
    light = options_for([], None, None)
    make = kept(lambda found: (built.append(found), light(found))[1])
    sock = hook_server.socket_path(db, hook_args(db, str(budget)))
    server = Thread(sock, db, make, str(budget))
    try:
        assert [call(client(sock), c) for c in calls[:3]] == ["", "", ""]
        assert built == [str(budget)]  # built once for three calls
        budget.write_text("max_steps = 2\nmax_seconds = 'off'\n")
        denied = json.loads(call(client(sock), calls[3]))["hookSpecificOutput"]
        assert "max_steps" in denied["permissionDecisionReason"]
        assert built == [str(budget)] * 2
    finally:
        server.close()


def test_parallel_calls_get_their_own_answers(tmp_path: Path) -> None:
    """Claude Code runs the hooks of parallel tool calls at once: the server answers them one
    at a time, each its own answer."""
    _, calls = transcript_and_calls(tmp_path)
    db = tmp_path / "l.db"
    options = Options(budget=Budget(max_steps=4))
    pair = [calls[1], calls[-1]]
    expected = [run(json.dumps(c).encode(), tmp_path / "alone.db", lambda _f: options)
                for c in pair]
    assert expected[0] != expected[1]
    sock = hook_server.socket_path(db, hook_args(db))
    server = Thread(sock, db, lambda _f: options)
    try:
        for _ in range(3):
            assert at_once([client(sock)] * 2, pair) == expected
    finally:
        server.close()


def at_once(argvs: list[list[str]], payloads: list[dict[str, Any]]) -> list[str]:
    """Each command called with its payload, all at the same time; their answers in order."""
    outs: dict[int, str] = {}

    def one(n: int) -> None:
        outs[n] = call(argvs[n], payloads[n])

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(argvs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S)
    return [outs[n] for n in range(len(argvs))]


def _dying_server(sock: Path) -> threading.Thread:
    """A server that reads the call and dies without answering."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(1)

    def once() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()
        listener.close()
        sock.unlink()

    thread = threading.Thread(target=once)
    thread.start()
    return thread


def _dying_hook_server(sock: Path) -> threading.Thread:
    """The hook's server, whose handler ends its process's life (a SystemExit) mid-call."""

    def die(_stdin: bytes) -> str:
        raise SystemExit(1)

    ready = threading.Event()

    def life() -> None:
        try:
            hook_server.serve(sock, sock.parent / "l.db", die, ready=ready)
        except SystemExit:
            pass

    thread = threading.Thread(target=life)
    thread.start()
    poll(ready.is_set)
    return thread


@pytest.mark.parametrize("fail_open", [False, True])
@pytest.mark.parametrize("dying", [_dying_server, _dying_hook_server],
                         ids=["a socket", "the hook's server"])
def test_a_server_that_dies_mid_call_fails_closed(
    tmp_path: Path, fail_open: bool, dying: Callable[[Path], threading.Thread]
) -> None:
    _, calls = transcript_and_calls(tmp_path)
    sock = tmp_path / "dying.sock"
    thread = dying(sock)
    args = ["--fail-open"] if fail_open else []
    done = subprocess.run(client(sock, *args), input=json.dumps(calls[0]).encode(),
                          capture_output=True)
    thread.join(DEADLINE_S)
    assert not thread.is_alive() and not sock.exists()  # it is gone, and its socket
    assert done.returncode == 0 and b"Traceback" not in done.stdout + done.stderr
    if fail_open:
        assert done.stdout == b""
        return
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "did not answer" in answer["permissionDecisionReason"]
    assert "fail closed" in answer["permissionDecisionReason"]


@pytest.mark.parametrize("runtime", [True, False], ids=["XDG_RUNTIME_DIR", "/tmp"])
def test_a_long_state_folder_gets_a_short_private_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: bool
) -> None:
    deep = tmp_path / ("a-long-folder-name-" * 6) / "x"
    deep.mkdir(parents=True)
    db = deep / "ledger.db"
    if runtime:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "r"))
    else:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    sock = hook_server.socket_path(db, hook_args(db))
    made = not sock.parent.exists()  # (then removed at the end)
    assert len(os.fsencode(hook_store.state_dir(db) / "hook-0123456789ab.sock")) > 107
    assert len(os.fsencode(sock)) <= hook_server.SOCKET_MAX
    assert sock.parent == (tmp_path / "r" / "agent-ledger" if runtime
                           else Path(f"/tmp/agent-ledger-{os.getuid()}"))
    assert sock != hook_server.socket_path(db, hook_args(db, fail_open=True))
    _, calls = transcript_and_calls(tmp_path)
    options = Options(budget=Budget(max_steps=4))
    server = Thread(sock, db, lambda _f: options)
    try:
        assert oct(sock.parent.stat().st_mode & 0o777) == oct(0o700)
        assert "max_steps" in call(client(sock), calls[-1])
        assert [i.socket for i in hook_server.running(db)] == [str(sock)]
        assert oct(sock.stat().st_mode & 0o777) == oct(0o600)
    finally:
        server.close()
        if made:
            sock.parent.rmdir()
    assert not sock.exists()


def test_a_short_folder_others_can_enter_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    with pytest.raises(OSError, match="not a private folder"):
        hook_server.private_folder(folder)


def test_stop_servers_ends_them(reaper: Path) -> None:
    db = reaper / "l.db"
    args = Arguments(str(db))
    server = subprocess.Popen([sys.executable, "-m", "ledger.live.hook_main", "serve",
                               *args.hook_args(), f"--idle-seconds={IDLE_S}"])
    try:
        poll(lambda: hook_server.running(db))
        assert [i.pid for i in hook_server.stop_servers(db)] == [server.pid]
        assert server.wait(timeout=DEADLINE_S) == 0
    finally:
        server.kill()
        server.wait()
    assert hook_server.running(db) == []


def test_the_client_and_server_agree_on_the_header() -> None:
    assert hook_client.HEADER == hook_server.HEADER
