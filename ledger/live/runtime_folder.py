"""Where a resident server's socket goes when its own folder's path is too long for one: a
short folder of this user's. ``os`` only: the resident ingest's client
(:mod:`ledger.cli.resident_client`) finds its server's socket with it, importing nothing more.
"""

from __future__ import annotations

import os
import stat

#: A Unix socket's path is at most 107 bytes on Linux (104 on macOS): longer ones go to a short
#: folder of this user's (:func:`short_folder`).
SOCKET_MAX = 100
KEY_NAME = "0123456789ab.sock"  # the length of a hook socket's name in the short folder


def short_folder(name: str = KEY_NAME) -> str:
    """``$XDG_RUNTIME_DIR/agent-ledger`` (a folder of this user's) if a socket named like
    ``name`` fits in it, else ``/tmp/agent-ledger-<uid>``; made ``0700`` by the server
    (:func:`ledger.live.hook_server.private_folder`)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and len(os.fsencode(os.path.join(runtime, "agent-ledger", name))) <= SOCKET_MAX:
        return os.path.join(runtime, "agent-ledger")
    return f"/tmp/agent-ledger-{os.getuid()}"


def is_private(folder: str) -> bool:
    """Whether ``folder`` is a folder (not a link to one) of this user's that no one else may
    read or write: a socket or log file in any other could be replaced by someone else's, or
    be a link someone else put there to a file of this user's."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077
