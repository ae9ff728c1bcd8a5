"""The resident brake's client: what ``hook install`` writes for Claude Code to run.

Standard library only, run as a script (``python -S hook_client.py SOCKET [ARGS...]``), so a
call costs an interpreter's start and one round trip, not agent-ledger's imports. It sends
the hook input to the server listening on SOCKET and prints its answer.

With no server there, it starts one, detached (its own session, no terminal, its errors
appended to the hook log beside ``--db``): ``python -P -m ledger.live.hook_main serve --socket
SOCKET ARGS...``; and answers this call itself, as the light hook (``python -P -m
ledger.live.hook_main claude-code ARGS...``, the same answer at the cost of a process's
start). The next calls go to the server. A server that does not answer in time, or closes the
connection without an answer, is a call that cannot be checked: denied (fail closed) unless
ARGS hold ``--fail-open``.
"""

from __future__ import annotations

# The C module under ``socket``: ``socket.py`` imports ``enum`` and more (some 3 ms of a call
# that costs ~20); ``json`` (8 ms) is imported only to write a denial.
import _socket
import os
import sys

TIMEOUT_S = 8.0  # under the hook's timeout in settings.json (10 s)
HEADER = b"agent-ledger-hook/1\n"  # what the server's answer starts with (hook_server.HEADER)
ENTRY = "ledger.live.hook_main"
#: ``-P``: not the folder Claude Code runs the hook in first on the path, where a project's own
#: ``ledger`` package would be imported in place of agent-ledger's.
SAFE = ("-P", "-m")


def main(argv: list[str]) -> None:
    path, args = argv[0], argv[1:]
    stdin = sys.stdin.buffer.read()  # all of it first: the server never waits on a client
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    conn.settimeout(TIMEOUT_S)
    try:
        conn.connect(path)
    except OSError:  # no server: start one, and answer this call as the light hook
        conn.close()
        start_server(path, args)
        as_stdin(stdin)
        os.execv(sys.executable, [sys.executable, *SAFE, ENTRY, "claude-code", *args])
    try:
        conn.sendall(stdin)
        conn.shutdown(_socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        answer = b"".join(chunks)
        if not answer.startswith(HEADER):
            raise OSError("it closed the connection without an answer")
        text = answer[len(HEADER):].decode()
        sys.stdout.write(text + "\n" if text else "")
    except OSError as exc:
        if "--fail-open" not in args:
            import json

            sys.stdout.write(json.dumps({"hookSpecificOutput": {
                "hookEventName": "PreToolUse", "permissionDecision": "deny",
                "permissionDecisionReason": f"agent-ledger hook server at {path} did not answer "
                f"({exc}), so the call is denied (fail closed). Tell the user; the hook log "
                "is beside the database (ledger.db.hook/hook.log).",
            }}))
    finally:
        conn.close()


def start_server(path: str, args: list[str]) -> None:
    """The server for SOCKET and ARGS, started detached; nothing if it cannot be (this call
    is answered anyway, and the next one tries again)."""
    import subprocess

    try:
        with open(log_path(args), "ab") as log:
            subprocess.Popen(
                [sys.executable, *SAFE, ENTRY, "serve", "--socket", path, *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                start_new_session=True,
            )
    except OSError:
        pass


def as_stdin(data: bytes) -> None:
    """Standard input made ``data`` again, for the process this one becomes: a file only this
    process holds (removed as soon as it is open), since a pipe would block on a large call
    (and nothing at all if no name is free: the call then fails closed as empty input)."""
    folder = os.environ.get("TMPDIR") or "/tmp"
    for n in range(100):
        name = os.path.join(folder, f"agent-ledger-hook-{os.getpid()}-{n}.json")
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        os.unlink(name)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
        os.dup2(fd, 0)
        os.close(fd)
        return


def log_path(args: list[str]) -> str:
    """``<db>.hook/hook.log`` of ``--db`` in ARGS (what ``hook install`` always writes), made
    if needed; else nowhere."""
    db = next((v for k, v in zip(args, args[1:], strict=False) if k == "--db"), None)
    if db is None:
        return os.devnull
    folder = db + ".hook"
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, "hook.log")


if __name__ == "__main__":
    main(sys.argv[1:])
