"""A display server that a slow or hostile client cannot starve, on real sockets: clients that
trickle their request, idle streams, a rebinding attacker's host name, and clients that reset
before their answer."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from controller.display import server as server_module
from controller.display.admission import STREAMS_PER_ADDRESS, Admission
from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.table.machine import MachineSettings, TableMachine
from support.display_helpers import request
from support.waiting import wait_until


def board() -> tuple[int, dict]:
    return 1, TableMachine(MachineSettings()).status()


@pytest.fixture
def display() -> Iterator[DisplayServer]:
    server = DisplayServer(DisplaySettings(port=0, max_clients=4,
                                           allowed_hosts=("table-07.studio",)), board)
    server.start()
    yield server
    server.close()


class Trickler:
    """A client that sends its request a byte at a time and never finishes it."""

    def __init__(self, port: int, every_s: float, source: str = "127.0.0.1"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30,
                                             source_address=(source, 0))
        self.closed_at: float | None = None
        self._stop = threading.Event()
        self._every_s = every_s
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        request_bytes = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + b"a" * 10_000
        try:
            for byte in request_bytes:
                if self._stop.wait(self._every_s):
                    return
                self.sock.sendall(bytes([byte]))
        except OSError:
            self.closed_at = time.monotonic()

    def alive(self) -> bool:
        """The server has neither closed it nor answered it (a peek finds nothing to read)."""
        try:
            self.sock.setblocking(False)
            self.sock.recv(1, socket.MSG_PEEK)  # EOF, or an answer: it is done with us
            return False
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            self.sock.setblocking(True)

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


def open_stream(port: int, source: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    sock.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    return sock


def stream_answer(sock: socket.socket) -> bytes:
    """The first bytes of a stream's answer (its status line and first message)."""
    data = b""
    while b"event: state" not in data and b"503" not in data[:20]:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_clients_that_trickle_their_request_cannot_keep_a_page_from_loading(
        display: DisplayServer) -> None:
    slots = 4 + server_module.SPARE_CONNECTIONS
    tricklers = [Trickler(display.port, 0.5) for _ in range(2 * slots)]
    try:
        time.sleep(1.0)  # every slot taken by a trickler, each sending a byte a 0.5 s
        for _ in range(3):
            status, _, body = request(display.port, "/state.json")
            assert status == 200 and body.startswith(b"{")
    finally:
        for trickler in tricklers:
            trickler.close()


def test_a_request_must_be_in_whole_within_its_deadline(display: DisplayServer) -> None:
    trickler = Trickler(display.port, 0.2)  # each read well within the socket timeout
    started = time.monotonic()
    try:
        wait_until(lambda: not trickler.alive(), server_module.REQUEST_DEADLINE_S + 5,
                   "the server to close a request that never ends")
    finally:
        trickler.close()
    assert time.monotonic() - started >= server_module.REQUEST_DEADLINE_S - 0.5


def test_idle_streams_from_one_address_cannot_take_the_dealers_screen() -> None:
    display = DisplayServer(DisplaySettings(port=0), board)  # 16 streams
    display.start()
    idle: list[socket.socket] = []
    try:
        answers = []
        for _ in range(16):
            sock = open_stream(display.port, "127.0.0.2")
            answers.append(stream_answer(sock))
            idle.append(sock)
        assert [b"event: state" in a for a in answers] == \
            [True] * STREAMS_PER_ADDRESS + [False] * (16 - STREAMS_PER_ADDRESS)
        assert all(a.startswith(b"HTTP/1.0 503") for a in answers[STREAMS_PER_ADDRESS:])
        assert display.feed.streams == STREAMS_PER_ADDRESS  # refused, not swapped in a loop
        kiosk = open_stream(display.port, "127.0.0.1")
        answer = stream_answer(kiosk)
        assert answer.startswith(b"HTTP/1.0 200") and b"event: state" in answer
        kiosk.close()
    finally:
        for sock in idle:
            sock.close()
        display.close()


def test_screens_on_this_machine_keep_their_reserve_against_other_machines() -> None:
    """The policy itself, with the addresses other machines would have (loopback is all a
    test may use on the network)."""
    admission = Admission(connections=40, streams=16)
    remote = [object() for _ in range(16)]
    for n, sock in enumerate(remote):
        assert admission.connect(sock, f"10.9.{n}.1") == []
        admission.requested(sock)
        verdict = admission.open_stream(sock)
        if verdict is None:
            break
        admission.streaming(sock, object())
    assert n == 14  # remote machines stop two short: the kiosk's reserve
    kiosk = object()
    admission.connect(kiosk, "127.0.0.1")
    assert admission.open_stream(kiosk) == []
    for sock in remote:
        admission.close(sock)


@pytest.mark.parametrize(("host", "status"), [
    ("evil.example", 421), ("evil.example:8080", 421), ("table-07.studio.evil", 421),
    ("localhost", 200), ("LOCALHOST:8080", 200), ("127.0.0.1:8080", 200), ("[::1]:8080", 200),
    ("10.1.2.3", 200), ("table-07.studio", 200), (socket.gethostname(), 200)])
def test_only_the_names_the_table_is_reached_by_are_served(display: DisplayServer, host: str,
                                                           status: int) -> None:
    for path in ("/", "/state.json", "/roadmap.svg"):
        got, _, body = request(display.port, path, headers={"Host": host})
        assert got == status, (host, path)
        if status == 421:
            assert b"T" not in body[:1] and b"state" not in body  # nothing of the table


def test_clients_that_reset_before_their_answer_cost_one_line_not_a_traceback(
        display: DisplayServer, caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    linger = struct.pack("ii", 1, 0)  # close = RST
    with caplog.at_level(logging.WARNING, logger="pokdeng.display"):
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", display.port), timeout=5)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            sock.sendall(b"GET /state.json HTTP/1.1\r\nHost: localhost\r\n\r\n")
            sock.close()
        status, _, _ = request(display.port, "/state.json")
        assert status == 200  # still serving
        time.sleep(0.5)
    stderr = capfd.readouterr().err
    assert "Traceback" not in stderr, stderr[-2000:]
    lines = [r for r in caplog.records if r.name == "pokdeng.display"]
    assert len(lines) <= 3, [r.getMessage() for r in lines]
