"""The daemon's side of the screens: start the screen process, feed it, restart it.

The dealer display, the scoreboard and their event streams run in a process of their own
(``child.py``), so what the people's screens cost is never taken from the card: that process
has its own interpreter, runs at nice ``child.NICE`` at the lowest best-effort I/O priority,
and is started at the normal scheduling policy even after the daemon raised itself to real
time (realtime.py).

The feed is one-way and never waits:

* the owner thread only *offers* (``offer_events``; ``status_changed``, the status board's
  change callback): an append to a deque and an ``Event.set()``;
* one thread here (``screen-link``) filters what may cross (``wire.SealedFilter``), encodes it
  and writes it to the screen process's stdin, a pipe in non-blocking mode. Whatever the pipe
  does not take waits in a bounded buffer; when more than ``MAX_PENDING_BYTES`` wait (the
  process is slow or stopped) the buffer is dropped (a message half written is finished
  first) and the process is sent the shoe again from the journal (``reset``) once it reads
  again. The status is sent as it is when it is sent: never a queue of old ones.

The listening socket is the daemon's (bound before READY, so a port in use is said at once):
each screen process serves it, so a restarted one has the same address and a page that
reconnects meanwhile waits in the socket's backlog. A process that ends is started again
after ``RESTART_FIRST_S``, doubling to ``RESTART_MAX_S`` while it keeps ending; one that leaves
its feed unread for ``STUCK_S`` (stopped, hung) is killed and started again.
"""

from __future__ import annotations

import array
import dataclasses
import errno
import fcntl
import json
import os
import select
import shutil
import signal
import socket
import termios
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import structlog

from controller.display.catalogues import ENV as LOCALES_ENV
from controller.display.server import listening_socket
from controller.display.settings import DisplaySettings
from controller.python_child import python_module
from controller.service.clock.table_clock import TableClock
from controller.service.config.settings import LoggingConfig
from controller.service.screens.output_relay import OutputRelay
from controller.service.screens.wire import KEEPALIVE_S, SealedFilter, message
from controller.service.status_board import MOMENT_FIELDS, StatusBoard

log = structlog.get_logger("pokdeng.screens")

CHILD_MODULE = "controller.service.screens.child"
IONICE = shutil.which("ionice")

SETTLE_S = 0.02             # after a change, before it is sent: the card reaches the backends
BACKENDS_POLL_S = 2.0       # how often the backends' backlog is read
WRITE_WAIT_S = 0.1          # how long one look at a full pipe waits for room
MAX_PENDING_BYTES = 1 << 20  # the feed's buffer beyond the pipe's own; beyond: a catch-up
MAX_PENDING_BATCHES = 1000  # event batches offered and not yet taken; beyond: a catch-up
STUCK_S = 30.0              # a process that leaves its feed unread this long is restarted
RESTART_FIRST_S = 0.5       # a process that ended is started again after this, doubling...
RESTART_MAX_S = 30.0        # ...up to this while it keeps ending
HEALTHY_AFTER_S = 60.0      # a process that lived this long starts the doubling afresh
STOP_WAIT_S = 2.0           # how long a stop waits for the process to end by itself
SOCKET_CHECK_S = 1.0        # how often the display's socket is checked while a process runs
FEED_BROKE_GRACE_S = 0.5    # a process that broke its feed has this long to say how it ended

SO_LOCK_FILTER, SO_DETACH_FILTER = 44, 27  # linux/asm-generic/socket.h (not in Python's socket)

#: the shoe so far, from the journal (``display_link.shoe_history``)
History = Callable[[], list[dict[str, Any]]]
#: each transport's backlog and state (``display_link.backend_backlog``)
Backends = Callable[[], dict[str, Any]]


#: what of the daemon's environment the screen process is given: what Python, the locale and
#: the log need. Not the service manager's handles (NOTIFY_SOCKET: it is not the daemon), nor
#: where the credentials and the journal are (CREDENTIALS_DIRECTORY, STATE_DIRECTORY): it
#: answers the network and needs none of them.
KEPT_ENVIRONMENT = ("PATH", "TZ", "LANG", "LANGUAGE", "JOURNAL_STREAM", "VIRTUAL_ENV",
                    LOCALES_ENV)  # the catalogues the daemon checked the config's language in
KEPT_ENVIRONMENT_PREFIXES = ("LC_", "PYTHON", "COVERAGE_")


def screen_environment(environ: dict[str, str]) -> dict[str, str]:
    """The screen process's environment, from the daemon's ``environ``."""
    return {name: value for name, value in environ.items()
            if name in KEPT_ENVIRONMENT or name.startswith(KEPT_ENVIRONMENT_PREFIXES)}


class ScreenStartError(Exception):
    """The display cannot listen where the config says; the message names the address."""


def pipe_unread(fd: int) -> int:
    """Bytes written to the pipe of ``fd`` (either end) that its reader has not read yet."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return int(count[0])


class ScreenChild:
    """One running screen process: its pid and the write end of its feed."""

    def __init__(self, pid: int, feed_fd: int):
        self.pid = pid
        self.feed_fd = feed_fd
        self.started = time.monotonic()
        self.written = 0            # bytes of feed the pipe took
        self.taken = 0              # of those, the bytes the process read
        self.last_progress = self.started
        self.returncode: int | None = None

    def stalled(self, now: float) -> bool:
        """Whether it left its feed unread for ``STUCK_S``. Judged by what it read, not by
        what the pipe took: on a quiet table a stopped process's pipe has room for an hour
        of keep-alives, and its pages would hang all that while."""
        unread = pipe_unread(self.feed_fd)
        taken = self.written - unread
        if unread == 0 or taken > self.taken:
            self.taken, self.last_progress = taken, now
        return now - self.last_progress > STUCK_S

    def poll(self) -> int | None:
        """Its exit status once it ended (reaped here), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def close_feed(self) -> None:
        if self.feed_fd >= 0:
            os.close(self.feed_fd)
            self.feed_fd = -1

    def end(self, wait_s: float) -> None:
        """Close its feed (it ends by itself), wait ``wait_s``, then kill it."""
        self.close_feed()
        deadline = time.monotonic() + wait_s
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if self.poll() is None:
            self.kill()
            while self.poll() is None and time.monotonic() < deadline + 2.0:
                time.sleep(0.02)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _why_the_feed_broke(child: ScreenChild) -> str:
    """A screen process that closed its feed is most often ending: its exit status, if it comes
    within a moment, tells the operator more than the broken pipe (this waits on the link's
    thread, never on the table's)."""
    deadline = time.monotonic() + FEED_BROKE_GRACE_S
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    status = child.poll()
    return "its feed broke" if status is None else f"it ended with status {status}"


class ScreenLink:
    """The screens of one daemon; ``start()`` then ``close()``."""

    def __init__(self, settings: DisplaySettings, board: StatusBoard, clock: TableClock,
                 history: History, backends: Backends | None, log_config: LoggingConfig,
                 table: str, wrapper: list[str] | None = None):
        self.settings = settings
        self._board = board
        self._clock = clock
        self._history = history
        self._backends_source = backends
        self._logging = log_config
        self._table = table
        #: a command the screen process is started through (a test's recorder of its feed)
        self._wrapper = list(wrapper or [])
        self._listening: socket.socket | None = None
        self._port: int | None = None
        self._socket_checked_at = 0.0
        self._filter = SealedFilter()
        self._inbox: deque[list[dict[str, Any]]] = deque()
        self._catch_up = True
        self._overflowed = False  # the owner found the inbox full: a catch-up instead
        self._status_dirty = True
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._output = OutputRelay()
        self._child: ScreenChild | None = None
        self._pending: deque[bytes] = deque()   # encoded messages the pipe has not taken
        self._pending_bytes = 0
        self._written = 0                       # of the first pending message
        self._backends: dict[str, Any] | None = None
        self._last_backends_poll = 0.0
        self._last_queued = 0.0
        self._restart_delay = RESTART_FIRST_S
        self._restart_at = 0.0
        #: figures for the log and the tests: processes started, catch-ups sent, times the
        #: feed's buffer was dropped for a catch-up
        self.starts = 0
        self.catch_ups = 0
        self.drops = 0

    # -- the owner thread's side: never waits -------------------------------------------------
    def offer_events(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        if len(self._inbox) >= MAX_PENDING_BATCHES:
            self._overflowed = True  # far behind: the journal holds them all
        else:
            self._inbox.append(events)
        self._wake.set()

    def status_changed(self) -> None:
        self._status_dirty = True
        self._wake.set()

    # -- where the pages are ------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._port is not None, "the link has not listened yet"
        return self._port

    @property
    def url(self) -> str:
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/"

    @property
    def pid(self) -> int | None:
        """The screen process's pid while one runs."""
        child = self._child
        return child.pid if child is not None and child.returncode is None else None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        """Listen (ScreenStartError naming the address when it cannot), then start the
        screen process and its feed on the link's thread."""
        try:
            self._listening = listening_socket(self.settings)
        except OSError as exc:
            raise ScreenStartError(f"display.listen {self.settings.listen}: cannot listen: "
                                   f"{exc.strerror or exc}") from None
        self._port = int(self._listening.getsockname()[1])  # kept when it listens again
        self._output.start()
        self._thread = threading.Thread(target=self._run, name="screen-link", daemon=True)
        self._thread.start()
        log.info("display ready", url=self.url, max_clients=self.settings.max_clients)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S + 3.0)
        self._output.close(3.0)  # the last words of the screen process, if it is gone
        if self._listening is not None:
            self._listening.close()

    # -- the link's thread --------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._closed.is_set():
                try:
                    self._step()
                except Exception:  # the screens must never take the daemon down
                    log.exception("screens: the feed failed; starting afresh")
                    self._drop_child("the feed failed")
                    self._closed.wait(1.0)
        finally:
            if self._child is not None:
                self._child.end(STOP_WAIT_S)

    def _step(self) -> None:
        if self._pending:
            self._wait_writable()
        elif self._wake.wait(self._idle_wait()):
            self._closed.wait(SETTLE_S)
        self._wake.clear()
        if self._closed.is_set():
            return
        child = self._current_child()
        if child is None:
            return
        self._compose()
        self._write(child)

    def _idle_wait(self) -> float:
        wait = BACKENDS_POLL_S
        if self._child is None:
            wait = min(wait, max(0.0, self._restart_at - time.monotonic()))
        return max(wait, 0.01) if self._child is None else min(wait, KEEPALIVE_S / 2)

    def _current_child(self) -> ScreenChild | None:
        """The running screen process: a dead one is noticed, a stuck one killed, a new
        one started when its time came."""
        child = self._child
        now = time.monotonic()
        if child is not None and child.poll() is None and child.stalled(now):
            log.warning("screens: the screen process took nothing for a while; restarting it",
                        pid=child.pid, seconds=STUCK_S)
            child.kill()
            child.end(STOP_WAIT_S)
        if child is not None and child.poll() is not None:
            self._drop_child(f"it ended with status {child.returncode}")
            return None
        if child is not None and now - self._socket_checked_at >= SOCKET_CHECK_S:
            self._socket_checked_at = now
            why = self._socket_spoiled()
            if why is not None:  # it serves nothing more, and would go on reading its feed
                log.warning("screens: the display's socket was spoiled; restarting the screen "
                            "process", pid=child.pid, why=why)
                self._drop_child(f"the display's socket: {why}")
                return None
        if child is None and now >= self._restart_at:
            return self._spawn()
        return child

    def _drop_child(self, why: str) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.poll() is None:
            child.end(0.0)
        child.close_feed()
        lived = time.monotonic() - child.started
        if lived >= HEALTHY_AFTER_S:
            self._restart_delay = RESTART_FIRST_S
        self._restart_at = time.monotonic() + self._restart_delay
        log.warning("screens: the screen process is gone; starting it again",
                    pid=child.pid, why=why, lived_s=round(lived, 1),
                    restart_in_s=self._restart_delay)
        self._restart_delay = min(self._restart_delay * 2, RESTART_MAX_S)
        self._clear_pending()

    def command(self) -> list[str]:
        """The screen process's command line (nothing secret: no key, no card)."""
        fields = {"host": self.settings.host, "port": self.settings.port,
                  "max_clients": self.settings.max_clients,
                  "allowed_hosts": list(self.settings.allowed_hosts),
                  "language": self.settings.language,
                  "studio": self.settings.studio.to_json()}
        child = python_module(CHILD_MODULE, "--settings", json.dumps(fields),
                              "--rate", repr(self._clock.real_seconds(1.0)),
                              "--log-level", self._logging.level,
                              "--log-format", self._logging.format, "--table", self._table)
        # best-effort at its lowest level, not the idle class: behind the table's reads and
        # writes, yet never starved while the disk is busy for long (a journal archive), when
        # a page that waited on the idle class would show a frozen table
        lowered = [IONICE, "-c", "2", "-n", "7", *child] if IONICE else child
        return [*self._wrapper, *lowered]

    def _socket_spoiled(self) -> str | None:
        """What a screen process did to the display's socket that stops it taking pages, or
        None. Each one holds the daemon's own socket: a ``shutdown()`` there, or a packet
        filter locked on it (the system call filter refuses that to a sandboxed one), would
        refuse every page for every later process. A filter not locked is taken off here."""
        sock = self._listening
        if sock is None:
            return "it is closed"
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            return "it was shut down"
        if sock.getsockopt(socket.SOL_SOCKET, SO_LOCK_FILTER):
            return "a packet filter was locked on it"
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # ENOENT: no filter, as it should be
                return f"its packet filter cannot be taken off ({exc.strerror})"
        else:
            log.warning("screens: a packet filter had been put on the display's socket; "
                        "taken off", port=self.port)
        return None

    def _listening_again(self) -> bool:
        """The display's socket, listening afresh at the same address if a screen process
        spoiled it (``_socket_spoiled``). Called with no screen process running, so no one
        else holds the spoiled socket. False when the address cannot be had back (tried again
        at the next start)."""
        why = self._socket_spoiled()
        if why is None:
            return True
        if self._listening is not None:
            self._listening.close()  # first: a socket that still listens holds its address
            self._listening = None
        try:
            self._listening = listening_socket(dataclasses.replace(self.settings,
                                                                   port=self.port))
        except OSError as exc:
            log.error("screens: the display's socket was spoiled and cannot listen again",
                      port=self.port, why=why, error=exc.strerror)
            return False
        log.warning("screens: the display's socket was spoiled by a screen process; it "
                    "listens again", port=self.port, why=why)
        return True

    def _spawn(self) -> ScreenChild | None:
        if not self._listening_again():
            self._restart_at = time.monotonic() + self._restart_delay
            self._restart_delay = min(self._restart_delay * 2, RESTART_MAX_S)
            return None
        assert self._listening is not None
        read_end, write_end = os.pipe()
        argv = self.command()
        # its output is read and logged again as its own (output_relay.py), never written
        # into the daemon's log stream as it is: it answers the network
        output_read, output_write = os.pipe()
        logs = [(os.POSIX_SPAWN_DUP2, output_write, 1), (os.POSIX_SPAWN_DUP2, output_write, 2)]
        try:
            # SCHED_OTHER from the start: this thread may be real-time (realtime.py), and a
            # process it starts would otherwise inherit that
            pid = os.posix_spawn(
                shutil.which(argv[0]) or argv[0], argv, screen_environment(dict(os.environ)),
                file_actions=[(os.POSIX_SPAWN_DUP2, read_end, 0),
                              (os.POSIX_SPAWN_DUP2, self._listening.fileno(), 3), *logs],
                scheduler=(os.SCHED_OTHER, os.sched_param(0)),
                # a group of its own: a terminal's Ctrl-C is for the table, which ends the
                # screens itself by closing their feed
                setpgroup=0)
        except OSError as exc:
            for fd in (read_end, write_end, output_read, output_write):
                os.close(fd)
            self._restart_at = time.monotonic() + self._restart_delay
            log.error("screens: cannot start the screen process", error=str(exc),
                      retry_in_s=self._restart_delay)
            self._restart_delay = min(self._restart_delay * 2, RESTART_MAX_S)
            return None
        os.close(read_end)
        os.close(output_write)
        self._output.follow(output_read, pid)
        os.set_blocking(write_end, False)
        self._child = ScreenChild(pid, write_end)
        self.starts += 1
        self._catch_up = True  # a new process is sent the shoe first
        self._status_dirty = True
        self._backends = None
        log.info("screens: screen process started", pid=pid)
        return self._child

    # -- what is sent -------------------------------------------------------------------------
    def _compose(self) -> None:
        """Turn what was offered into messages; over the bound, drop them for a catch-up."""
        if self._overflowed or self._pending_bytes > MAX_PENDING_BYTES:
            self._drop_for_catch_up()
        if self._catch_up and self._pending:
            return  # the catch-up waits until the process took what it had begun to read
        if self._catch_up:
            self._send_catch_up()
        batches = []
        while self._inbox:
            batches.append(self._inbox.popleft())
        events = self._filter.events(event for batch in batches for event in batch)
        if events:
            self._queue(message("events", events=events))
        if self._status_dirty:
            self._status_dirty = False
            self._queue(self._status_message())
        now = time.monotonic()
        if self._backends_source is not None and now - self._last_backends_poll \
                >= BACKENDS_POLL_S:
            self._last_backends_poll = now
            backends = self._read_backends()
            if backends != self._backends:
                self._backends = backends
                self._queue(message("backends", backends=backends))
        if not self._pending and now - self._last_queued >= KEEPALIVE_S:
            self._queue(message("alive"))

    def _drop_for_catch_up(self) -> None:
        """The screen process is far behind: drop what waits for it (but the rest of a
        message it has begun to read) and send it the shoe from the journal instead."""
        if not self._catch_up:
            log.warning("screens: the screen process is behind; it will catch up from the "
                        "journal", pid=self.pid, waiting_bytes=self._pending_bytes,
                        waiting_batches=len(self._inbox))
        self.drops += 1
        self._catch_up = True
        self._overflowed = False
        self._inbox.clear()
        self._clear_pending(keep_started=True)

    def _send_catch_up(self) -> None:
        """The shoe so far from the journal (events offered meanwhile are in it, or come
        after it: the screen skips what it has by seq), the status, the backends."""
        self._catch_up = False
        self._overflowed = False
        self._inbox.clear()
        self._filter = SealedFilter()
        try:
            history = self._filter.events(self._history())
        except Exception as exc:  # a screen without history still shows the table
            log.warning("screens: cannot read the shoe's events; the roadmap starts empty",
                        error=str(exc))
            history = []
        self.catch_ups += 1
        self._queue(message("reset", events=history))
        self._status_dirty = True
        self._backends = None
        self._last_backends_poll = 0.0

    def _status_message(self) -> bytes:
        _, snapshot = self._board.versioned_snapshot()
        status = {k: v for k, v in SealedFilter.status(snapshot).items()
                  if k not in MOMENT_FIELDS}
        return message("status", status=status, now=snapshot["now"], mono=time.monotonic(),
                       speed=self._clock.speed)

    def _read_backends(self) -> dict[str, Any]:
        assert self._backends_source is not None
        try:
            return dict(self._backends_source())
        except Exception as exc:
            return {"backend": {"error": str(exc)}}

    def _queue(self, data: bytes) -> None:
        self._pending.append(data)
        self._pending_bytes += len(data)
        self._last_queued = time.monotonic()


    def _clear_pending(self, keep_started: bool = False) -> None:
        """Drop what waits; ``keep_started``: the message the pipe took part of stays."""
        head = self._pending[0] if keep_started and self._pending and self._written else None
        self._pending.clear()
        self._pending_bytes = 0
        if head is not None:
            self._queue(head)
        else:
            self._written = 0

    # -- the pipe -----------------------------------------------------------------------------
    def _write(self, child: ScreenChild) -> None:
        """As much of what waits as the pipe takes now, never waiting."""
        while self._pending:
            head = self._pending[0]
            try:
                n = os.write(child.feed_fd, memoryview(head)[self._written:])
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.EBADF):
                    self._drop_child(_why_the_feed_broke(child))
                    return
                raise
            child.written += n
            self._written += n
            if self._written == len(head):
                self._pending.popleft()
                self._pending_bytes -= len(head)
                self._written = 0

    def _wait_writable(self) -> None:
        """A short wait for room in the pipe (the owner thread is never the one waiting)."""
        child = self._child
        if child is None or child.feed_fd < 0:
            self._closed.wait(WRITE_WAIT_S)
            return
        select.select([], [child.feed_fd], [], WRITE_WAIT_S)
