"""Control socket callers that are not root, for the tests of who may act and of floods.

Each caller is a process forked from a forkserver (single-threaded, so forking is safe), which
drops to the given uid and gid with no supplementary groups before it touches the socket: the
daemon sees it through SO_PEERCRED as that user. The interpreter under /root cannot be run by
such a user, so nothing is executed after the drop; every module is already imported.
"""

from __future__ import annotations

import errno
import grp
import json
import multiprocessing
import os
import pwd
import selectors
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from controller.service.control.client import ControlClient, ControlError

NOBODY = pwd.getpwnam("nobody")
UNLISTED_UID = 65533  # a uid with no account: its name is its number


def _context() -> Any:
    return multiprocessing.get_context("forkserver")


def _drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _requests(uid: int, gid: int, path: str, messages: list[dict[str, Any]], out: Any) -> None:
    try:
        _drop_privileges(uid, gid)
        client = ControlClient(path, timeout=10, retry_s=0.5)
        out.send([client.request(message) for message in messages])
    except (ControlError, OSError) as exc:
        out.send(f"{type(exc).__name__}: {exc}")


def requests_as(uid: int, gid: int, path: str, *messages: dict[str, Any],
                timeout: float = 30) -> list[dict[str, Any]] | str:
    """The daemon's answers to ``messages``, each sent on its own connection as uid:gid, or
    the client's error when the socket could not be reached (e.g. busy)."""
    ctx = _context()
    mine, theirs = ctx.Pipe()
    proc = ctx.Process(target=_requests, args=(uid, gid, path, list(messages), theirs))
    proc.start()
    try:
        assert mine.poll(timeout), f"no answers as uid {uid} within {timeout} s"
        answers = mine.recv()
    finally:
        proc.join(5)
    return answers


def _open_nonblocking(path: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(path)
    except OSError as exc:  # EAGAIN: the backlog is full
        sock.close()
        if exc.errno in (errno.EAGAIN, errno.ECONNREFUSED):
            return None
        raise
    return sock


def _burst(path: str, count: int, deadline_s: float) -> dict[str, int]:
    """``count`` connections as fast as the backlog takes them, each asking for the status; how
    each ended. A connection the full backlog refuses is tried again, as a client would, for
    half the deadline: a daemon slow to drain its backlog on a busy machine still meets the
    whole burst, and one that never drains it leaves them "not connected"."""
    selector = selectors.DefaultSelector()
    outcome = {"answered": 0, "busy": 0, "closed": 0, "not_connected": 0, "no_answer": 0}
    connect_until = time.monotonic() + deadline_s / 2
    for _ in range(count):
        sock = _open_nonblocking(path)
        while sock is None and time.monotonic() < connect_until:
            time.sleep(0.002)
            sock = _open_nonblocking(path)
        if sock is None:
            outcome["not_connected"] += 1
            continue
        try:
            sock.send(b'{"cmd": "status"}\n')
        except OSError:
            pass
        selector.register(sock, selectors.EVENT_READ, bytearray())
    deadline = time.monotonic() + deadline_s
    while selector.get_map() and time.monotonic() < deadline:
        for key, _ in selector.select(0.2):
            try:
                data = key.fileobj.recv(65536)
            except OSError:
                data = b""
            key.data.extend(data)
            if data and b"\n" not in key.data:
                continue
            line = bytes(key.data).split(b"\n", 1)[0]
            if line:
                reply = json.loads(line)
                outcome["busy" if reply.get("busy") else "answered"] += 1
            else:
                outcome["closed"] += 1
            selector.unregister(key.fileobj)
            key.fileobj.close()
    for key in list(selector.get_map().values()):
        outcome["no_answer"] += 1
        key.fileobj.close()
    selector.close()
    return outcome


def _flood(uid: int, gid: int, path: str, idle: int, bursts: list[int], out: Any) -> None:
    _drop_privileges(uid, gid)
    held = [sock for sock in (_open_nonblocking(path) for _ in range(idle)) if sock]
    out.send(len(held))
    out.send([_burst(path, count, deadline_s=10) for count in bursts])
    out.recv()  # hold the idle connections until told to let go
    out.send(_what_the_server_said(held))


def _what_the_server_said(held: list[socket.socket]) -> dict[str, int]:
    """How each held connection ended: still open, told busy, displaced, or just closed."""
    said = {"open": 0, "busy": 0, "displaced": 0, "closed": 0}
    for sock in held:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            said["open"] += 1
            continue
        except OSError:
            data = b""
        first = json.loads(data.split(b"\n", 1)[0]) if data else {}
        if first.get("error", "").startswith("closed: a supervisor"):
            said["displaced"] += 1
        else:
            said["busy" if first.get("busy") else "closed"] += 1
        sock.close()
    return said


class Flood:
    """An unprivileged caller that holds ``idle`` idle connections open and sends ``bursts``
    of simultaneous status requests, until ``stop()``."""

    def __init__(self, uid: int, gid: int, path: str, idle: int, bursts: list[int]):
        ctx = _context()
        self._mine, theirs = ctx.Pipe()
        self._proc = ctx.Process(target=_flood, args=(uid, gid, path, idle, bursts, theirs))
        self._proc.start()
        self._reports = ["idle", "bursts"]

    def _next(self, what: str, timeout: float) -> Any:
        assert self._reports.pop(0) == what, f"the flood's reports are read in order: {what}"
        assert self._mine.poll(timeout), f"the flood did not report {what} within {timeout} s"
        return self._mine.recv()

    def idle_open(self, timeout: float = 30) -> int:
        """How many idle connections the flood got connected (the rest: backlog full)."""
        return self._next("idle", timeout)

    def bursts(self, timeout: float = 60) -> list[dict[str, int]]:
        """How each burst's connections ended (answered, busy, closed, not connected, …)."""
        return self._next("bursts", timeout)

    def stop(self) -> dict[str, int] | None:
        """Let go of the idle connections; how the server had left each of them."""
        said = None
        if self._proc.is_alive():
            try:
                for what in list(self._reports):
                    self._next(what, 60)
                self._mine.send("stop")
                if self._mine.poll(10):
                    said = self._mine.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
        return said


def process_figures(pid: int) -> dict[str, int]:
    """Threads and resident memory (kB) of a running process, and its open descriptors."""
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {"threads": int(fields["Threads"]), "rss_kb": int(fields["VmRSS"].split()[0]),
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


class TemporaryGroup:
    """A system group created for one test (``groupadd``), removed afterwards."""

    def __init__(self, name: str, members: tuple[str, ...] = ()):
        self.name = name
        subprocess.run(["groupadd", "-f", name], check=True, capture_output=True)
        for member in members:
            subprocess.run(["gpasswd", "-a", member, name], check=True, capture_output=True)

    @property
    def gid(self) -> int:
        return grp.getgrnam(self.name).gr_gid

    def remove(self) -> None:
        subprocess.run(["groupdel", self.name], capture_output=True)
