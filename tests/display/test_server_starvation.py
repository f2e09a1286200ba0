"""A display server that a slow or hostile client cannot starve, on real sockets: clients that
trickle their request, idle streams, a rebinding attacker's host name, and clients that reset
before their answer."""

from __future__ import annotations

import logging
import re
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


def raw_answer(port: int, request: bytes) -> bytes:
    """What the server sends back to ``request`` written on a raw socket (our end then shut
    for writing, so a server waiting for more reads the end), up to its close."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


#: what is wrong with the request -> the request (each must get 400: RFC 9112 §3.2)
NOT_ONE_HOST: dict[str, bytes] = {
    "two Host headers": b"GET / HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n",
    "the same Host twice":
        b"GET /state.json HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n",
    "two Host headers on a refused method":
        b"POST / HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n",
    "no Host on HTTP/1.1": b"GET / HTTP/1.1\r\n\r\n",
    "no Host on HTTP/1.1, the stream": b"GET /events HTTP/1.1\r\nAccept: */*\r\n\r\n",
    "userinfo after the port": b"GET / HTTP/1.1\r\nHost: localhost:80@evil\r\n\r\n",
    "userinfo before the host": b"GET / HTTP/1.1\r\nHost: evil@localhost\r\n\r\n",
    "a path in the Host": b"GET / HTTP/1.1\r\nHost: localhost/evil\r\n\r\n",
    "a port that is not a number": b"GET / HTTP/1.1\r\nHost: localhost:http\r\n\r\n",
    "two ports": b"GET / HTTP/1.1\r\nHost: 127.0.0.1:80:80\r\n\r\n",
    "IPv6 without brackets": b"GET / HTTP/1.1\r\nHost: ::1\r\n\r\n",
    "an unclosed bracket": b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
    "a space inside": b"GET / HTTP/1.1\r\nHost: local host\r\n\r\n",
    "a folded Host": b"GET / HTTP/1.1\r\nHost: localhost\r\n evil.example\r\n\r\n",
    "a port above 65535": b"GET / HTTP/1.1\r\nHost: 127.0.0.1:99999\r\n\r\n",
    "a port above 65535 on a name": b"GET / HTTP/1.1\r\nHost: localhost:65536\r\n\r\n",
    "a 5,000-digit port": b"GET / HTTP/1.1\r\nHost: localhost:" + b"9" * 5000 + b"\r\n\r\n",
}


@pytest.mark.parametrize("what", list(NOT_ONE_HOST))
def test_a_request_whose_host_is_not_one_host_is_refused_with_400(
        display: DisplayServer, what: str) -> None:
    """RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, with more than one, or with
    a Host that is not a host and port: never a page, whichever host it might be taken for."""
    answer = raw_answer(display.port, NOT_ONE_HOST[what])
    assert answer.startswith(b"HTTP/1.0 400 "), (what, answer[:200])
    assert b"state" not in answer and b"<script" not in answer, what


@pytest.mark.parametrize("request_bytes", [b"GET /\r\n", b"GET /\r\n\r\n",
                                           b"GET /state.json\r\n\r\n"])
def test_an_http_0_9_request_is_refused(display: DisplayServer, request_bytes: bytes) -> None:
    """HTTP/0.9 has no Host at all (nor headers): refused at once, nothing of the table."""
    started = time.monotonic()
    answer = raw_answer(display.port, request_bytes)
    assert answer.startswith(b"HTTP/1.0 400 "), answer[:200]
    assert b"state" not in answer and b"<script" not in answer
    assert time.monotonic() - started < server_module.REQUEST_DEADLINE_S  # not its deadline


#: a request line the server does not take -> the status it answers
REFUSED_REQUEST_LINES: dict[bytes, bytes] = {
    b"GET / HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n": b"505",
    b"GET / HTTP/3.0\r\nHost: 127.0.0.1\r\n\r\n": b"505",
    b"GET /state.json HTTP/2.0\r\nHost: localhost\r\n\r\n": b"505",
    b"GET / HTTP/1.x\r\nHost: localhost\r\n\r\n": b"400",
    b"GET / FTP/1.0\r\nHost: localhost\r\n\r\n": b"400",
    b"GET / extra HTTP/1.1\r\nHost: localhost\r\n\r\n": b"400",
}


@pytest.mark.parametrize("request_bytes", list(REFUSED_REQUEST_LINES))
def test_a_request_line_not_served_gets_a_status_line_and_headers(
        display: DisplayServer, request_bytes: bytes) -> None:
    """HTTP/2.0 and /3.0 on a plain HTTP/1 socket, a bad version or bad syntax: an answer an
    HTTP/1 client can read (status line, headers, the connection closed), nothing of the
    table; not an error page alone as HTTP/0.9 would get it."""
    answer = raw_answer(display.port, request_bytes)
    status = REFUSED_REQUEST_LINES[request_bytes]
    assert answer.startswith(b"HTTP/1.0 " + status + b" "), answer[:200]
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"\r\nConnection: close" in head and b"\r\nContent-Type: text/html" in head
    assert int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]) == len(body)
    assert b"state" not in body and b"<script" not in body


@pytest.mark.parametrize(("request_bytes", "status"), [
    (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", b"200"),
    (b"GET / HTTP/1.1\r\nHost:  localhost:8080 \r\n\r\n", b"200"),  # spaces around
    (b"GET / HTTP/1.1\r\nHost: localhost:\r\n\r\n", b"200"),  # an empty port is a port
    (b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", b"200"),
    (b"GET / HTTP/1.1\r\nHost: 127.0.0.1:65535\r\n\r\n", b"200"),  # the highest port
    (b"GET / HTTP/1.0\r\n\r\n", b"200"),  # HTTP/1.0 may leave it out (curl -0, scripts)
    (b"GET / HTTP/1.1\r\nHost: evil.example:8080\r\n\r\n", b"421"),  # one host: not ours
])
def test_one_well_formed_host_is_still_served_or_misdirected(
        display: DisplayServer, request_bytes: bytes, status: bytes) -> None:
    assert raw_answer(display.port, request_bytes).startswith(b"HTTP/1.0 " + status + b" ")


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


def test_clients_that_break_off_in_any_way_cost_one_line_per_interval_with_a_count(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """docs/display.md: one log line per ERROR_LOG_S for clients that break off, whatever the
    way (a reset mid-request: ConnectionResetError; gone before its page: BrokenPipeError),
    and the next line counts the ones held back."""
    monkeypatch.setattr(server_module, "ERROR_LOG_S", 4.0)  # the test waits out one
    server = DisplayServer(DisplaySettings(port=0), board)
    server.start()

    def reset_mid_request() -> None:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        sock.sendall(b"GET / HTTP/1.1\r\n")
        sock.close()

    def gone_before_its_page() -> None:
        """Its page is written after it closed: the first write draws an RST, the next one
        EPIPE."""
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        sock.sendall(b"GET /display.mjs HTTP/1.1\r\nHost: localhost\r\n\r\n")
        sock.close()

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "pokdeng.display"]

    try:
        with caplog.at_level(logging.WARNING, logger="pokdeng.display"):
            started = time.monotonic()
            reset_mid_request()
            wait_until(lines, 5, "the first client's line")
            # the limiter counts its interval from the line, which a busy machine may write a
            # while after the client broke off: wait from when the line was seen, never sooner
            first_line_seen = time.monotonic()
            for _ in range(3):
                gone_before_its_page()
            time.sleep(0.5)  # their threads log (or hold back) meanwhile
            assert len(lines()) == 1, lines()
            assert time.monotonic() - started < server_module.ERROR_LOG_S  # one interval
            wait_until(lambda: time.monotonic() - first_line_seen > server_module.ERROR_LOG_S,
                       10, "the interval to pass")
            reset_mid_request()
            wait_until(lambda: len(lines()) == 2, 5, "the next interval's line")
    finally:
        server.close()
    first, second = lines()
    assert "ConnectionResetError" in first, first
    held = re.search(r"\(\+(\d+) more like this since the last line\)$", second)
    assert held is not None and 1 <= int(held[1]) <= 3, second  # the broken pipes, counted
