"""The local control socket: a Unix stream socket speaking JSON lines, and its client.

One request object a line, one response object a line::

    {"cmd": "status"}                                  -> {"ok": true, "status": {...}}
    {"cmd": "supervisor", "action": "pause"}           -> {"ok": true, "events": ["paused"]}
    {"cmd": "supervisor", "action": "enter_card", "card": "9D"}
    {"cmd": "watch"}                                   -> {"ok": true, "status": {...}} per change

A failed request answers ``{"ok": false, "error": "plain words"}``; ``"busy": true`` in it
means the socket had no room and the request was not read (try again). An answer of another
shape is a ControlError naming the socket: whoever put another program's socket at the path
(which socket_file.py keeps root from) must not crash the command.

Who may do what (controller/service/control/access.py): whoever can open the socket (file mode 0660
and ``control.group``) may read, ``status`` and ``watch``; only root, the daemon's own user and
members of ``control.supervisor_group`` may act (``supervisor …``), and each action is
journaled with who took it. The kernel names the caller (``SO_PEERCRED``), not the request.

The server (controller/service/control/server.py) never touches the table machine: status comes from
the snapshot the owner thread publishes, supervisor actions are posted to the owner's queue and
answered once the owner has handled them. It serves a bounded number of clients on one thread
and cannot be exhausted by idle, slow or bursting clients.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from controller.service.config.errors import EX_CONFIG, ConfigError
from controller.service.control.socket_file import (
    SocketFileDenied,
    SocketFileError,
    open_socket_file,
)

if TYPE_CHECKING:
    import argparse

MAX_ANSWER = 1024 * 1024
CONNECT_RETRY_S = 3.0  # how long a client keeps trying a full or restarting socket
_RETRY_ERRNOS = {errno.EAGAIN, errno.ECONNREFUSED}  # backlog full; nobody listening yet


class ControlError(Exception):
    """The control socket cannot be served or reached; the message says why."""


class ControlConfigError(ControlError):
    """The control section names something this system does not have (e.g. the group)."""


class _TryAgain(Exception):
    """The socket had no room for us this time."""


class ControlClient:
    """Talks to a running daemon's control socket.

    A connection the socket cannot take now (its backlog is full, it answers "busy", or the
    daemon is between stop and start) is retried for up to ``retry_s`` seconds. ``timeout``
    is longer than the server's own deadline for a supervisor action, whose answer then says
    that the table loop did not answer.
    """

    def __init__(self, path: str, timeout: float = 15.0, retry_s: float = CONNECT_RETRY_S):
        self.path = path
        self.timeout = timeout
        self.retry_s = retry_s

    def _connect(self) -> socket.socket:
        try:
            fd, address = open_socket_file(self.path)
        except SocketFileDenied:
            raise ControlError(f"permission denied on {self.path}: you need to be in the "
                               f"daemon's control group") from None
        except SocketFileError as exc:
            raise ControlError(str(exc)) from None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(address)
        except FileNotFoundError:
            sock.close()
            raise ControlError(
                f"no control socket at {self.path}: is the daemon running?") from None
        except PermissionError:
            sock.close()
            raise ControlError(f"permission denied on {self.path}: you need to be in the "
                               f"daemon's control group") from None
        except OSError as exc:
            sock.close()
            if exc.errno in _RETRY_ERRNOS:
                raise _TryAgain(exc.strerror) from None
            raise ControlError(
                f"cannot reach the daemon at {self.path}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
        return sock

    def _first_answer(self, message: dict[str, Any]) -> tuple[socket.socket, Any, dict[str, Any]]:
        """Connect, send ``message`` and read the first answer, retrying while it is busy."""
        deadline = time.monotonic() + self.retry_s
        delay = 0.02
        while True:
            try:
                return self._exchange(message)
            except _TryAgain as exc:
                if time.monotonic() + delay > deadline:
                    raise ControlError(f"the daemon at {self.path} is too busy to answer "
                                       f"({exc}); try again") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    def _exchange(self, message: dict[str, Any]) -> tuple[socket.socket, Any, dict[str, Any]]:
        sock = self._connect()
        try:
            try:
                sock.sendall(json.dumps(message).encode() + b"\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # a busy socket may close before reading: its answer says so
            reader = sock.makefile("rb")
            try:
                line = reader.readline(MAX_ANSWER)
            except TimeoutError:
                raise ControlError(f"the daemon did not answer within {self.timeout:g} s") from None
            except ConnectionResetError:
                # Closed with our request unread: it was not served (a request is only served
                # once read whole), so asking again cannot do anything twice.
                raise _TryAgain("connection reset") from None
            if not line:
                raise ControlError("the daemon closed the connection without an answer")
            reply = self._answer(line)
            if not reply["ok"] and reply.get("busy"):
                raise _TryAgain(reply.get("error", "busy"))
        except BaseException:
            sock.close()
            raise
        return sock, reader, reply

    def _answer(self, line: bytes) -> dict[str, Any]:
        """One line the socket sent, or ControlError when it is not the protocol's: another
        program's socket must not end the command with a traceback."""
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise self._not_protocol("not a line of JSON") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise self._not_protocol('no "ok": true or false')
        if not reply["ok"] and not isinstance(reply.get("error"), str):
            raise self._not_protocol('a refusal without its "error"')
        return reply

    def _not_protocol(self, why: str) -> ControlError:
        return ControlError(f"{self.path} does not answer as the table's control socket "
                            f"({why}): is it the daemon's?")

    def _status_of(self, reply: dict[str, Any], failed: str) -> dict[str, Any]:
        if not reply["ok"]:
            raise ControlError(reply["error"] or failed)
        status = reply.get("status")
        if not isinstance(status, dict):
            raise self._not_protocol('no "status" in its answer')
        return status

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        sock, _, reply = self._first_answer(message)
        sock.close()
        return reply

    def status(self) -> dict[str, Any]:
        return self._status_of(self.request({"cmd": "status"}), "status failed")

    def supervisor(self, action: str, card: str | None = None) -> dict[str, Any]:
        # here, not at the top: the protocol module reads the table's inputs, which status
        # and watch never need
        from controller.service.control.protocol import normalise_action

        message: dict[str, Any] = {"cmd": "supervisor", "action": normalise_action(action)}
        if card is not None:
            message["card"] = card
        reply = self.request(message)
        events = reply.get("events")
        if reply["ok"] and not (isinstance(events, list)
                                and all(isinstance(event, str) for event in events)):
            raise self._not_protocol('no "events" in its answer')
        return reply

    def watch(self) -> Iterator[dict[str, Any]]:
        """Yield status snapshots until the daemon goes away."""
        sock, reader, reply = self._first_answer({"cmd": "watch"})
        sock.settimeout(None)  # the server sends heartbeats; a blocked read means it is gone
        try:
            while True:
                yield self._status_of(reply, "watch failed")
                line = reader.readline(MAX_ANSWER)
                if not line:
                    return
                reply = self._answer(line)
        finally:
            sock.close()


# --- CLI helpers shared by status / supervisor / watch ----------------------------------------

DEFAULT_SOCKET = "/run/pokdeng-table/control.sock"


SOCKET_NAME = "control.sock"  # the socket's name in a state directory (the demo's, a config's)


def add_socket_arguments(parser: argparse.ArgumentParser) -> None:
    """--socket, --config and --state-dir: one meaning on every command that talks to a table."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--socket", metavar="PATH",
                       help=f"the daemon's control socket (default {DEFAULT_SOCKET})")
    where.add_argument("--config", metavar="FILE",
                       help="read the socket path from the daemon's config file")
    where.add_argument("--state-dir", metavar="DIR",
                       help=f"the table's state directory: its {SOCKET_NAME} (the demo prints "
                            f"its state directory)")


EX_UNAVAILABLE = 69  # sysexits.h: the daemon is not reachable


Command = Callable[["argparse.Namespace"], int]


def client_command(prog: str) -> Callable[[Command], Command]:
    """Decorate a CLI command that talks to the daemon: a bad ``--config`` exits 78 with its
    errors listed, an unreachable daemon exits 69 with the reason, both on stderr."""
    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def run(args: argparse.Namespace) -> int:
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


def socket_path(args: argparse.Namespace) -> str:
    """The control socket named by --socket, by --config's control.socket, in --state-dir, or
    the default."""
    # a command's options are untyped (argparse): each is a string when given
    if getattr(args, "socket", None):
        path: str = args.socket
        return path
    if getattr(args, "state_dir", None):
        return os.path.join(args.state_dir, SOCKET_NAME)
    if getattr(args, "config", None):
        # here, not at the top: status, watch and supervisor start without the config reader
        from controller.service.config.settings import load_config

        return load_config(args.config).control.socket
    return DEFAULT_SOCKET
