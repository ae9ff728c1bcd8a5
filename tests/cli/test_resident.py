"""``agent-ledger ingest ... --resident``: answered by a server that stays up, exactly as the
plain command answers (stdout, stderr, exit code, rows), or by the client itself the plain
way whenever the server cannot answer.

No test here assumes how fast this machine is: servers are waited for through their info
files with a generous deadline, and never by a sleep. Each test's servers live in a folder of
its own (``XDG_RUNTIME_DIR``), are given a short idle time, and are killed at its end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ledger.cli import resident_client, resident_server
from ledger.live import hook_server
from ledger.live.runtime_folder import SOCKET_MAX
from tests.corpus import write_ledgers
from tests.helpers import REAL_LOGS, ROOT, dump
from tests.live.test_hook_server import poll, seen_up

IDLE_S = "120"  # the servers end by themselves soon after a test, whatever happens
SAMPLES = sorted(REAL_LOGS.glob("0[1-3]_*.jsonl"))


@dataclass
class Resident:
    """A test's own servers' folder and the environment its commands run in."""

    runtime: Path
    env: dict[str, str]
    monkeypatch: pytest.MonkeyPatch

    def setenv(self, name: str, value: str) -> None:
        """``name`` set here and in the commands' environment (a keyed variable must be the
        same in both for :meth:`start` to start the server the client looks for)."""
        self.monkeypatch.setenv(name, value)
        self.env[name] = value

    def run(self, args: list[str], cwd: Path, env: dict[str, str] | None = None,
            ) -> tuple[int, str, str]:
        done = subprocess.run([sys.executable, "-m", "ledger", *args], cwd=cwd,
                              env=env or self.env, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stdout, done.stderr

    def launch(self, db: Path) -> subprocess.Popen[bytes]:
        """A server for ``db`` as the client starts one (not detached)."""
        keyed = resident_client.settings(str(db))
        return subprocess.Popen(
            [sys.executable, "-P", "-m", resident_client.ENTRY,
             resident_client.socket_path(keyed), keyed[0]], env=self.env)

    def start(self, db: Path) -> subprocess.Popen[bytes]:
        """:meth:`launch`, once the server answers."""
        server = self.launch(db)
        poll(lambda: resident_server.servers_of(str(db)))
        return server


def _servers_in(folder: Path) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if resident_client.ENTRY.encode() in argv and str(folder).encode() in argv:
            found.append(int(entry))
    return found


@pytest.fixture
def resident(monkeypatch: pytest.MonkeyPatch) -> Iterator[Resident]:
    # A short folder (a socket's path has at most 107 bytes), this process's too.
    runtime = Path(tempfile.mkdtemp(prefix="rs-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv(resident_client.IDLE_ENV, IDLE_S)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])  # (keyed: the same here and there)
    yield Resident(runtime, env, monkeypatch)
    for pid in _servers_in(runtime):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(runtime, ignore_errors=True)


def info(db: Path) -> hook_server.Info:
    (found,) = resident_server.servers_of(str(db))
    return found


def copy_samples(folder: Path, count: int = 2) -> Path:
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    for path in SAMPLES[:count]:
        shutil.copy(path, logs / path.name)
    return logs


def grow(folder: Path) -> None:
    """The first sample's first lines appended again to the second (new lines, same shape)."""
    head = SAMPLES[0].read_bytes().splitlines(keepends=True)[:8]
    with open(folder / "logs" / SAMPLES[1].name, "ab") as out:
        out.writelines(head)


def bad_line(folder: Path) -> None:
    with open(folder / "logs" / SAMPLES[1].name, "ab") as out:
        out.write(b'{"type": "user", "message": \n')


def new_file(folder: Path) -> None:
    shutil.copy(SAMPLES[2], folder / "logs" / SAMPLES[2].name)


def nothing(folder: Path) -> None:
    pass


#: What changes after a first ingest, and the command's arguments after ``ingest``.
SCENARIOS = {
    "new files": (new_file, ["ledger.db", "logs"]),
    "grown files": (grow, ["ledger.db", "logs"]),
    "nothing new": (nothing, ["ledger.db", "logs"]),
    "nothing new, --json": (nothing, ["ledger.db", "logs", "--json"]),
    "a bad line": (bad_line, ["ledger.db", "logs"]),
    "--strict with a bad line": (bad_line, ["ledger.db", "logs", "--strict"]),
    "--json": (grow, ["ledger.db", "logs", "--json"]),
    "a missing path": (grow, ["ledger.db", "logs", "missing.jsonl"]),
    "a database to create": (nothing, ["new.db", "logs"]),
}


def normalised(text: str, root: Path) -> str:
    return text.replace(str(root), "ROOT")


@pytest.mark.parametrize(("change", "args"), SCENARIOS.values(), ids=SCENARIOS)
def test_a_resident_ingest_answers_as_the_plain_one(
    resident: Resident, tmp_path: Path, change: Callable[[Path], None], args: list[str],
) -> None:
    """The same change in two copies of a folder, ingested plain in one and through a warm
    server in the other: the same output, exit code and rows."""
    answers, dumps = [], []
    for name, extra in (("plain", []), ("resident", ["--resident"])):
        root = tmp_path / name
        copy_samples(root)
        assert resident.run(["ingest", "ledger.db", "logs", "--no-progress"], root)[0] == 0
        if extra:
            resident.start(root / args[0])
        change(root)
        code, out, err = resident.run(["ingest", *args, *extra], root)
        answers.append((code, normalised(out, root), normalised(err, root)))
        db = root / args[0]
        dumps.append(normalised(json.dumps(dump(db)), root) if db.exists() else None)
        if extra:  # the server's answer (it counts a call once it has sent its answer)
            poll(lambda db=db: info(db).calls == 1)
    assert answers[0] == answers[1]
    assert dumps[0] == dumps[1]
    assert "Traceback" not in answers[0][2]


def test_the_first_call_starts_a_server_that_answers_the_next(
    resident: Resident, tmp_path: Path,
) -> None:
    copy_samples(tmp_path)
    first = resident.run(["ingest", "ledger.db", "logs", "--resident"], tmp_path)
    assert first[0] == 0 and "2 files (2 new" in first[1]
    server = poll(lambda: resident_server.servers_of(str(tmp_path / "ledger.db")))[0]
    assert server.calls == 0 and server.args[0] == str(tmp_path / "ledger.db")
    grow(tmp_path)
    second = resident.run(["ingest", "ledger.db", "logs", "--resident"], tmp_path)
    assert second[0] == 0 and "1 grown" in second[1]
    poll(lambda: info(tmp_path / "ledger.db").calls == 1)
    stopped = resident.run(["ingest", "ledger.db", "--resident", "--stop"], tmp_path)
    assert stopped[0] == 0 and f"stopped the resident server {server.pid}" in stopped[1]
    assert not resident_server.servers_of(str(tmp_path / "ledger.db"))
    assert not Path(server.socket).exists()
    again = resident.run(["ingest", "ledger.db", "--resident", "--stop"], tmp_path)
    assert again[1].startswith("no resident server runs for ledger.db")


def test_a_runtime_folder_others_may_write_gets_no_server_and_no_log(
    resident: Resident, tmp_path: Path,
) -> None:
    """Someone else's folder, or one anyone may write to, could hold their socket or a link
    in the log's place: the client starts no server and writes nothing there, and runs the
    call itself."""
    shared = resident.runtime / "agent-ledger"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "victim").write_text("keep\n")
    (shared / "ingest.log").symlink_to(shared / "victim")
    copy_samples(tmp_path)
    code, out, err = resident.run(["ingest", "ledger.db", "logs", "--resident"], tmp_path)
    assert code == 0 and "2 files (2 new" in out and "Traceback" not in err
    assert (shared / "victim").read_text() == "keep\n"
    assert sorted(p.name for p in shared.iterdir()) == ["ingest.log", "victim"]
    assert not _servers_in(resident.runtime)


def test_a_second_server_for_the_same_socket_is_refused_by_the_lock(
    resident: Resident, tmp_path: Path,
) -> None:
    first = resident.start(tmp_path / "ledger.db")
    second = resident.start(tmp_path / "ledger.db")
    assert second.wait(timeout=120) == hook_server.EXIT_BUSY
    assert first.poll() is None and info(tmp_path / "ledger.db").pid == first.pid


def test_an_idle_server_ends_by_itself(resident: Resident, tmp_path: Path) -> None:
    """Under the first of IDLES it is seen up within (a loaded machine may not see it within
    half a second: a server that ended unseen proves nothing, and is started again)."""

    def start(idle: float) -> subprocess.Popen[bytes]:
        resident.setenv(resident_client.IDLE_ENV, str(idle))  # (not keyed)
        return resident.launch(tmp_path / "ledger.db")

    server, (found,) = seen_up(start, lambda: resident_server.servers_of(
        str(tmp_path / "ledger.db")))
    sock = found.socket
    assert server.wait(timeout=120) == 0
    assert not resident_server.servers_of(str(tmp_path / "ledger.db"))
    assert not Path(sock).exists()


#: A file of the package changed while its server is up, and what the next call prints first.
CHANGES = {
    "a module": ("cli/quick.py", lambda text: text.replace('"{files} files (', '"{files} FILES ('),
                 "2 FILES (0 new, 1 grown"),  # (the new code's answer)
    "the default action map": ("config/action_classes.toml", lambda text: text + "\n# edited\n",
                               "2 files (0 new, 1 grown"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_package_is_never_answered_with_and_ends_its_server(
    resident: Resident, tmp_path: Path, change: str,
) -> None:
    """A copy of the package, changed while its server is up (an upgrade, an edit): the
    next call is refused and run by the client with the new code, and the server ends."""
    package = tmp_path / "package"
    shutil.copytree(ROOT / "ledger", package / "ledger",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {**resident.env, "PYTHONPATH": str(package)}
    copy_samples(tmp_path)
    resident.run(["ingest", "ledger.db", "logs", "--resident"], tmp_path, env)
    server = poll(lambda: resident_server.servers_of(str(tmp_path / "ledger.db")))[0]
    name, edit, first = CHANGES[change]
    changed = package / "ledger" / name
    changed.write_text(edit(changed.read_text()))
    grow(tmp_path)
    code, out, _ = resident.run(["ingest", "ledger.db", "logs", "--resident"], tmp_path, env)
    assert code == 0 and out.startswith(first)
    poll(lambda: not resident_server.servers_of(str(tmp_path / "ledger.db")))
    assert not Path(server.socket).exists()


def _many_lines(folder: Path) -> Path:
    logs = folder / "logs"
    write_ledgers(logs, events=60_000, files=2, seed=5)  # some batches of 20,000 lines
    return logs


def _read(db: Path) -> int:
    import sqlite3

    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("select coalesce(sum(offset), 0) from sources").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_server_killed_mid_call_leaves_the_call_to_the_client(
    resident: Resident, tmp_path: Path,
) -> None:
    """SIGKILL while the server ingests (some batches committed): the client runs the ingest
    itself, and the rows are those of one plain ingest."""
    logs = _many_lines(tmp_path)
    resident.setenv("AGENT_LEDGER_TEST_BATCH_PAUSE", "0.5")  # (keyed: the server's too)
    server = resident.start(tmp_path / "ledger.db")
    client = subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", "ledger.db", "logs", "--resident"],
        cwd=tmp_path, env=resident.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=_ctrl_c_default)
    poll(lambda: _read(tmp_path / "ledger.db") > 0)  # a batch committed, more to come
    server.kill()
    server.wait(timeout=60)  # (gone, not a zombie: as a detached server's parent reaps it)
    out, err = client.communicate(timeout=300)
    assert client.returncode == 0, err
    assert b"lines read" in out and b"Traceback" not in err
    poll(lambda: not _servers_in(resident.runtime))  # its workers went with it
    plain = tmp_path / "plain"
    plain.mkdir()
    assert resident.run(["ingest", "plain.db", str(logs)], plain)[0] == 0
    assert dump(tmp_path / "ledger.db") == dump(plain / "plain.db")


def _ctrl_c_default() -> None:
    """Ctrl-C's own effect in the client, as a terminal's: a test run started with SIGINT
    ignored (a shell's background job, a CI runner) hands that on, and Python keeps it (the
    client would then finish the call and exit 0, as it should where Ctrl-C is ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_the_client_lets_the_server_finish_the_call(
    resident: Resident, tmp_path: Path,
) -> None:
    logs = _many_lines(tmp_path)
    resident.setenv("AGENT_LEDGER_TEST_BATCH_PAUSE", "0.2")  # (keyed: the server's too)
    resident.start(tmp_path / "ledger.db")
    client = subprocess.Popen(
        [sys.executable, "-m", "ledger", "ingest", "ledger.db", "logs", "--resident"],
        cwd=tmp_path, env=resident.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=_ctrl_c_default)
    poll(lambda: _read(tmp_path / "ledger.db") > 0)
    client.send_signal(signal.SIGINT)
    out, err = client.communicate(timeout=300)
    assert client.returncode == 1 and b"The resident server finishes this ingest" in err
    poll(lambda: info(tmp_path / "ledger.db").calls == 1, 300)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert resident.run(["ingest", "plain.db", str(logs)], plain)[0] == 0
    assert dump(tmp_path / "ledger.db") == dump(plain / "plain.db")


#: A setting changed from the first key's: each names another server.
KEYED = {
    "another database": (lambda mp, tmp: None, "other.db"),
    "another home": (lambda mp, tmp: mp.setenv("HOME", str(tmp)), "ledger.db"),
    "another cache folder": (lambda mp, tmp: mp.setenv("XDG_CACHE_HOME", str(tmp)),
                             "ledger.db"),
    "a variable of the ingest's": (lambda mp, tmp: mp.setenv("AGENT_LEDGER_TEST_X", "1"),
                                   "ledger.db"),
    "a rule cache": (lambda mp, tmp: mp.setenv("KF_RULE_CACHE_DIR", str(tmp)), "ledger.db"),
    "another umask": (lambda mp, tmp: mp.setattr(os, "umask", lambda m: 0o077), "ledger.db"),
    "another interpreter": (lambda mp, tmp: mp.setattr(sys, "executable", "/x/python"),
                            "ledger.db"),
}


@pytest.mark.parametrize(("change", "db"), KEYED.values(), ids=KEYED)
def test_the_socket_differs_when_a_keyed_setting_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: Callable[..., None], db: str,
) -> None:
    before = resident_client.socket_path(resident_client.settings(str(tmp_path / "ledger.db")))
    change(monkeypatch, tmp_path)
    after = resident_client.socket_path(resident_client.settings(str(tmp_path / db)))
    assert after != before


def test_the_idle_time_and_the_path_spelled_otherwise_name_the_same_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    before = resident_client.settings(str(tmp_path / "ledger.db"))
    monkeypatch.setenv(resident_client.IDLE_ENV, "5")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link").symlink_to(tmp_path)
    assert resident_client.settings("link/./ledger.db") == before


def _request(settings: list[str], argv: list[str]) -> bytes:
    return resident_client.request(settings, argv)


def test_a_server_refuses_a_call_for_other_settings_or_not_a_plain_ingest(
    tmp_path: Path,
) -> None:
    server = resident_server.Server(str(tmp_path / "ledger.db"))
    other = [*server.settings[:-1], "HOME=/elsewhere"]
    assert server.handle(_request(other, ["ingest", "ledger.db", "x"])) == b""
    assert server.handle(_request(server.settings, ["ingest", "ledger.db", "x", "--jobs", "0"])
                         ) == b""
    assert server.handle(b"not a call") == b""


CUT = {
    "nothing": b"",
    "a refusal (the header alone)": resident_client.HEADER,
    "another protocol": b"agent-ledger-hook/1\n0 0 0\n",
    "cut short": resident_client.HEADER + b"0 5 0\nabc",
    "longer than said": resident_client.HEADER + b"0 1 0\nabc",
    "no sizes": resident_client.HEADER + b"zero\n",
}


@pytest.mark.parametrize("answer", CUT.values(), ids=CUT)
def test_an_answer_not_whole_is_none(answer: bytes) -> None:
    assert resident_client.parse_answer(answer) is None


def test_a_whole_answer_is_its_code_and_outputs() -> None:
    answer = resident_client.HEADER + b"3 4 2\nout\nE\n"
    assert resident_client.parse_answer(answer) == (3, b"out\n", b"E\n")


@pytest.mark.parametrize("runtime", [None, "/run/user/1000", "/r" + "x" * 90])
def test_a_socket_path_fits_a_unix_socket(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, runtime: str | None,
) -> None:
    if runtime is None:
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    else:
        monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
    keyed = resident_client.settings(str(tmp_path / ("x" * 200) / "ledger.db"))
    assert len(os.fsencode(resident_client.socket_path(keyed))) <= SOCKET_MAX


def test_the_client_imports_neither_sqlite3_nor_the_fold() -> None:
    """What the console script loads before a --resident call is sent (each costs ms)."""
    heavy = ("sqlite3", "json", "hashlib", "socket", "subprocess", "ledger.ingest.unchanged",
             "ledger.cli.ingest_report", "click")
    code = ("import sys; import ledger.cli.quick, ledger.cli.resident_client; "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "[]"
