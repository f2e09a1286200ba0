"""The screen process: the dealer display and the scoreboard, served from the daemon's feed.

The daemon (``link.py``) starts it at a lower priority than the table, hands it the display's
listening socket (descriptor 3) and writes the sealed feed (``wire.py``) to its stdin. It
serves the pages exactly as the daemon once did itself (controller/display/), and ends when
its stdin ends: the daemon went, or let it go. Everything it knows came through that feed,
so it has nothing to leak: it never opens the journal, the devices or the control socket, and
before it reads its feed it shuts itself in (``sandbox.py``) so that a process taken over
through the network cannot either.

    python -m controller.service.screens.child --settings JSON --rate R
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import structlog

from controller.display.catalogues import search_path
from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.display.studio import StudioSettings
from controller.service.screens.sandbox import SandboxUnavailable, shut_in
from controller.service.telemetry.logging_setup import setup_logging
from controller.table.views import seconds_left_now

log = structlog.get_logger("pokdeng.screens")

LISTEN_FD = 3          # the listening socket the daemon hands over
NICE = 10              # below the table (Nice=-10 in the unit) and the PC's other work (0)
#: event batches the display may be behind before this process stops reading its feed: the
#: pipe fills and the daemon drops to a catch-up (its side never waits)
MAX_BACKLOG = 1000
#: the daemon is taken for frozen when its feed says nothing for this long (it sends at least
#: every ``link.KEEPALIVE_S``): the pages then see a lost link
TABLE_SILENT_S = 6.0
#: the daemon waited before it sent a change (link.SETTLE_S): this process renders as soon as
#: the rest of that write is in
SETTLE_S = 0.002
PR_SET_PDEATHSIG = 1


def die_with_the_daemon() -> None:
    """The kernel kills this process when the daemon dies, however it died: a screen process
    hung where it never sees its feed end would otherwise outlive a killed daemon and keep
    the display's port from the next one (``PR_SET_PDEATHSIG``). A daemon that died before
    this was asked is noticed at once: this process then has another parent."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        log.warning("screens: cannot ask to end with the daemon",
                    error=os.strerror(ctypes.get_errno()))
    if os.getppid() != parent:
        sys.exit("screens: the daemon is gone")


def drop_inherited_descriptors() -> None:
    """Only its feed (stdin), its output (stdout, stderr) and the listening socket stay open:
    a descriptor the daemon was itself handed unasked (a shell's ``9<file``) would pass
    through to this process, and the sandbox shuts nothing already open."""
    os.closerange(LISTEN_FD + 1, os.sysconf("SC_OPEN_MAX"))


def lower_priority() -> None:
    """The normal policy, never the daemon's real-time one, at nice ``NICE`` (or lower, if
    started lower): a page's work never takes a core the card's path wants."""
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError as exc:
        log.warning("screens: cannot leave the real-time policy", error=exc.strerror)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, max(NICE, os.getpriority(os.PRIO_PROCESS, 0)))
    except OSError as exc:
        log.warning("screens: cannot lower the CPU priority", error=exc.strerror)


class FeedState:
    """The last status and backends the daemon sent, and the table clock read on from it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._version = 0
        self._status: dict[str, Any] = {"state": "starting"}
        self._clock: tuple[float, float, float] | None = None  # now, mono, speed
        self._backends: dict[str, Any] = {}
        self._heard = time.monotonic()
        self._heard_once = False

    def heard(self) -> None:
        """A message came from the daemon."""
        self._heard, self._heard_once = time.monotonic(), True

    def live(self) -> bool:
        """Whether the daemon was heard from lately (never yet: not live)."""
        return self._heard_once and time.monotonic() - self._heard < TABLE_SILENT_S

    def set_status(self, status: dict[str, Any], now: float, mono: float,
                   speed: float) -> None:
        with self._lock:
            self._status, self._clock = status, (now, mono, speed)
            self._version += 1

    def set_backends(self, backends: dict[str, Any]) -> None:
        with self._lock:
            self._backends = backends

    def snapshot(self) -> tuple[int, dict[str, Any]]:
        """(version, the status as of now): what the display's feed reads."""
        with self._lock:
            version, status, clock = self._version, dict(self._status), self._clock
        if clock is not None:
            now, mono, speed = clock
            status["now"] = now + (time.monotonic() - mono) * speed
            if status.get("betting_open"):
                status["betting_seconds_left"] = seconds_left_now(status, status["now"])
        return version, status

    def has_status(self) -> bool:
        """Whether the daemon sent the table's status yet."""
        with self._lock:
            return self._clock is not None

    def backends(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._backends)


def follow(lines: Iterable[bytes], display: DisplayServer, state: FeedState,
           until: Callable[[], bool] | None = None) -> int:
    """Apply the feed's messages until it ends (or ``until`` holds after one); returns how
    many were refused (each logged, naming the line: one bad message costs that message,
    not the screen)."""
    refused = 0
    for number, line in enumerate(lines, 1):
        try:
            message = json.loads(line)
            kind = message["kind"]
            state.heard()
            if kind == "alive":
                pass
            elif kind == "reset":
                display.feed.restart(list(message["events"]))
            elif kind == "events":
                display.offer_events(list(message["events"]))
            elif kind == "status":
                state.set_status(dict(message["status"]), float(message["now"]),
                                 float(message["mono"]), float(message["speed"]))
                display.status_changed()
            elif kind == "backends":
                state.set_backends(dict(message["backends"]))
            else:
                raise ValueError(f"unknown kind {kind!r}")
        except (ValueError, KeyError, TypeError) as exc:
            refused += 1
            log.error("screens: a feed message refused", line=number, problem=str(exc))
        if until is not None and until():
            break
        while display.feed.backlog() > MAX_BACKLOG:
            time.sleep(0.01)  # the pipe fills meanwhile: the daemon catches up instead
    return refused


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pokdeng-table screens")
    parser.add_argument("--settings", required=True, help="the display section, as JSON")
    parser.add_argument("--rate", type=float, default=1.0,
                        help="real seconds per table second")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--log-format", default="auto")
    parser.add_argument("--table", default=None)
    return parser.parse_args(argv)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the folder the package sits in: a clone's root when the import path names it (PYTHONPATH),
#: with whatever an operator put there (a state folder, a key): listed, never read
_PACKAGE_PARENT = os.path.dirname(_PACKAGE)


def readable_folders() -> list[str]:
    """What the screen process reads after it started: the package (its pages and words),
    Python's folders and its import path (a late import) and the catalogues' folders; not the
    folder the package sits in (``listable_folders``)."""
    folders = {_PACKAGE, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
               *(entry for entry in sys.path if entry and os.path.isdir(entry)),
               *(str(folder) for folder in search_path())}
    return sorted(folder for folder in folders
                  if os.path.abspath(folder) != _PACKAGE_PARENT)


def listable_folders() -> list[str]:
    """Folders on the import path whose names a late import lists but whose files it does
    not read: the package's own parent, when the import path names it."""
    entries = {os.path.abspath(entry) for entry in sys.path if entry and os.path.isdir(entry)}
    return [_PACKAGE_PARENT] if _PACKAGE_PARENT in entries else []


def shut_itself_in() -> None:
    """The sandbox (sandbox.py), said in the log; a kernel without one is said too, and the
    screens go on without it."""
    try:
        sandbox = shut_in(readable_folders(), listable_folders())
    except SandboxUnavailable as exc:
        log.warning("screens: not sandboxed; this process can read what the table's user can "
                    "(docs/install.md, \"The screen process's sandbox\")", reason=exc.strerror)
        return
    except OSError as exc:
        log.warning("screens: the kernel refused the sandbox; this process can read what the "
                    "table's user can", reason=exc.strerror)
        return
    log.info("screens: sandboxed", **sandbox.describe())


def main(argv: list[str] | None = None) -> int:
    die_with_the_daemon()
    drop_inherited_descriptors()
    lower_priority()  # before any thread: every thread started later inherits it
    args = parse_args(sys.argv[1:] if argv is None else argv)
    setup_logging(args.log_level, args.log_format, table=args.table)
    shut_itself_in()  # before a byte of the feed or a connection
    fields = json.loads(args.settings)
    settings = DisplaySettings(host=fields["host"], port=int(fields["port"]),
                               max_clients=int(fields["max_clients"]),
                               allowed_hosts=tuple(fields["allowed_hosts"]),
                               language=str(fields["language"]),
                               studio=StudioSettings.from_json(fields.get("studio") or {}))
    state = FeedState()
    display = DisplayServer(settings, state.snapshot, rate=args.rate, backends=state.backends,
                            listening=socket.socket(fileno=LISTEN_FD), live=state.live,
                            settle_s=SETTLE_S)
    display.feed.language = settings.language
    feed = iter(sys.stdin.buffer)
    # the shoe and the status first (the daemon sends them before anything else): the pages
    # that waited in the socket's backlog while this process started are shown the table,
    # not a blank "starting" screen with an empty roadmap
    follow(feed, display, state, until=state.has_status)
    display.start()
    try:
        follow(feed, display, state)
    finally:
        display.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
