"""The resident brake's client: what Claude Code runs when ``hook serve`` is in use.

Standard library only, run as a script (``python -S hook_client.py SOCKET [ARGS...]``), so a
call costs an interpreter's start and one round trip, not agent-ledger's imports. It sends
the hook input to the server listening on SOCKET and prints its answer. With no server there,
it runs the light hook, ``python -m ledger.live.hook_main claude-code ARGS...``, in its
place (the same answer, at the cost of a process's start). A server that does not answer in
time is a call that cannot be checked: denied (fail closed) unless ARGS hold ``--fail-open``.
"""

from __future__ import annotations

import json
import os
import socket
import sys

TIMEOUT_S = 8.0  # under the hook's timeout in settings.json (10 s)


def main(argv: list[str]) -> None:
    path, args = argv[0], argv[1:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(TIMEOUT_S)
    try:
        conn.connect(path)
    except OSError:  # no server: the full command, reading the same standard input
        conn.close()
        command = [sys.executable, "-m", "ledger.live.hook_main", "claude-code", *args]
        os.execv(sys.executable, command)
    try:
        conn.sendall(sys.stdin.buffer.read())
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        sys.stdout.write(b"".join(chunks).decode())
    except OSError as exc:
        if "--fail-open" not in args:
            sys.stdout.write(json.dumps({"hookSpecificOutput": {
                "hookEventName": "PreToolUse", "permissionDecision": "deny",
                "permissionDecisionReason": f"agent-ledger hook server at {path} did not answer "
                f"({exc}), so the call is denied (fail closed). Tell the user.",
            }}))
    finally:
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1:])
