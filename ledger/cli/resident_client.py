"""``agent-ledger ingest DB PATHS... --resident``: the client, run by the console script
(:mod:`ledger.cli.quick`) before anything else is imported (``_socket``, ``os`` and ``sys``).

A plain ingest pays for Python's start, its imports (some 60 ms installed) and its work; a
resident server (:mod:`ledger.cli.resident_server`) has them loaded and answers each call
with the same code, so the call costs a small process and one round trip. A re-run with
nothing new is the server's too: its answer costs less than the console script's own check
(:func:`ledger.cli.quick.noop_summary`), which imports sqlite3. This client:

- sends the call (its folder, its streams' encodings and whether they are terminals,
  the settings the server is keyed on, the argument list) to the server for this database
  and these settings, and prints its answer: standard output, standard error and the exit
  code the plain command would give (no progress bar: the server draws none);
- runs the ingest itself, the plain way (:func:`ledger.cli.quick.plain`), when it cannot be
  answered: no server (it then starts one, detached, for the next calls), a socket left
  behind, a server that refuses the call (other settings, its package changed), dies in it
  or cuts its answer short. An ingest is idempotent and transactional, so a call the server
  began and never answered is finished here without losing or counting a line twice.

A server answers for one database and one set of :func:`settings` (the socket's name is
their digest, and the server checks them again): the database's real path, this package's
folder and interpreter, the machine's name (``sources.host``), the umask (a database made),
and the environment variables the ingest reads (:data:`KEYED`, :data:`KEYED_PREFIXES`).

Ctrl-C while the server works stops this client only: the server finishes the ingest and
commits it (its summary is not shown; the next run finds those lines read).
"""

from __future__ import annotations

import _socket
import os
import sys

from ledger.cli import quick
from ledger.live.runtime_folder import is_private, short_folder

RESIDENT, STOP = "--resident", "--stop"
ENTRY = "ledger.cli.resident_server"
PROTOCOL = "agent-ledger-ingest/1"
HEADER = PROTOCOL.encode() + b"\n"  # what the server's answer starts with
#: Seconds to wait for a server to take the call; once taken, the call waits for its answer
#: as long as the ingest takes (a server that dies closes the connection).
CONNECT_S = 5.0
#: Environment variables the ingest's result or its caches depend on (the user's cache
#: folder: prices, action map, compiled secret rules; where Python finds the packages).
KEYED = ("HOME", "XDG_CACHE_HOME", "TMPDIR", "PYTHONPATH", "PYTHONHOME")
KEYED_PREFIXES = ("AGENT_LEDGER_", "KF_")
#: The server's idle time in seconds (default 600), read by the server: not keyed.
IDLE_ENV = "AGENT_LEDGER_RESIDENT_IDLE"
NAME = "ingest-0123456789abcdef.sock"  # the length of a socket's name


def resident_main(argv: list[str]) -> int | None:
    """``ingest ... --resident``'s exit code, or None when ``argv`` (without ``--resident``)
    is not a plain ingest: the full command line then says what it says of it."""
    rest = [a for a in argv if a != RESIDENT]
    if STOP in rest:
        stop_args = [a for a in rest if a != STOP]
        if len(stop_args) != 2 or stop_args[1].startswith("-"):
            return None
        from ledger.cli.resident_server import stop_command

        return stop_command(stop_args[1])
    plain = quick.plain_ingest_args(rest)
    if plain is None:
        return None
    keyed = settings(plain[0])
    path = socket_path(keyed)
    answer = call(path, keyed[0], request(keyed, rest))
    if answer is None:
        return quick.plain(plain)
    code, out, err = answer
    try:
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
    except BrokenPipeError:
        return 1  # as click ends on a closed pipe
    sys.stderr.buffer.write(err)
    sys.stderr.flush()
    return code


def settings(db_path: str) -> list[str]:
    """What a server is keyed on besides the argument list (see the module's docstring)."""
    mask = os.umask(0o022)
    os.umask(mask)
    env = sorted(
        f"{name}={value}" for name, value in os.environ.items()
        if (name in KEYED or name.startswith(KEYED_PREFIXES)) and name != IDLE_ENV
    )
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    return [os.path.realpath(db_path), package, sys.executable, os.uname().nodename,
            f"umask={mask:o}", *env]


def key(keyed: list[str]) -> str:
    """A 64-bit FNV-1a digest of ``keyed`` in hexadecimal (``hashlib`` costs 5 ms to import;
    the server compares the settings themselves, so this only has to tell them apart)."""
    digest = 0xCBF29CE484222325
    for byte in "\0".join(keyed).encode("utf-8", "surrogateescape"):
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


def folder() -> str:
    """The servers' folder: their sockets, info, lock and log files (``0700``)."""
    return short_folder(NAME)


def socket_path(keyed: list[str]) -> str:
    """The socket of the server for ``keyed`` (short enough: :func:`folder` sees to it)."""
    return os.path.join(folder(), f"ingest-{key(keyed)}.sock")


def request(keyed: list[str], argv: list[str]) -> bytes:
    """The call, fields separated by NUL (which no argument, path or variable holds)."""
    streams = [sys.stdout, sys.stderr]
    fields = [PROTOCOL, os.getcwd(), str(len(keyed)), *keyed]
    for stream in streams:
        fields += [stream.encoding, stream.errors or "strict", "1" if stream.isatty() else ""]
    return "\0".join([*fields, *argv]).encode("utf-8", "surrogateescape")


def call(path: str, db: str, data: bytes) -> tuple[int, bytes, bytes] | None:
    """The server's answer to ``data`` (exit code, stdout, stderr), or None if there is none:
    no server there (one is started, for the next calls), or none that answered in full."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_S)
        try:
            conn.connect(path)
        except OSError:
            start_server(path, db)
            return None
        server = peer_pid(conn)
        try:
            conn.sendall(data)
            conn.shutdown(_socket.SHUT_WR)
            chunks = []
            while chunk := receive(conn, server):
                chunks.append(chunk)
        except KeyboardInterrupt:
            sys.stderr.write("\nAborted! The resident server finishes this ingest and commits "
                             "it; its summary is not shown.\n")
            raise SystemExit(1) from None
        except OSError:
            return None
        return parse_answer(b"".join(chunks))
    finally:
        conn.close()


#: Seconds between two looks at whether the server still runs, while its answer is awaited.
ALIVE_S = 1.0


def peer_pid(conn: _socket.socket) -> int | None:
    """The server's process id (``SO_PEERCRED``, Linux), or None where it cannot be known."""
    try:
        cred = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except (AttributeError, OSError):
        return None
    return int.from_bytes(cred[:4], sys.byteorder)


def receive(conn: _socket.socket, server: int | None) -> bytes:
    """The next bytes of the answer (empty at its end), waiting as long as the server runs.
    Waiting for the connection's end alone is not enough: the ingest's worker processes,
    forked by the server, hold it open after a server killed mid-call, until they end."""
    conn.settimeout(None if server is None else ALIVE_S)
    while True:
        try:
            return conn.recv(1 << 16)
        except TimeoutError:
            try:
                os.kill(server, 0)  # type: ignore[arg-type]
            except ProcessLookupError:
                raise OSError("the server ended without an answer") from None


def parse_answer(answer: bytes) -> tuple[int, bytes, bytes] | None:
    """``HEADER``, ``CODE OUT_SIZE ERR_SIZE\\n``, then the two outputs; None if it is not
    that, whole (a refusal is the header alone)."""
    if not answer.startswith(HEADER):
        return None
    head, newline, body = answer[len(HEADER):].partition(b"\n")
    try:
        code, out_size, err_size = map(int, head.split())
    except ValueError:
        return None
    if not newline or len(body) != out_size + err_size:
        return None
    return code, body[:out_size], body[out_size:]


def start_server(path: str, db: str) -> None:
    """The server on ``path`` for the database ``db`` (its real path), started detached, its
    errors appended to ``ingest.log`` in :func:`folder`; nothing if it cannot be (this call
    is run here anyway), nor in a folder that is not this user's alone (the server would
    refuse it too), where the log could be a link someone else put there."""
    import subprocess

    try:
        os.makedirs(folder(), mode=0o700, exist_ok=True)
        if not is_private(folder()):
            return
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        log = os.open(os.path.join(folder(), "ingest.log"), flags, 0o600)
        try:
            subprocess.Popen(
                [sys.executable, "-P", "-m", ENTRY, path, db],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                start_new_session=True,
            )
        finally:
            os.close(log)
    except OSError:
        pass
