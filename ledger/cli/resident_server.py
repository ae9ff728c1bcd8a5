"""The resident ingest's server: ``agent-ledger ingest ... --resident`` answered warm.

Started detached by its client (:mod:`ledger.cli.resident_client`) as ``python -P -m
ledger.cli.resident_server SOCKET DB``, it is :func:`ledger.live.hook_server.serve` with an
ingest for a handler: one server per socket (a lock), one call at a time, its info file
(``server-<digest>.pid``: pid, start, calls, the settings it answers for) and log
(``ingest.log``) beside its socket in the client's :func:`~ledger.cli.resident_client.folder`.
It ends after :data:`IDLE_S` seconds without a call (``AGENT_LEDGER_RESIDENT_IDLE``), on
SIGTERM (``ingest DB --resident --stop``; a call in hand is finished first), and once the
package's files it loaded have changed (the call that finds them changed is refused, so the
client runs it with the new code).

Each call is answered with :func:`ledger.cli.ingest_report.plain_ingest`, the plain command's
own code, in the client's folder, its output written to streams that encode and say they
are terminals as the client's do: the same output and exit code, bar the progress bar (never
drawn). A call for other settings than the server's own, or that is not a plain ingest, is
refused (the header alone), and the client runs it itself.
"""

from __future__ import annotations

import gc
import io
import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ledger.cli import resident_client
from ledger.cli.quick import plain_ingest_args
from ledger.live import hook_server

IDLE_S = 600.0
REFUSED = b""  # the header alone: the client runs the call itself


@dataclass(frozen=True)
class Call:
    """A call as the client sends it (:func:`ledger.cli.resident_client.request`)."""

    cwd: str
    settings: list[str]
    streams: list[tuple[str, str, bool]]  # stdout's, stderr's: encoding, errors, a terminal
    argv: list[str]


def parse_call(data: bytes) -> Call | None:
    """The call in ``data``, or None if it is not one of this protocol."""
    fields = data.decode("utf-8", "surrogateescape").split("\0")
    if len(fields) < 3 or fields[0] != resident_client.PROTOCOL or not fields[2].isdigit():
        return None
    count = int(fields[2])
    settings, rest = fields[3:3 + count], fields[3 + count:]
    if len(settings) != count or len(rest) < 6:
        return None
    streams = [(rest[0], rest[1], rest[2] == "1"), (rest[3], rest[4], rest[5] == "1")]
    return Call(fields[1], settings, streams, rest[6:])


class _Terminal(io.BytesIO):
    """The bytes a stream wrote, from a stream that says it is a terminal or not as the
    client's does (click strips escape sequences off one that is not)."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def _stream(encoding: str, errors: str, tty: bool) -> io.TextIOWrapper:
    return io.TextIOWrapper(_Terminal(tty), encoding=encoding, errors=errors,
                            write_through=True)


def answer(call: Call) -> bytes:
    """The plain ingest of ``call.argv`` in ``call.cwd``: ``CODE OUT_SIZE ERR_SIZE\\n``, its
    standard output and its standard error; :data:`REFUSED` if it is not a plain ingest."""
    from ledger.cli.ingest_report import plain_ingest

    os.chdir(call.cwd)
    plain = plain_ingest_args(call.argv)
    if plain is None:
        return REFUSED
    out, err = (_stream(*s) for s in call.streams)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        try:
            code = plain_ingest(*plain[:4], False)
        except SystemExit as exc:  # click's way out, after an error (reported_by_click)
            code = exit_code(exc.code, err)
    finally:
        sys.stdout, sys.stderr = saved
    written = [s.buffer.getvalue() for s in (out, err)]  # type: ignore[attr-defined]
    return b"%d %d %d\n" % (code, *map(len, written)) + b"".join(written)


def exit_code(code: object, err: io.TextIOWrapper) -> int:
    """The exit code of ``sys.exit(code)``, its message written as Python writes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    err.write(f"{code}\n")
    return 1


@contextmanager
def sigterm_held() -> Iterator[None]:
    """SIGTERM held while a call runs: a server asked to stop finishes the call in hand
    (and ends before it answers: its client then runs what is left itself)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


class Server:
    """The handler of :func:`ledger.live.hook_server.serve` for one database's settings."""

    def __init__(self, db: str) -> None:
        self.settings = resident_client.settings(db)
        self.stamp = hook_server.PackageStamp()

    def warm(self) -> None:
        """Everything a call uses, loaded before the socket is there: an ingest of an empty
        file into a database thrown away (the modules, the options' files), the modules only
        some calls use, the secret rule set (which a call would load once it had asked its
        needs about 2 MB), then the stamp of the package's files as loaded."""
        from ledger.analysis import budget_in_force  # noqa: F401 - (a summary's stop reasons)
        from ledger.core import secret_rules
        from ledger.ingest import copies  # noqa: F401 - (a session in pieces of several files)

        with tempfile.TemporaryDirectory() as scratch:
            Path(scratch, "warm.jsonl").touch()
            answer(Call(scratch, self.settings, [("utf-8", "strict", False)] * 2,
                        ["ingest", os.path.join(scratch, "warm.db"), scratch]))
            os.chdir("/")  # (each call runs in its client's folder)
        secret_rules.load()
        self.stamp = hook_server.PackageStamp.of([
            *hook_server.PackageStamp.loaded("ledger").files,
            *hook_server.PackageStamp.loaded("genai_prices").files,
            *package_data(),
        ])
        gc.collect()
        gc.freeze()  # what is loaded now lives as long as the server: no pass walks it again

    def handle(self, data: bytes) -> bytes:
        call = parse_call(data)
        if call is None or call.settings != self.settings or self.stamp.changed():
            return REFUSED
        try:
            with sigterm_held():
                return answer(call)
        except Exception:  # noqa: BLE001 - the client runs it itself, and says what it says
            return REFUSED


def package_data() -> list[str]:
    """The package's files that are not modules (the default action map, the native event
    schema): a call reads them as it runs the modules, so a change to one alone ends the
    server too."""
    package = Path(__file__).resolve().parent.parent
    return sorted(str(p) for p in package.rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc"))


def idle_seconds() -> float:
    value = os.environ.get(resident_client.IDLE_ENV)
    try:
        return float(value) if value else IDLE_S
    except ValueError:
        return IDLE_S


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def workers_die_with_the_server() -> None:
    """The processes this one forks (an ingest's workers) killed when it dies (Linux): a
    server killed mid-call would leave them behind, blocked, holding its lock and sockets, so
    that no new server could start for the socket (and each call waited for a dead one)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return
    server = os.getpid()

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != server:  # it died before that took hold
            os._exit(1)

    os.register_at_fork(after_in_child=in_child)


def serve(sock: Path, db: str) -> int:
    """The server on ``sock`` for ``db``'s settings until idle, stopped or stale: exit code
    0, or :data:`ledger.live.hook_server.EXIT_BUSY` if another holds the socket's lock."""
    folder = Path(resident_client.folder())
    hook_server.private_folder(folder)
    workers_die_with_the_server()
    server = Server(db)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    done = hook_server.serve(
        sock, Path(db), server.handle, args=server.settings, idle_s=idle_seconds(),
        warm=server.warm, stale=lambda: server.stamp.changed(), folder=folder,
        header=resident_client.HEADER,
    )
    return 0 if done else hook_server.EXIT_BUSY


def servers_of(db: str) -> list[hook_server.Info]:
    """The resident ingest servers running for ``db`` (whatever their settings)."""
    real = os.path.realpath(db)
    folder = Path(resident_client.folder())
    return [i for i in hook_server.running(Path(real), folder) if i.args[:1] == [real]]


def stop_command(db: str) -> int:
    """``agent-ledger ingest DB --resident --stop``: the servers of ``db`` stopped (each
    finishes its call in hand), one line each."""
    servers = servers_of(db)
    folder = Path(resident_client.folder())
    stopped = hook_server.stop_servers(Path(os.path.realpath(db)),
                                       [i.socket for i in servers], folder=folder)
    for info in stopped:
        print(f"stopped the resident server {info.pid} (started {info.started}, "
              f"{info.calls} calls)")
    if not stopped:
        print(f"no resident server runs for {db}")
    return 0


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1]), sys.argv[2]))
