"""``agent-ledger-hook``: the hook Claude Code runs before each tool call, started light.

``agent-ledger hook claude-code`` answers the same, but starts the whole command line (click,
every command's options) first; this entry imports only what a call needs: the hook, the
fold, the budget and the configuration readers (``python -X importtime`` shows the rest
stays out). Its arguments are those of ``hook claude-code``; a bad one is a call that cannot
be checked, denied (or allowed with ``--fail-open``) with the reason, never a traceback.

``serve`` is the resident server (:mod:`ledger.live.hook_server`), as the client starts it and
as ``agent-ledger hook serve`` runs it: the same arguments, plus ``--socket`` and
``--idle-seconds``.

    agent-ledger-hook claude-code --db ~/.agent-ledger/ledger.db [--budget-file F] [--fail-open]
    agent-ledger-hook serve --db ~/.agent-ledger/ledger.db [--socket S] [--idle-seconds N]
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from msgspec import Struct, field

from ledger.ingest.options import Options
from ledger.live import hook_store
from ledger.live.hook import HookInputError
from ledger.live.hook_run import OptionsFor, output, run, verdict_of_failure

COMMAND = "claude-code"
SERVE = "serve"
#: ``--idle-seconds`` is the server's: the client passes the same arguments to the server it
#: starts and to the light hook that answers meanwhile, which ignores it.
_VALUED = {"--db": "db", "--budget-file": "budget_file", "--vendor-map": "vendor_map",
           "--prices": "prices", "--idle-seconds": "idle_seconds"}
_SERVE_VALUED = {"--socket": "socket"}
#: The options built for this many budget files are kept (a server answers many projects).
OPTIONS_KEPT = 32
#: A file changed this recently is read again at the next call (see :func:`kept`): more than
#: the coarsest timestamps in use (FAT's 2 s; ext4 and APFS keep nanoseconds).
RACY_NS = 3_000_000_000


class Arguments(Struct):
    db: str | None = None
    budget_file: str | None = None
    vendor_map: str | None = None
    prices: str | None = None
    fail_open: bool = False
    budget_pairs: list[str] = field(default_factory=list)
    socket: str | None = None  # serve only
    idle_seconds: str | None = None  # the server's (ignored by a call)

    @property
    def db_path(self) -> Path:
        return Path(self.db).expanduser().resolve() if self.db else hook_store.default_db()

    def hook_args(self) -> list[str]:
        """The arguments of ``hook claude-code`` these stand for, as ``hook install`` writes
        them (what names a server: :func:`ledger.live.hook_server.socket_path`)."""
        return hook_args(self.db_path, self.budget_file, self.vendor_map, self.prices,
                         self.budget_pairs, self.fail_open)


def hook_args(
    db: Path, budget_file: str | None = None, vendor_map: str | None = None,
    prices: str | None = None, budget_pairs: Sequence[str] = (), fail_open: bool = False,
) -> list[str]:
    """``hook claude-code``'s arguments, files as absolute paths, in one order."""
    args = ["--db", str(db)]
    for name, value in (("--budget-file", budget_file), ("--vendor-map", vendor_map),
                        ("--prices", prices)):
        if value:
            args += [name, str(Path(value).expanduser().resolve())]
    args += [f"--budget={pair}" for pair in budget_pairs]
    return args + (["--fail-open"] if fail_open else [])


def parse(argv: list[str]) -> Arguments:
    """The arguments of ``hook claude-code`` (``--opt value`` or ``--opt=value``), or of
    ``serve`` (those and ``--socket``)."""
    args = Arguments()
    serving = argv[:1] == [SERVE]
    valued = {**_VALUED, **_SERVE_VALUED} if serving else _VALUED
    rest = argv[1:] if argv[:1] in ([COMMAND], [SERVE]) else argv
    items = iter(rest)
    for item in items:
        name, eq, value = item.partition("=")
        if item == "--fail-open":
            args.fail_open = True
            continue
        if name not in (*valued, "--budget"):
            raise HookInputError(f"agent-ledger-hook: unknown argument {item!r}")
        if not eq:
            value = next(items, "")
            if not value:
                raise HookInputError(f"agent-ledger-hook: {name} needs a value")
        if name == "--budget":
            args.budget_pairs.append(value)
        else:
            setattr(args, valued[name], value)
    return args


def options_for(
    budget_pairs: list[str] | tuple[str, ...], vendor_map: str | None, prices: str | None,
) -> OptionsFor:
    """Given the budget file found for a session, the options to fold under: what
    ``make_options`` of the command line makes, without click (a bad file is a
    :class:`HookInputError`, and the call is denied saying why). The price rates and the
    default action map's parse come from the user's cache folder where earlier processes
    left them (:mod:`ledger.config.user_cache`), so a call imports neither the price library
    nor tomllib."""

    def make(found: str | None) -> Options:
        from ledger.config.action_map import ActionMapError, default_action_map
        from ledger.config.fold_options import options_from_files
        from ledger.config.prices import PricesError, load_prices
        from ledger.core.budget import BudgetError
        from ledger.core.vendors import VendorMapError

        try:
            return options_from_files(
                budget_pairs, found, vendor_map,
                load_prices(prices), default_action_map(),
            )
        except (BudgetError, VendorMapError, PricesError, ActionMapError, OSError) as exc:
            raise HookInputError(str(exc)) from None

    return make


def kept(
    make: OptionsFor, files: Sequence[str | None] = (), clock: Callable[[], int] = time.time_ns
) -> OptionsFor:
    """``make``, its options kept per budget file: built again only when the file (or one of
    ``files``: the vendor map and prices given) is another one, or was changed (its inode,
    size, mtime or ctime differ), so a budget edited between calls is the next call's.

    Options built from a file modified less than :data:`RACY_NS` before are not kept (git's
    rule for "racily clean" files): an edit within the same tick of the file system's clock
    keeps every field of the stamp, and would otherwise go unseen. (An edit later than that
    tick always moves the mtime.)"""
    built: dict[tuple[object, ...], Options] = {}

    def get(found: str | None) -> Options:
        now = clock()
        stamps = tuple(map(_stamp, (found, *files)))
        key = (found, *stamps)
        if key in built:
            return built[key]
        options = make(found)  # (a bad file raises: not kept, read again next call)
        if not any(stamp and stamp[2] > now - RACY_NS for stamp in stamps):
            if len(built) >= OPTIONS_KEPT:
                built.pop(next(iter(built)))
            built[key] = options
        return options

    return get


def _stamp(path: str | None) -> tuple[int, ...] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [SERVE]:
        sys.exit(serve_main(argv))
    try:
        args = parse(argv)
    except HookInputError as exc:
        sys.stdout.write(output(verdict_of_failure(None, exc, "--fail-open" in argv), None))
        return
    db = args.db_path
    make = options_for(args.budget_pairs, args.vendor_map, args.prices)
    text = run(sys.stdin.buffer.read(), db, make, args.budget_file, args.fail_open)
    if text:
        sys.stdout.write(text + "\n")


def serve_main(argv: list[str]) -> int:
    """``serve ARGS``: a bad argument is said on standard error (the hook log, when the
    client started it), exit code 2."""
    try:
        args = parse(argv)
        idle = float(args.idle_seconds) if args.idle_seconds else None
    except (HookInputError, ValueError) as exc:
        print(f"agent-ledger-hook serve: {exc}", file=sys.stderr)
        return 2
    return serve(args, idle)


def serve(args: Arguments, idle_s: float | None = None, announce: bool = False) -> int:
    """The resident server for ``args`` (:func:`ledger.live.hook_server.serve`): on
    ``--socket``, else where ``hook install`` points the client; its options kept
    (:func:`kept`); until idle for ``idle_s`` (default 30 minutes) or its package changes.
    Exit code 0, or that of :func:`ledger.live.hook_server.main_loop`."""
    from ledger.live import hook_server

    db = args.db_path
    sock = Path(args.socket) if args.socket else hook_server.socket_path(db, args.hook_args())
    make = kept(options_for(args.budget_pairs, args.vendor_map, args.prices),
                [args.vendor_map, args.prices])

    def warm() -> None:
        if announce:
            print(f"agent-ledger hook serve: answering on {sock} (Ctrl-C to stop)",
                  file=sys.stderr)
        warm_up(make, args.budget_file)

    code = hook_server.main_loop(
        sock, db, lambda stdin: run(stdin, db, make, args.budget_file, args.fail_open),
        args=args.hook_args(), idle_s=hook_server.IDLE_S if idle_s is None else idle_s,
        warm=warm,
    )
    if code == hook_server.EXIT_BUSY and announce:
        print(f"agent-ledger hook serve: a server answers on {sock} already", file=sys.stderr)
    return code


def warm_up(make: OptionsFor, budget_file: str | None) -> None:
    """What a server loads before it listens, not in the first call that needs it: the
    options (prices and maps) and the secret rule set (0.3 s; a server that has asked the
    needs about ``secret_rules.NEEDS_BUDGET`` bytes of text would load it mid-call anyway)."""
    from ledger.core import secret_rules

    try:
        make(budget_file)
    except HookInputError as exc:  # each call is denied saying so, until it is fixed
        print(f"agent-ledger hook serve: {exc}", file=sys.stderr)
    secret_rules.load()


if __name__ == "__main__":
    main()
