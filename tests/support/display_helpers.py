"""Reading a dealer display as a browser does: plain HTTP requests and its Server-Sent Events
stream, on real sockets."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable
from typing import Any

from support.waiting import wait_until

#: a page's wait on the screen process (controller/service/screens/): it starts and serves at
#: nice 10, behind every other process of a busy machine (a whole test suite on two cores has
#: taken over 10 s to serve a page); the page reader's own socket timeout is the same
SCREENS_S = 30.0


def free_port() -> int:
    """A port nothing listens on now (the display binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def request(port: int, path: str, method: str = "GET", body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request; (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read()
    finally:
        conn.close()


def players_state(port: int) -> dict[str, Any]:
    """The players' state (``/players/state.json``); {} while nothing answers (a screen
    process starting or restarting)."""
    try:
        status, _, body = request(port, "/players/state.json")
    except OSError:
        return {}
    return dict(json.loads(body)) if status == 200 else {}


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """Whole messages of an SSE text as (event, JSON data); comments and ``retry:`` skipped."""
    messages = []
    for block in text.split("\n\n"):
        event, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
        if data:
            messages.append((event, json.loads("\n".join(data))))
    return messages


class SseReader:
    """A display's ``/events`` stream read on a thread: every (event, data) it was sent, and
    the raw text (what a sealing search reads)."""

    def __init__(self, port: int, path: str = "/events"):
        self.port = port
        self.status: int | None = None
        self.raw = ""
        self.messages: list[tuple[str, Any]] = []
        self.ended = False
        self._cond = threading.Condition()
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self._sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        buffer = b""
        head_done = False
        try:
            while True:
                chunk = self._sock.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                if not head_done:
                    if b"\r\n\r\n" not in buffer:
                        continue
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    with self._cond:
                        self.status = int(head.split(b" ")[1])
                    head_done = True
                *whole, buffer = buffer.split(b"\n\n")
                if whole:
                    text = "".join(part.decode() + "\n\n" for part in whole)
                    with self._cond:
                        self.raw += text
                        self.messages += parse_sse(text)
                        self._cond.notify_all()
        except OSError:
            pass
        with self._cond:
            self.ended = True
            self._cond.notify_all()

    def taken(self) -> list[tuple[str, Any]]:
        with self._cond:
            return list(self.messages)

    def wait_for(self, predicate: Callable[[list[tuple[str, Any]]], Any],
                 timeout: float = SCREENS_S, what: str = "the display stream to match") -> Any:
        return wait_until(lambda: predicate(self.taken()), timeout, what, condition=self._cond,
                          details=lambda: f"got {len(self.messages)} messages, "
                                          f"last {self.messages[-1:]!r:.300}")

    def wait_status(self, predicate: Callable[[dict[str, Any]], Any],
                    timeout: float = SCREENS_S) -> dict[str, Any]:
        """The first status view (also the one in ``state``) that matches."""
        def found(messages: list[tuple[str, Any]]) -> dict[str, Any] | None:
            for event, data in messages:
                view = data.get("status") if event == "state" else data
                if event in ("state", "status") and view and predicate(view):
                    return dict(view)
            return None
        return dict(self.wait_for(found, timeout, "a display status to match"))

    def close(self) -> None:
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(5)
