"""One encoded status per change, however many read it: the daemon's status board, control
socket and dealer display wired as the daemon wires them (``TableControl``, ``start_display``),
on a real Unix socket and a real HTTP server, with many watchers, ``status`` callers, pages and
``/state.json`` readers at once.

What is counted: every JSON encoding of a status made by the daemon's own modules (a spy on
``json.dumps`` that notes the calling module), and the counters the modules expose."""

from __future__ import annotations

import json
import socket
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

import controller.display.feed as feed_module
from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.service.clock.table_clock import TableClock
from controller.service.control.access import own_group
from controller.service.control.handler import TableControl
from controller.service.control.server import ControlServer
from controller.service.display_link import start_display
from controller.service.status_board import StatusBoard
from controller.service.telemetry.notify import Notifier
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine
from support.display_helpers import SseReader, request
from support.waiting import wait_until

READERS = 8  # of each kind: watchers, status callers, pages, /state.json reads


def carries_status(value: Any) -> bool:
    """A status view, or a message holding one (the control line, the whole screen)."""
    return isinstance(value, dict) and ("state" in value or any(
        isinstance(inner, dict) and "state" in inner for inner in value.values()))


class EncodingSpy:
    """Counts ``json.dumps`` calls that encode a status, by the module that made them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_module: Counter[str] = Counter()
        self._dumps = json.dumps

    def __call__(self, value: Any, *args: Any, **kwargs: Any) -> str:
        caller = sys._getframe(1).f_globals.get("__name__", "?")
        if caller.startswith("controller.") and carries_status(value):
            with self.lock:
                self.by_module[caller] += 1
        return self._dumps(value, *args, **kwargs)

    def taken(self) -> Counter[str]:
        with self.lock:
            return Counter(self.by_module)


class Watcher:
    """A ``watch`` client: every line it was pushed."""

    def __init__(self, path: str):
        self.lines: list[bytes] = []
        self.cond = threading.Condition()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.sock.sendall(b'{"cmd": "watch"}\n')
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        buffer = b""
        try:
            while chunk := self.sock.recv(65536):
                buffer += chunk
                *whole, buffer = buffer.split(b"\n")
                with self.cond:
                    self.lines += [line + b"\n" for line in whole]
                    self.cond.notify_all()
        except OSError:
            pass

    def saw(self, state: str) -> bool:
        with self.cond:
            return any(json.loads(line)["status"]["state"] == state for line in self.lines)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)


def ask_status(path: str) -> bytes:
    """One ``status`` request on a connection of its own, as ``pokdeng-table status`` asks."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(b'{"cmd": "status"}\n')
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = sock.recv(65536)
            assert chunk, "the control socket closed before answering"
            answer += chunk
    return answer


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[StatusBoard, ControlServer,
                                                             DisplayServer, TableMachine]]:
    # The display's keep-alive re-sends the status after 5 s of quiet: a re-send over time,
    # not a change; left out so that a slow run counts the same.
    monkeypatch.setattr(feed_module, "HEARTBEAT_S", 3600.0)
    clock = TableClock()
    board = StatusBoard(clock, Notifier({}))
    machine = TableMachine(MachineSettings())
    board.publish(dict(machine.status(), table="T1"))
    work = Path(tempfile.mkdtemp(prefix="pds-", dir="/tmp"))
    handler = TableControl(board, clock, lambda inp: Future(), threading.Event(), None, None)
    control = ControlServer(str(work / "control.sock"), handler, supervisor_group=own_group(),
                            max_clients=READERS + 8)
    control.start()
    display = start_display(DisplaySettings(port=0, max_clients=READERS), board, clock, None,
                            str(work / "no-journal.sqlite"))
    try:
        yield board, control, display, machine
    finally:
        display.close()
        control.close()


def test_a_status_change_is_encoded_once_per_view_for_every_reader(
        table: tuple[StatusBoard, ControlServer, DisplayServer, TableMachine],
        monkeypatch: pytest.MonkeyPatch) -> None:
    board, control, display, machine = table
    before = machine.status()["state"]
    watchers = [Watcher(control.path) for _ in range(READERS)]
    pages = [SseReader(display.port) for _ in range(READERS)]
    try:
        for watcher in watchers:
            wait_until(lambda w=watcher: w.saw(before), what="a watcher's first status")
        for page in pages:
            page.wait_status(lambda view: view["state"] == before)

        # The change: the table starts a shoe (the sealed status, as the owner publishes it).
        for inp in shoe_script(1):
            machine.handle(inp)
            if machine.status()["state"] != before:
                break
        after = machine.status()["state"]
        assert after != before
        spy = EncodingSpy()
        monkeypatch.setattr(json, "dumps", spy)
        board_count = dict(board.encodings)
        feed_count = dict(display.feed.encodings)
        board.publish(dict(machine.status(), table="T1"))

        for watcher in watchers:
            wait_until(lambda w=watcher: w.saw(after), what="every watcher to see the change")
        for page in pages:
            page.wait_status(lambda view: view["state"] == after)
        answers = [ask_status(control.path) for _ in range(READERS)]
        screens = [request(display.port, "/state.json")[2] for _ in range(READERS)]
        assert all(json.loads(answer)["status"]["state"] == after for answer in answers)
        assert all(json.loads(screen)["status"]["state"] == after for screen in screens)
        assert len(set(screens)) == 1  # one screen, the same bytes for every reader

        # One encoding per view: the control socket's status (watch and status alike), the
        # display's status message, the players' (scoreboard, overlay) and the dealer's whole
        # screen; not one per reader.
        assert spy.taken() == Counter({"controller.service.status_board": 1,
                                       "controller.display.feed": 3})
        assert board.encodings["status"] - board_count.get("status", 0) == 1
        assert display.feed.encodings["status"] - feed_count.get("status", 0) == 1
        assert display.feed.encodings["state"] - feed_count.get("state", 0) == 1
    finally:
        for watcher in watchers:
            watcher.close()
        for page in pages:
            page.close()
