"""The local control socket: a Unix stream socket speaking JSON lines.

One request object a line, one response object a line::

    {"cmd": "status"}                                  -> {"ok": true, "status": {...}}
    {"cmd": "supervisor", "action": "pause"}           -> {"ok": true, "events": ["paused"]}
    {"cmd": "supervisor", "action": "enter_card", "card": "9D"}
    {"cmd": "watch"}                                   -> {"ok": true, "status": {...}} per change

A failed request answers ``{"ok": false, "error": "plain words"}``. Access is by file mode and
group (0660 + the configured group): whoever can open the socket is a supervisor, so the group
is the supervisors' group. The server never touches the table machine: status comes from the
snapshot the owner thread publishes, supervisor actions are posted to the owner's queue and
answered once the owner has handled them.
"""

from __future__ import annotations

import functools
import grp
import json
import os
import socket
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import structlog

log = structlog.get_logger("pokdeng.control")

MAX_LINE = 64 * 1024
SUPERVISOR_ACTIONS = ("pause", "resume", "cancel_round", "end_shoe", "enter_card")


class ControlError(Exception):
    """The control socket cannot be served or reached; the message says why."""


class ControlConfigError(ControlError):
    """The control section names something this system does not have (e.g. the group)."""


class ControlHandler(Protocol):
    """What the daemon offers the control socket (all thread-safe)."""

    def control_status(self) -> dict[str, Any]: ...

    def control_supervisor(self, action: str, card: str | None) -> dict[str, Any]: ...

    def wait_for_change(self, version: int, timeout: float) -> tuple[int, dict[str, Any]]: ...

    def control_watch_interval(self) -> float: ...


def normalise_action(action: str) -> str:
    """CLI spelling (``cancel-round``) to the input's (``cancel_round``)."""
    return action.strip().lower().replace("-", "_")


class ControlServer:
    """Serves the control socket on its own threads; ``close()`` is idempotent."""

    def __init__(self, path: str, handler: ControlHandler, *, group: str | None = None,
                 mode: int = 0o660):
        self.path = path
        self.handler = handler
        self.group = group
        self.mode = mode
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._clients: set[socket.socket] = set()
        self._lock = threading.Lock()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        gid = self._group_id()
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._remove_stale_socket()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            listener.bind(self.path)
            # A fresh socket is at most 0755 (umask), which nobody but us can connect to, so
            # tightening/opening it after bind leaves no window for others.
            if gid is not None:
                os.chown(self.path, -1, gid)
            os.chmod(self.path, self.mode)
            listener.listen(8)
        except OSError as exc:
            listener.close()
            raise ControlError(f"cannot serve the control socket {self.path}: {exc}") from None
        self._listener = listener
        self._thread = threading.Thread(target=self._accept_loop, name="control-accept",
                                        daemon=True)
        self._thread.start()
        log.info("control socket ready", path=self.path, group=self.group, mode=oct(self.mode))

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        with self._lock:
            clients = list(self._clients)
        for conn in clients:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(2.0)
        try:
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        except OSError:
            pass

    def _group_id(self) -> int | None:
        if self.group is None:
            return None
        try:
            return grp.getgrnam(self.group).gr_gid
        except KeyError:
            raise ControlConfigError(f"control.group: no group named {self.group!r} on this "
                               f"system (create it, e.g. with systemd-sysusers)") from None

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

    # -- serving ------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            listener = self._listener
            if listener is None:
                return
            try:
                conn, _ = listener.accept()
            except OSError:
                if self._closed.is_set():
                    return
                log.exception("control socket accept failed")
                continue
            with self._lock:
                self._clients.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="control-client",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            reader = conn.makefile("rb")
            while not self._closed.is_set():
                line = reader.readline(MAX_LINE + 1)
                if not line:
                    return
                if len(line) > MAX_LINE and not line.endswith(b"\n"):
                    self._send(conn, {"ok": False, "error": f"request longer than {MAX_LINE} bytes"})
                    return
                if not line.strip():
                    continue
                request = self._parse(line)
                if "error" in request:
                    self._send(conn, {"ok": False, "error": request["error"]})
                    continue
                if request.get("cmd") == "watch":
                    self._watch(conn)
                    return
                self._send(conn, self._answer(request))
        except OSError:
            return  # the client went away
        except Exception:
            log.exception("control request failed")
        finally:
            with self._lock:
                self._clients.discard(conn)
            conn.close()

    @staticmethod
    def _parse(line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return {"error": f"not a JSON line: {exc}"}
        if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
            return {"error": 'a request is a JSON object with a "cmd" string'}
        return request

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        cmd = request["cmd"]
        if cmd == "status":
            return {"ok": True, "status": self.handler.control_status()}
        if cmd == "supervisor":
            action = request.get("action")
            if not isinstance(action, str) or normalise_action(action) not in SUPERVISOR_ACTIONS:
                return {"ok": False, "error": f"unknown supervisor action {action!r}; one of: "
                                              f"{', '.join(SUPERVISOR_ACTIONS)}"}
            action = normalise_action(action)
            card = request.get("card")
            if action == "enter_card" and not isinstance(card, str):
                return {"ok": False, "error": "enter_card needs the card, e.g. 9D"}
            if action != "enter_card" and card is not None:
                return {"ok": False, "error": f'"card" only goes with enter_card, not {action}'}
            return self.handler.control_supervisor(action, card)
        return {"ok": False, "error": f"unknown command {cmd!r}; one of: status, supervisor, watch"}

    def _watch(self, conn: socket.socket) -> None:
        """Send the status now and at every change; a heartbeat keeps countdowns moving."""
        version, snapshot = -1, None
        while not self._closed.is_set():
            version, snapshot = self.handler.wait_for_change(
                version, self.handler.control_watch_interval())
            self._send(conn, {"ok": True, "status": snapshot})

    @staticmethod
    def _send(conn: socket.socket, message: dict[str, Any]) -> None:
        conn.sendall(json.dumps(message, ensure_ascii=False).encode() + b"\n")


# --- client -----------------------------------------------------------------------------------

class ControlClient:
    """Talks to a running daemon's control socket."""

    def __init__(self, path: str, timeout: float = 10.0):
        self.path = path
        self.timeout = timeout

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except FileNotFoundError:
            sock.close()
            raise ControlError(f"no control socket at {self.path}: is the daemon running?") from None
        except PermissionError:
            sock.close()
            raise ControlError(f"permission denied on {self.path}: you need to be in the "
                               f"daemon's control group") from None
        except OSError as exc:
            sock.close()
            raise ControlError(f"cannot reach the daemon at {self.path}: {exc.strerror or exc}") from None
        return sock

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        with self._connect() as sock:
            sock.sendall(json.dumps(message).encode() + b"\n")
            reader = sock.makefile("rb")
            try:
                line = reader.readline(16 * MAX_LINE)
            except socket.timeout:
                raise ControlError(f"the daemon did not answer within {self.timeout:g} s") from None
            if not line:
                raise ControlError("the daemon closed the connection without an answer")
            return json.loads(line)

    def status(self) -> dict[str, Any]:
        reply = self.request({"cmd": "status"})
        if not reply.get("ok"):
            raise ControlError(reply.get("error", "status failed"))
        return reply["status"]

    def supervisor(self, action: str, card: str | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"cmd": "supervisor", "action": normalise_action(action)}
        if card is not None:
            message["card"] = card
        return self.request(message)

    def watch(self) -> Iterator[dict[str, Any]]:
        """Yield status snapshots until the daemon goes away."""
        sock = self._connect()
        sock.settimeout(None)  # the server sends heartbeats; a blocked read means it is gone
        try:
            sock.sendall(b'{"cmd": "watch"}\n')
            reader = sock.makefile("rb")
            for line in reader:
                reply = json.loads(line)
                if not reply.get("ok"):
                    raise ControlError(reply.get("error", "watch failed"))
                yield reply["status"]
        finally:
            sock.close()


# --- CLI helpers shared by status / supervisor / watch ----------------------------------------

DEFAULT_SOCKET = "/run/pokdeng-table/control.sock"


def add_socket_arguments(parser: Any) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH",
                       help=f"the daemon's control socket (default {DEFAULT_SOCKET})")
    where.add_argument("--config", metavar="FILE",
                       help="read the socket path from the daemon's config file")


EX_UNAVAILABLE = 69  # sysexits.h: the daemon is not reachable


def client_command(prog: str) -> Callable[[Callable[[Any], int]], Callable[[Any], int]]:
    """Decorate a CLI command that talks to the daemon: a bad ``--config`` exits 78 with its
    errors listed, an unreachable daemon exits 69 with the reason, both on stderr."""
    def decorate(command: Callable[[Any], int]) -> Callable[[Any], int]:
        @functools.wraps(command)
        def run(args: Any) -> int:
            from controller.config import EX_CONFIG, ConfigError

            try:
                return command(args)
            except ConfigError as exc:
                print(exc.report(), file=sys.stderr)
                return EX_CONFIG
            except ControlError as exc:
                print(f"pokdeng-table {prog}: {exc}", file=sys.stderr)
                return EX_UNAVAILABLE
        return run
    return decorate


def socket_path(args: Any) -> str:
    """The control socket named by --socket, by --config's control.socket, or the default."""
    if getattr(args, "socket", None):
        return args.socket
    if getattr(args, "config", None):
        from controller.config import load_config

        return load_config(args.config).control.socket
    return DEFAULT_SOCKET
