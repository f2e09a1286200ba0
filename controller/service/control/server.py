"""The control socket's server: one I/O thread, a bounded number of clients, nothing blocks it.

Anyone who can open the socket can open many connections, so nothing a client does may cost
the daemon more than a slot:

* at most ``max_clients`` connections at a time; the last ``ACTING_RESERVE`` slots are only for
  callers who may act, and when even those are taken an acting caller displaces the oldest
  reading-only connection, so a supervisor gets through while readers fill the socket;
* a connection idle too long, a request not complete in time, or a client that takes none of
  our output for a while is closed (``Deadlines``);
* requests are bounded in size, nesting and number length (controller/service/control/protocol.py);
* all connections are served by one selector thread: a supervisor action is posted to the
  table's owner and answered from its Future's done-callback through a wake-up pipe, never by
  waiting; ``watch`` subscribers are pushed the status when it changes, and a heartbeat;
* the status is encoded once per change whoever asks (the handler's lines share it:
  status_board.py), so many watchers and ``status`` callers cost one encoding a change;
* ``accept`` failing for want of file descriptors never spins: a spare descriptor is given up
  to accept and shed the waiting connection (or let a supervisor in by displacing a reader),
  otherwise accepting backs off; either way the log gets one line per interval with a count.
"""

from __future__ import annotations

import errno
import functools
import itertools
import json
import logging
import os
import selectors
import socket
import stat
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog

from controller.rate_limited_log import RateLimitedLog
from controller.service.control.access import AccessPolicy, Peer, group_id, missing_group
from controller.service.control.client import ControlConfigError, ControlError
from controller.service.control.protocol import (
    MAX_REQUEST,
    RequestError,
    parse_request,
    requested_action,
    supervisor_request,
)
from controller.table.inputs import Actor

log = structlog.get_logger("pokdeng.control")

LISTEN_BACKLOG = 1024
ACTING_RESERVE = 2          # slots that only callers who may act can take
ACCEPT_BATCH = 64           # connections taken per wake-up before the others are served
ACCEPT_BACKOFF_S = (0.05, 1.0)
PROBLEM_LOG_INTERVAL_S = 10.0
HOUSEKEEPING_S = 1.0
RECV_SIZE = 4096
# accept() failing for the caller's sake is over with that caller; anything else is the
# system's state, and trying again at once would spin.
_CALLER_GONE = {errno.ECONNABORTED, errno.EPROTO, errno.EINTR}
_OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE}
_LISTENER = object()
_WAKE = object()
BUSY_ERROR = "the control socket is busy; try again"


@dataclass(frozen=True)
class Deadlines:
    """How long a connection may take over each step, in seconds."""

    idle: float = 10.0         # no request at all: closed
    request: float = 5.0       # a request, once begun, must reach its newline
    answer: float = 10.0       # the table loop's answer to a supervisor action
    write_stall: float = 10.0  # a client that takes none of our output: dropped


class ControlHandler(Protocol):
    """What the daemon offers the control socket (all thread-safe, none blocking for long)."""

    def control_status_line(self) -> bytes:
        """The ``status`` answer, encoded (a JSON line)."""

    def control_watch_line(self) -> tuple[int, bytes]:
        """The status version and its ``watch`` line: the same bytes for every watcher."""

    def control_supervisor(self, action: str, card: str | None,
                           by: Actor) -> Future[dict[str, Any]]: ...

    def control_watch_interval(self) -> float: ...

    def subscribe_changes(self, callback: Callable[[], None]) -> None: ...


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode() + b"\n"


def _send_and_close(conn: socket.socket, message: dict[str, Any]) -> None:
    """Best effort, never blocking. What the caller already sent is read first: closing on
    unread data would reset the connection and lose the message."""
    try:
        conn.recv(RECV_SIZE)
    except OSError:
        pass
    try:
        conn.send(_line(message))
    except OSError:
        pass
    conn.close()


def _open_spare() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


class _Client:
    """One connection: its caller, buffers and deadlines. Touched by the I/O thread only."""

    def __init__(self, conn: socket.socket, peer: Peer, deadlines: Deadlines, now: float):
        self.conn = conn
        self.deadlines = deadlines
        self.fd = conn.fileno()
        self.peer = peer
        self.opened = now
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.mask = 0                # selector interest; 0 = not registered
        self.watching = False
        self.eof = False             # the client sent all it will send
        self.closing = False         # close once the output is out
        self.closed = False
        self.waiting = 0             # token of the supervisor action awaited, 0 when none
        self.answer_due = 0.0
        self.read_due = now + deadlines.idle
        self.write_due = 0.0
        self.sent_version = -1
        self.push_due = 0.0

    def send(self, data: bytes, now: float) -> None:
        if not self.outbuf:
            self.write_due = now + self.deadlines.write_stall
        self.outbuf += data

    def next_due(self) -> float:
        due = [self.write_due] if self.outbuf else []
        if self.waiting:
            due.append(self.answer_due)
        elif self.watching:
            if not self.outbuf:  # the next push waits for the last one to be taken
                due.append(self.push_due)
        else:
            due.append(self.read_due)
        return min(due, default=float("inf"))


class ControlServer:
    """Serves the control socket on one I/O thread; ``close()`` is idempotent."""

    def __init__(self, path: str, handler: ControlHandler, *, supervisor_group: str,
                 group: str | None = None, mode: int = 0o660, max_clients: int = 16,
                 deadlines: Deadlines = Deadlines()):
        if max_clients <= ACTING_RESERVE:
            raise ValueError(f"max_clients must be more than {ACTING_RESERVE}")
        self.path = path
        self.handler = handler
        self.group = group
        self.mode = mode
        self.supervisor_group = supervisor_group
        self.max_clients = max_clients
        self.deadlines = deadlines
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._clients: dict[int, _Client] = {}
        self._answers: deque[tuple[_Client, int, Future[dict[str, Any]]]] = deque()
        self._tokens = itertools.count(1)
        self._status_dirty = threading.Event()
        self._watched = False  # some client watches: a status change wakes the I/O thread
        self._version, self._snapshot_line = -1, b""
        self._accept_backoff = ACCEPT_BACKOFF_S[0]
        self._accept_paused_until: float | None = None
        # Anything a flood of connections can cause is logged at most once per interval.
        self._problems = RateLimitedLog(logging.getLogger("pokdeng.control"),
                                        PROBLEM_LOG_INTERVAL_S)

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        gid = self._group_id("control.group", self.group) if self.group is not None else None
        self._access = AccessPolicy(self._group_id("control.supervisor_group",
                                                   self.supervisor_group))
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._remove_stale_socket()
        listener = socket.socket(socket.AF_UNIX,
                                 socket.SOCK_STREAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        try:
            listener.bind(self.path)
            # A fresh socket is at most 0755 (umask), which nobody but us can connect to, so
            # tightening/opening it after bind leaves no window for others.
            if gid is not None:
                os.chown(self.path, -1, gid)
            os.chmod(self.path, self.mode)
            listener.listen(LISTEN_BACKLOG)
        except OSError as exc:
            listener.close()
            raise ControlError(f"cannot serve the control socket {self.path}: {exc}") from None
        self._listener = listener
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._spare = _open_spare()
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ, _LISTENER)
        self._selector.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        self.handler.subscribe_changes(self._status_changed)
        self._thread = threading.Thread(target=self._run, name="control-io", daemon=True)
        self._thread.start()
        log.info("control socket ready", path=self.path, group=self.group, mode=oct(self.mode),
                 supervisor_group=self.supervisor_group, max_clients=self.max_clients)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        if self._thread is not None:
            self._wake()
            self._thread.join(2.0)
        try:
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        except OSError:
            pass

    def _group_id(self, key: str, name: str) -> int:
        gid = group_id(name)
        if gid is None:
            raise ControlConfigError(missing_group(key, name))
        return gid

    def _remove_stale_socket(self) -> None:
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise ControlError(f"{self.path} exists and is not a socket; refusing to replace it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(0.5)
        try:
            probe.connect(self.path)
        except OSError:
            os.unlink(self.path)  # left behind by a daemon that died: nobody is listening
            return
        finally:
            probe.close()
        raise ControlError(f"another daemon is already serving {self.path}")

    # -- other threads ------------------------------------------------------------------------
    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass  # a byte is already waiting (the loop will wake), or we are closed

    def _status_changed(self) -> None:
        self._status_dirty.set()
        if self._watched:  # else nothing to push: no wake-up on the owner's way to its queue
            self._wake()

    def _answered(self, client: _Client, token: int, future: Future[dict[str, Any]]) -> None:
        self._answers.append((client, token, future))
        self._wake()

    # -- the I/O thread -----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._closed.is_set():
                ready = self._selector.select(self._seconds_to_next_due())
                now = time.monotonic()
                for key, mask in ready:
                    if key.data is _LISTENER:
                        self._accept(now)
                    elif key.data is _WAKE:
                        self._drain_wake()
                    else:
                        self._serve_ready(key.data, mask, now)
                self._deliver_answers(now)
                self._push_to_watchers(now)
                self._watched = any(c.watching and not c.closed for c in self._clients.values())
                self._enforce_deadlines(now)
                self._resume_accepting(now)
        except Exception:
            log.exception("the control socket stopped serving")
        finally:
            self._teardown()

    def _seconds_to_next_due(self) -> float:
        due = [client.next_due() for client in self._clients.values()]
        if self._accept_paused_until is not None:
            due.append(self._accept_paused_until)
        return max(0.0, min(min(due, default=float("inf")) - time.monotonic(), HOUSEKEEPING_S))

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _teardown(self) -> None:
        for client in list(self._clients.values()):
            self._close(client)
        self._selector.close()
        for closable in (self._listener, self._wake_r, self._wake_w):
            closable.close()
        if self._spare is not None:
            os.close(self._spare)
            self._spare = None

    # -- accepting ----------------------------------------------------------------------------
    def _accept(self, now: float) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _CALLER_GONE:
                    continue
                self._problems.warning(f"accept {exc.errno}", "control socket: cannot accept "
                                       "connections: %s", exc.strerror or exc)
                if exc.errno in _OUT_OF_DESCRIPTORS and self._shed_with_spare(now):
                    continue
                if exc.errno in _OUT_OF_DESCRIPTORS and self._reclaim_spare():
                    continue
                self._pause_accepting(now)
                return
            self._accept_backoff = ACCEPT_BACKOFF_S[0]
            self._admit(conn, now, must_free=False)

    def _shed_with_spare(self, now: float) -> bool:
        """Out of descriptors: give up the spare to take the waiting connection. It is let in
        only if it may act and a reader makes room; otherwise it is told we are busy."""
        if self._spare is None:
            return False
        os.close(self._spare)
        self._spare = None
        try:
            conn, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            conn = None
        except OSError:
            self._spare = _open_spare()
            return False
        if conn is not None:
            self._admit(conn, now, must_free=True)
        self._spare = _open_spare()
        return True

    def _reclaim_spare(self) -> bool:
        """Another thread took the spare's descriptor: close one of our own connections (one
        closing anyway, else the oldest reader) and keep its descriptor as the spare."""
        victims = [c for c in self._clients.values() if c.closing] or \
            [c for c in self._clients.values() if not c.peer.may_act]
        if self._spare is not None or not victims:
            return False
        victim = min(victims, key=lambda c: c.opened)
        self._close(victim, None if victim.closing else
                    {"ok": False, "busy": True, "error": "closed: the daemon is short of files"})
        self._spare = _open_spare()
        return self._spare is not None

    def _pause_accepting(self, now: float) -> None:
        if self._accept_paused_until is None:
            self._selector.unregister(self._listener)
        self._accept_paused_until = now + self._accept_backoff
        self._accept_backoff = min(self._accept_backoff * 2, ACCEPT_BACKOFF_S[1])

    def _resume_accepting(self, now: float) -> None:
        if self._accept_paused_until is None or now < self._accept_paused_until:
            return
        self._accept_paused_until = None
        if self._spare is None:
            self._spare = _open_spare()
        self._selector.register(self._listener, selectors.EVENT_READ, _LISTENER)

    def _admit(self, conn: socket.socket, now: float, *, must_free: bool) -> None:
        conn.setblocking(False)
        try:
            peer = self._access.peer(conn)
        except OSError:
            conn.close()
            return
        if not self._make_room(peer, must_free):
            self._problems.warning(
                "busy", "control socket busy: turned away %s (%d connections open)",
                peer.describe(), len(self._clients))
            _send_and_close(conn, {"ok": False, "busy": True, "error": BUSY_ERROR})
            return
        client = _Client(conn, peer, self.deadlines, now)
        self._clients[client.fd] = client
        self._update(client, now)

    def _make_room(self, peer: Peer, must_free: bool) -> bool:
        """Whether ``peer`` gets a slot (``must_free``: only by closing another connection)."""
        open_now = len(self._clients)
        if not peer.may_act:
            return not must_free and open_now < self.max_clients - ACTING_RESERVE
        if not must_free and open_now < self.max_clients:
            return True
        readers = [c for c in self._clients.values() if not c.peer.may_act]
        if not readers:
            return False
        oldest = min(readers, key=lambda c: c.opened)
        self._problems.warning(
            "displaced", "control socket full: closed the oldest reading connection (%s) for "
                         "%s", oldest.peer.describe(), peer.describe())
        self._close(oldest, {"ok": False, "busy": True,
                             "error": "closed: a supervisor needed the connection"})
        return True

    # -- serving ------------------------------------------------------------------------------
    def _serve_ready(self, client: _Client, mask: int, now: float) -> None:
        try:
            if mask & selectors.EVENT_READ:
                self._read(client, now)
            if not client.closed:
                self._serve_requests(client, now)
                self._update(client, now)
        except Exception as exc:  # one client's trouble must not stop the others being served
            log.error("control connection failed; closing it", user=client.peer.user,
                      error_type=type(exc).__name__)
            log.debug("control connection failure", exc_info=exc)
            self._close(client)

    def _read(self, client: _Client, now: float) -> None:
        try:
            data = client.conn.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(client)
            return
        if not data:
            client.eof = True
            if client.watching:
                self._close(client)
            return
        if client.watching or client.closing:
            return  # nothing more will be answered: what it sends is read and dropped
        if not client.inbuf:
            client.read_due = min(client.read_due, now + self.deadlines.request)
        client.inbuf += data

    def _serve_requests(self, client: _Client, now: float) -> None:
        """Answer the complete requests waiting, one at a time, in order."""
        while not (client.waiting or client.watching or client.closing):
            end = client.inbuf.find(b"\n")
            if end < 0 and len(client.inbuf) > MAX_REQUEST:
                self._refuse(client, f"request longer than {MAX_REQUEST} bytes", now)
                return
            if end < 0 and not client.eof:
                return
            if end < 0:  # the client is done sending: what is left is its last request
                end = len(client.inbuf)
                if not client.inbuf.strip():
                    client.closing = True
                    return
            line = bytes(client.inbuf[:end])
            del client.inbuf[:end + 1]
            if line.strip():
                self._answer(client, line, now)

    def _answer(self, client: _Client, line: bytes, now: float) -> None:
        try:
            request = parse_request(line)
            if request["cmd"] == "status":
                self._reply_line(client, self.handler.control_status_line(), now)
            elif request["cmd"] == "watch":
                client.watching = True
                client.inbuf.clear()
            else:
                self._act(client, request, now)
        except RequestError as exc:
            self._reply(client, {"ok": False, "error": str(exc)}, now)

    def _act(self, client: _Client, request: dict[str, Any], now: float) -> None:
        peer = client.peer
        if not peer.may_act:
            self._problems.warning(
                f"refused {peer.uid}", "supervisor action %s refused: %s (pid %d) is not in "
                "group %s", requested_action(request) or "?", peer.describe(), peer.pid,
                self.supervisor_group)
            self._reply(client, {"ok": False, "error": (
                f"{peer.describe()} may not take supervisor actions: that needs membership "
                f"of group {self.supervisor_group} (status and watch are open to you)")}, now)
            return
        action, card = supervisor_request(request)
        future = self.handler.control_supervisor(action, card, peer.actor)
        client.waiting = next(self._tokens)
        client.answer_due = now + self.deadlines.answer
        future.add_done_callback(functools.partial(self._answered, client, client.waiting))

    def _reply(self, client: _Client, message: dict[str, Any], now: float) -> None:
        self._reply_line(client, _line(message), now)

    def _reply_line(self, client: _Client, line: bytes, now: float) -> None:
        client.send(line, now)
        client.read_due = now + (self.deadlines.request if client.inbuf else self.deadlines.idle)

    def _refuse(self, client: _Client, error: str, now: float) -> None:
        """Answer with an error and close once it is out and the client stopped sending (or a
        moment later): closing on unread input would reset the connection and lose the error."""
        client.send(_line({"ok": False, "error": error}), now)
        client.inbuf.clear()
        client.closing = True
        client.read_due = now + self.deadlines.request

    def _deliver_answers(self, now: float) -> None:
        while self._answers:
            client, token, future = self._answers.popleft()
            if client.closed or client.waiting != token:
                continue  # gone, or already told that the table loop did not answer in time
            client.waiting = 0
            try:
                answer = future.result(0)
            except Exception as exc:
                answer = {"ok": False, "error": f"no answer from the table loop: "
                                                f"{type(exc).__name__}"}
            self._reply(client, answer, now)
            self._serve_requests(client, now)
            self._update(client, now)

    def _push_to_watchers(self, now: float) -> None:
        """Each watcher gets the status when it changed, and at least every watch interval;
        one still taking the previous one gets the newest once it has."""
        watchers = [c for c in self._clients.values()
                    if c.watching and not c.outbuf and not c.closed]
        if not watchers:
            return
        if self._status_dirty.is_set() or any(now >= c.push_due for c in watchers):
            self._status_dirty.clear()
            self._version, self._snapshot_line = self.handler.control_watch_line()
        interval = self.handler.control_watch_interval()
        for client in watchers:
            if client.sent_version != self._version or now >= client.push_due:
                client.send(self._snapshot_line, now)
                client.sent_version, client.push_due = self._version, now + interval
                self._update(client, now)

    def _enforce_deadlines(self, now: float) -> None:
        for client in list(self._clients.values()):
            if client.closed:
                continue
            if client.outbuf and now >= client.write_due:
                self._close(client)  # it takes nothing we send: a stuck or hostile reader
            elif client.waiting and now >= client.answer_due:
                client.waiting = 0
                self._reply(client, {"ok": False, "error": (
                    f"no answer from the table loop within {self.deadlines.answer:g} s; the action "
                    f"may still be applied: check status")}, now)
                self._serve_requests(client, now)
                self._update(client, now)
            elif client.closing and now >= client.read_due:
                self._close(client)
            elif not (client.waiting or client.watching or client.closing) \
                    and now >= client.read_due:
                self._refuse(client, f"no complete request within {self.deadlines.request:g} s"
                             if client.inbuf else f"idle for {self.deadlines.idle:g} s", now)
                self._update(client, now)

    def _update(self, client: _Client, now: float) -> None:
        """Send what can go now, then set what the selector watches for this client."""
        if client.closed:
            return
        if client.outbuf:
            try:
                sent = client.conn.send(client.outbuf)
                del client.outbuf[:sent]
                client.write_due = now + self.deadlines.write_stall
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                self._close(client)
                return
        if client.closing and client.eof and not client.outbuf:
            self._close(client)
            return
        mask = selectors.EVENT_WRITE if client.outbuf else 0
        if not client.eof and len(client.inbuf) <= MAX_REQUEST:
            mask |= selectors.EVENT_READ
        if mask == client.mask:
            return
        if client.mask == 0:
            self._selector.register(client.conn, mask, client)
        elif mask == 0:
            self._selector.unregister(client.conn)
        else:
            self._selector.modify(client.conn, mask, client)
        client.mask = mask

    def _close(self, client: _Client, farewell: dict[str, Any] | None = None) -> None:
        if client.closed:
            return
        client.closed = True
        if client.mask:
            self._selector.unregister(client.conn)
        if farewell is None:
            client.conn.close()
        else:
            _send_and_close(client.conn, farewell)
        self._clients.pop(client.fd, None)
