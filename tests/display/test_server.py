"""The display's web server on real sockets: read-only, bounded, and live.

The server is fed as the daemon feeds it (``offer_events`` and ``status_changed`` on the
caller's thread, which must never wait) with a real table machine's events and status.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest

import controller.display.feed as feed_module
from controller.display.feed import CLIENT_QUEUE
from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine
from support.display_helpers import SseReader, request
from support.waiting import wait_until


class Board:
    """A status board as the daemon's: a version and the latest sealed status."""

    def __init__(self, status: dict[str, Any]):
        self.version, self.status = 0, status

    def snapshot(self) -> tuple[int, dict[str, Any]]:
        return self.version, dict(self.status, now=self.status.get("clock"))


@pytest.fixture
def table() -> Iterator[tuple[DisplayServer, Board, TableMachine]]:
    machine = TableMachine(MachineSettings())
    board = Board(machine.status())
    display = DisplayServer(DisplaySettings(port=0, max_clients=3), board.snapshot)
    display.start()
    yield display, board, machine
    display.close()


def play(display: DisplayServer, board: Board, machine: TableMachine, seed: int,
         stop: Any = None) -> list[dict[str, Any]]:
    """Feed the display a shoe as the owner thread does; returns the events."""
    events = []
    for inp in shoe_script(seed, start_at=machine.clock + 10):  # a shoe after the last one
        batch = machine.handle(inp)
        events += batch
        display.offer_events(batch)
        board.status = machine.status()
        display.status_changed()
        if stop is not None and stop(events):
            break
    return events


@pytest.fixture(scope="module")
def idle() -> Iterator[DisplayServer]:
    """One display for the tests that only read (closing one waits for its accept loop)."""
    machine = TableMachine(MachineSettings())
    display = DisplayServer(DisplaySettings(port=0), Board(machine.status()).snapshot)
    display.start()
    yield display
    display.close()


def test_pages_and_assets_are_served_and_nothing_else(idle: DisplayServer) -> None:
    display = idle
    port = display.port
    for path, kind in (("/", "text/html"), ("/scoreboard", "text/html"),
                       ("/display.mjs", "text/javascript"), ("/display.css", "text/css"),
                       ("/state.json", "application/json"), ("/roadmap.svg", "image/svg+xml")):
        status, headers, body = request(port, path)
        assert status == 200 and headers["Content-Type"].startswith(kind), (path, status)
        assert headers["Content-Security-Policy"].startswith("default-src 'self'")
        assert body
    assert b'<script src="/display.mjs">' in request(port, "/")[2]
    for path in ("/nope", "/../../etc/passwd", "/static/display.mjs", "/events/x"):
        assert request(port, path)[0] == 404, path


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
def test_the_page_is_read_only(idle: DisplayServer, method: str) -> None:
    status, headers, _ = request(idle.port, "/events", method, body=b"{}")
    assert status == 405 and headers["Allow"] == "GET"


def test_oversized_requests_are_refused(idle: DisplayServer) -> None:
    status, _, _ = request(idle.port, "/", headers={f"X-Pad-{i}": "x" * 400
                                                         for i in range(42)})
    assert status == 431
    assert request(idle.port, "/?" + "q" * 20_000)[0] == 431
    assert request(idle.port, "/", headers={f"X-Pad-{i}": "x" * 400 for i in range(30)})[0] \
        == 200  # 12 KiB of headers is still a request


def test_the_stream_starts_with_the_whole_screen_then_follows_the_table(table) -> None:
    display, board, machine = table
    reader = SseReader(display.port)
    try:
        reader.wait_for(lambda m: m and m[0][0] == "state")
        first = reader.taken()[0][1]
        assert set(first) >= {"status", "results", "roadmap", "seats"}
        events = play(display, board, machine, seed=5,
                      stop=lambda evs: sum(e["type"] == "round_result" for e in evs) == 2)
        reader.wait_for(lambda m: any(e == "results" and len(d) == 2 for e, d in m))
        roadmap = reader.wait_for(lambda m: [d for e, d in m if e == "roadmap"
                                             and d["rounds"] == 2])[-1]
        assert roadmap["svg"].count('class="bead"') == 10
        assert reader.wait_status(lambda v: v["state"] == machine.status()["state"]
                                  and v["round"] == machine.status()["round"])
        state = json.loads(request(display.port, "/state.json")[2])
        assert state["results"][0]["round"] == events[-1]["round"]
        assert "class=\"bead\"" in request(display.port, "/roadmap.svg")[2].decode()
    finally:
        reader.close()


def test_streams_beyond_the_bound_are_refused_with_503(table) -> None:
    display, _, _ = table
    readers = [SseReader(display.port) for _ in range(3)]
    try:
        for reader in readers:
            reader.wait_for(lambda m: m and m[0][0] == "state")
        status, _, body = request(display.port, "/events")
        assert status == 503 and b"too many" in body
        readers.pop().close()
        wait_until(lambda: display.feed.streams == 2, what="the closed stream to be let go")
        extra = SseReader(display.port)
        readers.append(extra)
        extra.wait_for(lambda m: m and m[0][0] == "state")
    finally:
        for reader in readers:
            reader.close()


def test_a_stuck_browser_is_dropped_and_costs_the_table_nothing(table) -> None:
    """A client that reads nothing: its socket fills, then its queue; it is dropped, while the
    feeding side never waits and a reading client keeps up."""
    display, board, machine = table
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(("127.0.0.1", display.port))
    stuck.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    wait_until(lambda: display.feed.streams == 1, what="the stuck stream to open")
    reader = SseReader(display.port)
    try:
        reader.wait_for(lambda m: m and m[0][0] == "state")
        seed = 11
        while display.feed.dropped_clients == 0:  # whole shoes; the feeding side never waits
            for inp in shoe_script(seed, start_at=machine.clock + 10):
                batch = machine.handle(inp)
                display.offer_events(batch)
                board.status = machine.status()
                display.status_changed()
                for event in batch:  # the reading client sees every round (no coalescing)
                    if event["type"] == "round_result":
                        reader.wait_for(lambda m, e=event: any(
                            kind == "results" and data and data[0]["round"] == e["round"]
                            and data[0]["shoe"] == e["shoe"] for kind, data in m[-8:]))
                if display.feed.dropped_clients:
                    break
            seed += 1
            assert seed < 20, "the stuck client was never dropped"
        assert display.feed.dropped_clients == 1 and display.feed.streams == 1
        reader.wait_for(lambda m: any(e == "results" for e, _ in m))
        assert CLIENT_QUEUE < sum(1 for e, _ in reader.taken())
    finally:
        reader.close()
        stuck.close()


def test_close_ends_the_streams(table) -> None:
    display, _, _ = table
    reader = SseReader(display.port)
    reader.wait_for(lambda m: m and m[0][0] == "state")
    threading.Thread(target=display.close).start()
    wait_until(lambda: reader.ended, what="the stream to end when the display closes")


def test_a_feed_far_behind_rebuilds_from_the_history(monkeypatch) -> None:
    """Were the feed ever INBOX_BATCHES behind, the owner stops queueing (it never waits) and
    the feed rebuilds the screen from the history (the journal, in the daemon)."""
    monkeypatch.setattr(feed_module, "INBOX_BATCHES", 0)  # every hand-over finds the inbox "full"
    machine = TableMachine(MachineSettings())
    board = Board(machine.status())
    journal: list[dict[str, Any]] = []
    display = DisplayServer(DisplaySettings(port=0), board.snapshot,
                            history=lambda: list(journal))
    display.start()
    reader = SseReader(display.port)
    try:
        reader.wait_for(lambda m: m and m[0][0] == "state")
        for inp in shoe_script(9):
            batch = machine.handle(inp)
            journal += batch  # journaled before it is handed over, as the daemon does
            display.offer_events(batch)
            board.status = machine.status()
            display.status_changed()
            if sum(e["type"] == "round_result" for e in journal) == 2:
                break
        roadmap = reader.wait_for(lambda m: [d for e, d in m if e == "roadmap"
                                             and d["rounds"] == 2])[-1]
        assert roadmap["svg"].count('class="bead"') == 10
        assert display.feed._inbox == deque()
    finally:
        reader.close()
        display.close()


def test_a_stuck_feed_never_holds_up_the_hand_over() -> None:
    """The feed thread stuck (here: in reading the status) — the owner's hand-over still
    returns every time, more batches than the inbox holds included, and once the feed is free
    the screen is whole again."""
    machine = TableMachine(MachineSettings())
    board = Board(machine.status())
    free = threading.Event()
    stuck = threading.Event()
    journal: list[dict[str, Any]] = []

    def snapshot() -> tuple[int, dict[str, Any]]:
        if threading.current_thread().name == "display-feed" and not free.is_set():
            stuck.set()
            free.wait()
        return board.snapshot()

    display = DisplayServer(DisplaySettings(port=0), snapshot, history=lambda: list(journal))
    display.start()
    try:
        wait_until(stuck.is_set, what="the feed to be stuck")
        for inp in shoe_script(4):
            batch = machine.handle(inp)
            journal += batch
            display.offer_events(batch)
            board.status = machine.status()
            display.status_changed()
        rounds = sum(e["type"] == "round_result" for e in journal)
        for _ in range(feed_module.INBOX_BATCHES):  # more than the inbox takes
            display.offer_events([{"type": "tick", "seq": 0}])
        assert display.feed._resync
        free.set()
        wait_until(lambda: (display.feed.state().get("roadmap") or {}).get("rounds") == rounds,
                   what="the screen to be whole once the feed is free")
    finally:
        free.set()
        display.close()
