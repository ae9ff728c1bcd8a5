"""The resident brake: a server that answers hook calls over a Unix socket, warm.

A hook call started as a process pays for Python and the fold's imports every time
(docs/hooks.md gives the figures); the server pays once and answers each call with
:func:`ledger.live.hook_run.run`, the same function, so a call through the server and a
call as a process give the same answer and record the same row. The client
(:mod:`ledger.live.hook_client`) starts it on the first call that finds none.

What keeps it correct and alone:

- **one per (database, arguments)**: its socket's name carries a digest of the database and
  the hook's arguments (:func:`socket_path`), so two budgets never share a server; a lock
  (``flock``, held for the server's life) makes a second server for the same socket exit at
  once, and only the lock's holder removes a socket left behind;
- **one call at a time**, in the order they connect (a session's state is locked per call
  anyway); a call's failure is its answer (``run`` catches everything), never the server's end;
- **it ends by itself**: after ``idle_s`` without a call, and after answering a call once
  the package's files it loaded have changed (:class:`PackageStamp`: a new version was
  installed under it). On the way out it removes its socket first, then answers the calls
  already queued, so none is left unanswered;
- **it says it runs**: ``server-<key>.pid`` in the hook's state folder holds its pid, when
  it started and the calls it answered (``hook status`` reads it, ``hook uninstall`` stops it).

The answer on the socket is :data:`HEADER` then the hook's output, so the client tells an
allowed call (no output) from a server that died before answering.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ledger.live import hook_store
from ledger.live.runtime_folder import SOCKET_MAX, is_private, short_folder

Handler = Callable[[bytes], "str | bytes"]
HEADER = b"agent-ledger-hook/1\n"  # the client checks it (hook_client.HEADER)
REQUEST_MAX = 16 * 1024 * 1024  # a hook input larger than this is cut (and fails to parse)
IDLE_S = 30 * 60.0
TICK_S = 0.5  # how often an idle server looks at its clock and its stop event
CALL_TIMEOUT_S = 5.0


def server_key(db: Path, args: Sequence[str]) -> str:
    """A digest of the database and the hook's arguments: one server per pair."""
    return _digest(json.dumps([str(db), list(args)]))


def socket_path(db: Path, args: Sequence[str]) -> Path:
    """Where the server for ``db`` and ``args`` listens: in the hook's state folder, or in
    :func:`short_folder` if that path is too long for a Unix socket."""
    key = server_key(db, args)
    path = hook_store.state_dir(db) / f"hook-{key}.sock"
    if len(os.fsencode(path)) <= SOCKET_MAX:
        return path
    return Path(short_folder()) / f"{key}.sock"


def private_folder(folder: Path) -> None:
    """``folder`` made (``0700``), or checked to be this user's alone: a socket in a folder
    others can write to could be replaced by theirs."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not is_private(str(folder)):
        raise OSError(f"{folder} is not a private folder of this user's")


def pid_file(db: Path, sock: Path, folder: Path | None = None) -> Path:
    """The info file of the server on ``sock``: in ``folder``, by default the hook's state
    folder of ``db``."""
    return (folder or hook_store.state_dir(db)) / f"server-{_digest(str(sock))}.pid"


def lock_file(db: Path, sock: Path, folder: Path | None = None) -> Path:
    return pid_file(db, sock, folder).with_suffix(".lock")


@dataclass
class Info:
    """What ``server-<key>.pid`` holds (JSON)."""

    pid: int
    started: str
    socket: str
    args: list[str]
    idle_s: float
    calls: int = 0
    last_call: str | None = None


@dataclass
class PackageStamp:
    """The size and time of the package's files a server loaded: changed, the installed
    package is another version than the one answering (``pip install -U``, an edit)."""

    files: dict[str, tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, paths: Iterable[str]) -> PackageStamp:
        return cls({p: _stat(p) for p in paths})

    @classmethod
    def loaded(cls, package: str = "ledger") -> PackageStamp:
        """Every file of ``package`` in :data:`sys.modules` (a stat each, some 100)."""
        return cls.of(sorted(
            m.__file__ for name, m in list(sys.modules.items())
            if (name == package or name.startswith(package + "."))
            and getattr(m, "__file__", None)
        ))

    def changed(self) -> bool:
        return any(_stat(p) != was for p, was in self.files.items())


def serve(
    sock: Path, db: Path, handle: Handler, *, args: Sequence[str] = (), idle_s: float = IDLE_S,
    warm: Callable[[], None] | None = None, stale: Callable[[], bool] | None = None,
    stop: Any = None, ready: Any = None, folder: Path | None = None, header: bytes = HEADER,
) -> bool:
    """Answer calls on ``sock`` until idle for ``idle_s``, ``stale()`` after a call, or
    ``stop`` (a :class:`threading.Event`) is set. False at once if another server holds the
    lock. ``warm`` runs once the lock is held, before the socket is there; ``stale`` defaults
    to a :class:`PackageStamp` of the package as loaded after it. The pid and lock files are
    in ``folder`` (by default the hook's state folder of ``db``); each answer starts with
    ``header``."""
    lock = _hold(lock_file(db, sock, folder))
    if lock is None:
        return False
    try:
        if warm is not None:
            warm()
        if stale is None:
            stale = PackageStamp.loaded().changed
        if sock.parent != hook_store.state_dir(db):
            private_folder(sock.parent)
        else:
            sock.parent.mkdir(parents=True, exist_ok=True)
        sock.unlink(missing_ok=True)  # the lock is ours: a socket there is a dead server's
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            mask = os.umask(0o177)  # this user's calls only, from the moment it is there
            try:
                server.bind(str(sock))
            finally:
                os.umask(mask)
            server.listen(64)
            info = Info(os.getpid(), _now(), str(sock), list(args), idle_s)
            info_file = pid_file(db, sock, folder)
            _write_info(info_file, info)
            if ready is not None:
                ready.set()
            answer = _answerer(handle, header)
            _loop(server, answer, info, info_file, idle_s, stale, stop)
            sock.unlink(missing_ok=True)  # no new call finds it, then the queued ones answered
            _drain(server, answer)
        finally:
            server.close()
            sock.unlink(missing_ok=True)  # (no other server binds it while the lock is ours)
            pid_file(db, sock, folder).unlink(missing_ok=True)
    finally:
        os.close(lock)
    return True


def _loop(
    server: socket.socket, answer: Callable[[socket.socket], None], info: Info,
    info_file: Path, idle_s: float, stale: Callable[[], bool], stop: Any,
) -> None:
    last = time.monotonic()
    server.settimeout(min(TICK_S, idle_s))
    while stop is None or not stop.is_set():
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if time.monotonic() - last >= idle_s:
                return
            continue
        answer(conn)
        last = time.monotonic()
        info.calls += 1
        info.last_call = _now()
        _write_info(info_file, info)
        if stale():
            return


def _drain(server: socket.socket, answer: Callable[[socket.socket], None]) -> None:
    server.setblocking(False)
    while True:
        try:
            conn, _ = server.accept()
        except (BlockingIOError, InterruptedError):
            return
        answer(conn)


def _answerer(handle: Handler, header: bytes) -> Callable[[socket.socket], None]:
    """What answers one connection: ``header`` then ``handle``'s answer to its request."""

    def answer(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(CALL_TIMEOUT_S)
            try:
                text = handle(_read(conn))
                conn.sendall(header + (text.encode() if isinstance(text, str) else text))
            except OSError:
                pass  # the client went away: nothing to answer

    return answer


def _read(conn: socket.socket) -> bytes:
    chunks, size = [], 0
    while size < REQUEST_MAX and (chunk := conn.recv(65536)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def running(db: Path, folder: Path | None = None) -> list[Info]:
    """The servers answering for ``db`` now (their lock held), oldest first: those whose
    files are in ``folder`` (by default the hook's state folder of ``db``)."""
    found = []
    for path in sorted((folder or hook_store.state_dir(db)).glob("server-*.pid")):
        try:
            info = Info(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            continue
        if _held(path.with_suffix(".lock")):
            found.append(info)
    return sorted(found, key=lambda i: i.started)


def stop_servers(db: Path, sockets: Iterable[str] | None = None,
                 wait_s: float = 10.0, folder: Path | None = None) -> list[Info]:
    """Stop the running servers of ``db`` (those on ``sockets`` only, if given; their files
    in ``folder`` as for :func:`running`): SIGTERM, then wait up to ``wait_s`` for each to let
    go of its lock. The servers stopped."""
    wanted = None if sockets is None else set(sockets)
    stopped = [i for i in running(db, folder) if wanted is None or i.socket in wanted]
    for info in stopped:
        try:
            os.kill(info.pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
    deadline = time.monotonic() + wait_s
    for info in stopped:
        lock = lock_file(db, Path(info.socket), folder)
        while _held(lock) and time.monotonic() < deadline:
            time.sleep(0.05)
    return stopped


EXIT_FAILED = 1
EXIT_BUSY = 3


def main_loop(sock: Path, db: Path, handle: Handler, **kwargs: Any) -> int:
    """:func:`serve` as a process's whole life: SIGTERM ends it cleanly (socket and pid file
    removed); a failure is written to the hook log. Exit code 0, :data:`EXIT_FAILED`, or
    :data:`EXIT_BUSY` when another server answers on ``sock`` already."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        return 0 if serve(sock, db, handle, **kwargs) else EXIT_BUSY
    except KeyboardInterrupt:
        return 0
    except Exception:  # noqa: BLE001 - a server's end: say why where the user looks
        hook_store.log_error(db, "hook server: " + traceback.format_exc())
        return EXIT_FAILED


def _hold(path: Path) -> int | None:
    """The lock at ``path``, held (its descriptor), or None if another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _held(path: Path) -> bool:
    """Whether some process holds the lock at ``path`` (taken and let go at once if not)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _write_info(path: Path, info: Info) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(info)), encoding="utf-8")
    os.replace(tmp, path)


def _stat(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
