"""The resident brake: ``hook serve`` answers hook calls over a Unix socket, warm.

A hook call started as a process pays for Python and the fold's imports every time
(docs/hooks.md gives the figures); the server pays once and answers each call with
:func:`ledger.live.hook_run.run`, the same function, so a call through the server and a
call as a process give the same answer and record the same row. One call at a time (the
state of a session is locked per call anyway); a call's failure is its answer (run catches
everything), never the server's end.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

from ledger.live import hook_store

Handler = Callable[[bytes], str]
SOCKET_NAME = "hook.sock"
REQUEST_MAX = 16 * 1024 * 1024  # a hook input larger than this is cut (and fails to parse)


def socket_path(db: Path) -> Path:
    return hook_store.state_dir(db) / SOCKET_NAME


def serve(path: Path, handle: Handler, stop: threading.Event | None = None,
          ready: threading.Event | None = None) -> None:
    """Answer calls on ``path`` until ``stop`` is set (or forever)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()  # a server that died left its socket
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o600)  # this user's calls only
    server.listen(16)
    server.settimeout(0.2)
    if ready is not None:
        ready.set()
    try:
        while stop is None or not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5.0)
                try:
                    conn.sendall(handle(_read(conn)).encode())
                except OSError:
                    continue  # the client went away: nothing to answer
    finally:
        server.close()
        path.unlink(missing_ok=True)


def _read(conn: socket.socket) -> bytes:
    chunks, size = [], 0
    while size < REQUEST_MAX and (chunk := conn.recv(65536)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
