"""The display's web server: static pages, a JSON snapshot and one Server-Sent Events stream.

Why the standard library: a page on the table's own monitor needs a handful of GETs and one
push stream; ``ThreadingHTTPServer`` and SSE do that with no dependency, no build step and
no event loop of their own, and the idle cost is a few sleeping threads.

Nothing here can slow the table:

* the owner thread only *offers* (``offer_events``, and the status board's change callback):
  an append to a deque and an ``Event.set()``, never a wait;
* one feed thread turns events and status into messages and puts each into every client's
  bounded queue without waiting; a client whose queue is full (a stuck browser) is dropped;
* each connection has its own thread with a socket timeout, and connections are bounded
  (``max_clients`` streams; beyond that 503, and the server refuses more sockets than
  ``max_clients + SPARE_CONNECTIONS`` at all);
* read-only: GET only (anything else 405), request line and headers bounded together (431),
  unknown paths 404.

The stream sends the whole screen on connect (``state``), then ``status``, ``results`` and
``roadmap`` as they change, and the status again every ``HEARTBEAT_S`` of quiet: the page
notices a dead link when that heartbeat stops, and reconnects (EventSource does, and the
page's watchdog forces it). A restarted daemon is caught up from the journal's events of the
current shoe (``history``), then from the live ones.
"""

from __future__ import annotations

import http.client
import io
import json
import queue
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, cast

import structlog

from controller.display.screen import Screen, target_order
from controller.display.settings import DisplaySettings

log = structlog.get_logger("pokdeng.display")

HEARTBEAT_S = 5.0          # the status is re-sent after this much quiet: the page's keep-alive
HEALTH_POLL_S = 2.0        # how often the backends' backlog is read
CLIENT_QUEUE = 64          # messages a client may be behind before it is dropped
SOCKET_TIMEOUT_S = 10.0    # a request must arrive, and a write must go, within this
MAX_REQUEST_BYTES = 16384  # request line and headers together; a page sends well under 2 KiB
SPARE_CONNECTIONS = 8      # page and asset loads beside the streams
RETRY_MS = 1000            # EventSource reconnects after this
GONE_CHECK_S = 1.0         # an idle stream checks this often whether its browser left
INBOX_BATCHES = 10_000     # event batches the feed may be behind before it rebuilds instead

CONTENT_SECURITY_POLICY = "default-src 'self'; object-src 'none'; base-uri 'none'"
PAGES = {"/": "dealer.html", "/dealer": "dealer.html", "/scoreboard": "scoreboard.html"}
ASSETS = {"/display.css": ("display.css", "text/css; charset=utf-8"),
          "/display.mjs": ("display.mjs", "text/javascript; charset=utf-8")}

#: (version, sealed status as of now) — the status board's ``versioned_snapshot``
SnapshotSource = Callable[[], tuple[int, dict[str, Any]]]


def sse(event: str, data: Any) -> bytes:
    """One Server-Sent Events message (JSON data on one line)."""
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def asset(name: str) -> bytes:
    return resources.files("controller.display").joinpath("static", name).read_bytes()


class _Stream:
    """One SSE client: a bounded queue of messages; None tells its thread to end."""

    def __init__(self) -> None:
        self.queue: queue.Queue[bytes | None] = queue.Queue(CLIENT_QUEUE)
        self.dropped = False

    def offer(self, message: bytes) -> bool:
        try:
            self.queue.put_nowait(message)
            return True
        except queue.Full:
            self.dropped = True
            return False

    def end(self) -> None:
        try:
            self.queue.put_nowait(None)
        except queue.Full:
            self.dropped = True  # its thread sees it at the next timeout


class DisplayServer:
    """Serves the screens; ``start()`` then ``close()`` (idempotent)."""

    def __init__(self, settings: DisplaySettings, snapshot: SnapshotSource, *,
                 rate: float = 1.0,
                 history: Callable[[], list[dict[str, Any]]] | None = None,
                 backends: Callable[[], Mapping[str, Any]] | None = None):
        self.settings = settings
        self._snapshot_source = snapshot
        self._rate = rate  # real seconds per table second (the demo runs faster)
        self._history = history
        self._backends_source = backends
        self._backends: Mapping[str, Any] = {}
        self._screen = Screen()
        self._inbox: deque[list[dict[str, Any]]] = deque()
        self._resync = False
        self._wake = threading.Event()
        self._status_dirty = True
        self._closed = threading.Event()
        self._lock = threading.Lock()  # guards _streams and _state
        self._streams: set[_Stream] = set()
        self._state: dict[str, Any] = {}  # the whole screen, as a new page is sent it first
        self._httpd: _HTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self.dropped_clients = 0

    # -- the owner thread's side: never waits -------------------------------------------------
    def offer_events(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        if len(self._inbox) >= INBOX_BATCHES:
            # The feed thread is far behind (it should never be): stop queueing and have it
            # rebuild from the journal, which holds every event handed over here.
            self._resync = True
        else:
            self._inbox.append(events)
        self._wake.set()

    def status_changed(self) -> None:
        self._status_dirty = True
        self._wake.set()

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = self.settings.host
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{self.port}/"

    def start(self) -> None:
        """Bind (raises OSError: the caller names the listen address), then serve; the feed
        thread loads the history before it takes live events."""
        self._httpd = _HTTPServer(self)
        self._render_all()
        for name, target in (("display-feed", self._feed), ("display-http", self._serve)):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        log.info("display ready", url=self.url, max_clients=self.settings.max_clients)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._lock:
            for stream in self._streams:
                stream.end()
        for thread in self._threads:
            thread.join(2.0)

    def _serve(self) -> None:
        assert self._httpd is not None
        self._httpd.serve_forever(poll_interval=0.5)

    # -- the feed thread ----------------------------------------------------------------------
    def _load_history(self) -> None:
        if self._history is None:
            return
        try:
            events = self._history()
        except Exception as exc:  # a screen without history still shows the table
            log.warning("display cannot read the shoe's events; the roadmap starts empty",
                        error=str(exc))
            return
        for event in events:
            self._screen.apply(event)

    def _feed(self) -> None:
        self._catch_up()
        last_status = last_health = time.monotonic()
        while not self._closed.is_set():
            self._wake.wait(min(HEARTBEAT_S, HEALTH_POLL_S))
            self._wake.clear()
            if self._closed.is_set():
                return
            try:
                last_status, last_health = self._feed_once(last_status, last_health)
            except Exception:  # the screens must outlive any one bad message
                log.exception("display feed failed; carrying on")
                self._status_dirty = True

    def _catch_up(self) -> None:
        """The shoe so far from the history, then whatever arrived live meanwhile (live events
        the history already holds are skipped by seq); the whole screen to every page."""
        self._resync = False
        if self._history is not None:  # without one, the inbox is all there is: keep it
            self._inbox.clear()
            self._screen = Screen()
            self._load_history()
        self._take_events()
        self._poll_backends()
        for message in (self._render_results(), self._render_roadmap(), self._render_status()):
            self._broadcast(message)

    def _feed_once(self, last_status: float, last_health: float) -> tuple[float, float]:
        now = time.monotonic()
        if self._resync:
            self._catch_up()
            return now, now
        if now - last_health >= HEALTH_POLL_S:
            last_health = now
            if self._poll_backends():
                self._status_dirty = True
        changed = self._take_events()
        if "results" in changed:
            self._broadcast(self._render_results())
        if "roadmap" in changed:
            self._broadcast(self._render_roadmap())
        if self._status_dirty or now - last_status >= HEARTBEAT_S:
            last_status = now
            self._broadcast(self._render_status())
        return last_status, last_health

    def _take_events(self) -> set[str]:
        changed: set[str] = set()
        while self._inbox:
            for event in self._inbox.popleft():
                changed |= self._screen.apply(event)
        for problem in self._screen.problems:
            log.warning("display: roadmap refused an event", problem=problem)
        self._screen.problems.clear()
        return changed

    def _poll_backends(self) -> bool:
        if self._backends_source is None:
            return False
        try:
            backends = dict(self._backends_source())
        except Exception as exc:
            backends = {"backend": {"error": str(exc)}}
        changed = backends != self._backends
        self._backends = backends
        return changed

    def _render_status(self) -> bytes:
        self._status_dirty = False
        _, status = self._snapshot_source()
        view = self._screen.view(status, self._backends, self._rate)
        with self._lock:
            self._state["status"] = view
        return sse("status", view)

    def _render_results(self) -> bytes:
        results = self._screen.results_message()
        with self._lock:
            self._state["results"] = results
        return sse("results", results)

    def _render_roadmap(self) -> bytes:
        roadmap = self._screen.roadmap_message()
        with self._lock:
            self._state["roadmap"] = roadmap
        return sse("roadmap", roadmap)

    def _render_all(self) -> None:
        self._poll_backends()
        self._render_results()
        self._render_roadmap()
        self._render_status()
        with self._lock:
            self._state["seats"] = target_order()

    def _broadcast(self, message: bytes) -> None:
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            if not stream.offer(message):
                self._drop(stream)

    def _drop(self, stream: _Stream) -> None:
        with self._lock:
            if stream not in self._streams:
                return
            self._streams.discard(stream)
            self.dropped_clients += 1
        log.warning("display client dropped: it took none of the last messages",
                    queued=CLIENT_QUEUE)

    # -- the connections' side ----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The whole screen now (``/state.json`` and the stream's first message)."""
        with self._lock:
            return dict(self._state)

    def open_stream(self) -> _Stream | None:
        """A new stream with the whole screen queued first; None when the streams are full."""
        with self._lock:
            if len(self._streams) >= self.settings.max_clients or self._closed.is_set():
                return None
            stream = _Stream()
            stream.offer(f"retry: {RETRY_MS}\n\n".encode() + sse("state", self._state))
            self._streams.add(stream)
            return stream

    def close_stream(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.discard(stream)

    @property
    def streams(self) -> int:
        with self._lock:
            return len(self._streams)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 32

    def __init__(self, display: DisplayServer):
        self.display = display
        self._connections = threading.BoundedSemaphore(
            display.settings.max_clients + SPARE_CONNECTIONS)
        host = display.settings.host
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, display.settings.port), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # One thread per connection, but never more than the bound: beyond it, close at once.
        if not self._connections.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connections.release()


class _BoundedReader:
    """A request's reader that refuses to read past MAX_REQUEST_BYTES in all: the standard
    library alone allows a 64 KiB request line and a hundred 64 KiB header lines."""

    def __init__(self, raw: Any):
        self._raw = raw
        self._left = MAX_REQUEST_BYTES

    def readline(self, size: int = -1) -> bytes:
        if self._left <= 0:
            raise http.client.LineTooLong(f"request over {MAX_REQUEST_BYTES} bytes")
        limit = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line: bytes = self._raw.readline(limit)
        self._left -= len(line)
        if self._left < 0:
            raise http.client.LineTooLong(f"request over {MAX_REQUEST_BYTES} bytes")
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    timeout = SOCKET_TIMEOUT_S
    server_version = "pokdeng-display"
    sys_version = ""
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the daemon's log is for the table; a page load is not news

    def setup(self) -> None:
        super().setup()
        self.rfile = cast(io.BufferedIOBase, _BoundedReader(self.rfile))  # it reads as one
        # What send_error needs if the request line itself is refused.
        self.command, self.request_version, self.requestline = "", "HTTP/1.0", ""

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except http.client.LineTooLong:  # the request line (headers are refused by the base)
            self.close_connection = True
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request too large")

    def __getattr__(self, name: str) -> Any:
        # BaseHTTPRequestHandler answers a method it has no do_X for with 501; this screen is
        # read-only, so every method but GET is 405 Method Not Allowed.
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "GET")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        display = self.server.display
        if path in PAGES:
            self._send(asset(PAGES[path]), "text/html; charset=utf-8")
        elif path in ASSETS:
            name, kind = ASSETS[path]
            self._send(asset(name), kind)
        elif path == "/state.json":
            self._send(json.dumps(display.state()).encode(), "application/json")
        elif path == "/roadmap.svg":
            roadmap = display.state().get("roadmap") or {}
            self._send(str(roadmap.get("svg") or "").encode(), "image/svg+xml")
        elif path == "/events":
            self._stream(display)
        else:
            self.send_error(HTTPStatus.NOT_FOUND)

    def _client_gone(self) -> bool:
        """The browser closed its end (a page reload, a kiosk restart): free its slot now
        rather than at the next failed write."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True

    def end_headers(self) -> None:
        # Everything the page uses comes from here: no script, style or font from elsewhere.
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def _send(self, body: bytes, kind: str) -> None:
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, display: DisplayServer) -> None:
        stream = display.open_stream()
        if stream is None:
            self.send_error(HTTPStatus.SERVICE_UNAVAILABLE, "too many screens connected")
            return
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.flush()
            while not stream.dropped:
                try:
                    message = stream.queue.get(timeout=GONE_CHECK_S)
                except queue.Empty:
                    if self._client_gone():
                        return
                    continue
                if message is None:
                    return
                self.wfile.write(message)
                self.wfile.flush()
        except OSError:
            return  # the browser went away, or took nothing for SOCKET_TIMEOUT_S
        finally:
            display.close_stream(stream)
