"""The display's web server: static pages, a JSON snapshot and one Server-Sent Events stream.

Why the standard library: a page on the table's own monitor needs a handful of GETs and one
push stream; ``ThreadingHTTPServer`` and SSE do that with no dependency, no build step and
no event loop of their own, and the idle cost is a few sleeping threads. What the pages are
sent, and how the table hands it over without waiting, is ``controller/display/feed.py``.

Bounded and read-only: each connection has its own thread with a socket timeout; at most
``max_clients`` streams (beyond that 503) and ``max_clients + SPARE_CONNECTIONS`` sockets at
all, handed out so that no client can starve the dealer's screen (``admission.py``); a request
must be in whole within ``REQUEST_DEADLINE_S``; GET only (anything else 405); request line
and headers bounded together (431); unknown paths 404; a request for a host name the table is
not reached by is refused (421: DNS rebinding), and one that does not name exactly one host
(two Host headers, none on HTTP/1.1, ``localhost:80@evil``, a port above 65535, HTTP/0.9) is a
400; HTTP/2.0 and later a 505, with a status line as every refusal. A client
that goes away mid-answer costs one log line at most per ``ERROR_LOG_S``, never a traceback.

Why still the standard library: what starves a server here is its policy (who holds the
threads and for how long), not its parsing; an asyncio server would hold no thread per client
but still needs the same deadlines and admission, and would bring an event loop into a daemon
whose other parts are threads. The policy is ``admission.py``; the figures are in
docs/benchmarks.md (display part).
"""

from __future__ import annotations

import http.client
import io
import ipaddress
import logging
import queue
import re
import select
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, cast

import structlog

from controller.display.admission import Admission, Connection
from controller.display.feed import DEALER, PLAYERS, SETTLE_S, DisplayFeed, SnapshotSource
from controller.display.settings import DisplaySettings
from controller.rate_limited_log import RateLimitedLog

log = structlog.get_logger("pokdeng.display")

SOCKET_TIMEOUT_S = 10.0    # a write must go within this
REQUEST_DEADLINE_S = 5.0   # the request line and headers, in whole, within this of the accept
ERROR_LOG_S = 10.0         # a client that broke its connection: one log line per this, counted
MAX_REQUEST_BYTES = 16384  # request line and headers together; a page sends well under 2 KiB
SPARE_CONNECTIONS = 8      # page and asset loads beside the streams
GONE_CHECK_S = 1.0         # an idle stream checks this often whether its browser left

CONTENT_SECURITY_POLICY = "default-src 'self'; object-src 'none'; base-uri 'none'"
PAGES = {"/": "dealer.html", "/dealer": "dealer.html", "/scoreboard": "scoreboard.html",
         "/overlay": "overlay.html"}
ASSETS = {"/display.css": ("display.css", "text/css; charset=utf-8"),
          "/display.mjs": ("display.mjs", "text/javascript; charset=utf-8"),
          "/players.mjs": ("players.mjs", "text/javascript; charset=utf-8")}


def asset(name: str) -> bytes:
    return resources.files("controller.display").joinpath("static", name).read_bytes()


class DisplayServer:
    """Serves the screens from a ``DisplayFeed``; ``start()`` then ``close()`` (idempotent)."""

    def __init__(self, settings: DisplaySettings, snapshot: SnapshotSource, *,
                 rate: float = 1.0,
                 history: Callable[[], list[dict[str, Any]]] | None = None,
                 backends: Callable[[], Mapping[str, Any]] | None = None,
                 listening: socket.socket | None = None,
                 live: Callable[[], bool] | None = None, settle_s: float = SETTLE_S):
        self.settings = settings
        self.feed = DisplayFeed(snapshot, max_streams=settings.max_clients, rate=rate,
                                history=history, backends=backends, live=live,
                                settle_s=settle_s, studio=settings.studio)
        #: a socket already listening at ``settings.listen`` (the daemon's, handed to the
        #: screen process), served instead of binding one
        self._listening = listening
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._closed = False

    # the owner thread's side: never waits (DisplayFeed)
    def offer_events(self, events: list[dict[str, Any]]) -> None:
        self.feed.offer_events(events)

    def status_changed(self) -> None:
        self.feed.status_changed()

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
        """Bind (raises OSError: the caller names the listen address), then serve."""
        self._httpd = _HTTPServer(self.settings, self.feed, self._listening)
        self.feed.start()
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.5,),
                                        name="display-http", daemon=True)
        self._thread.start()
        log.info("display ready", url=self.url, max_clients=self.settings.max_clients)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        self.feed.close()
        if self._thread is not None:
            self._thread.join(2.0)


def listening_socket(settings: DisplaySettings) -> socket.socket:
    """A socket listening where ``settings`` say, as the server binds its own (raises
    OSError): the daemon holds it and hands it to each screen process it starts, so a
    restarted one serves the same address and a page that reconnects meanwhile waits in its
    backlog."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((settings.host, settings.port))
        sock.listen(_HTTPServer.request_queue_size)
    except OSError:
        sock.close()
        raise
    return sock


def host_names(settings: DisplaySettings) -> frozenset[str]:
    """The names a request may ask for besides any IP address: localhost, this machine's
    host name and ``display.allowed_hosts``. Not ``getfqdn()``: it asks DNS, and a table PC
    whose resolver does not answer would wait for it before READY (a fully qualified name
    goes in ``display.allowed_hosts``)."""
    names = {"localhost", socket.gethostname(), *settings.allowed_hosts}
    return frozenset(name.lower().rstrip(".") for name in names if name)


#: RFC 9112 §3.2 / RFC 3986 §3.2.2: Host = uri-host [ ":" port ]; uri-host an IPv6 literal
#: in brackets or a reg-name (an IPv4 address is one), port digits (maybe none)
_HOST_VALUE = re.compile(r"(?:\[(?P<literal>[0-9A-Fa-f:.]+)\]"
                         r"|(?P<name>(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*))"
                         r"(?::(?P<port>[0-9]*))?")
HIGHEST_PORT = 65535


def host_problem(version: str, values: list[str]) -> str | None:
    """Why a request's Host header fields are not one host (a 400, RFC 9112 §3.2), or None.
    Two Host fields, or one with more than a host and port (``localhost:80@evil``), would
    leave which host was meant to whoever reads them: this server, a proxy, the browser."""
    if len(values) > 1:
        return "more than one Host header"
    if not values:
        # HTTP/1.0 may leave it out (scripts, curl -0); a browser never does
        return "no Host header (HTTP/1.1 requires one)" if version != "HTTP/1.0" else None
    if request_host(values[0]) is None:
        return "the Host header is not a host name or address and a port"
    return None


def request_host(value: str) -> str | None:
    """The host a Host field value names (lower case; no brackets, no port), or None when
    the value is not ``host[:port]``."""
    found = _HOST_VALUE.fullmatch(value.strip(" \t"))
    if found is None or not _is_port(found["port"]):
        return None
    literal = found["literal"]
    if literal is None:
        return str(found["name"]).lower()
    try:
        return str(ipaddress.IPv6Address(literal))
    except ValueError:
        return None


def _is_port(digits: str | None) -> bool:
    """None or empty (no port: the scheme's) or a TCP port; 99999 names no port, so no host
    (the length first: a 5,000-digit port is not even read as a number)."""
    return not digits or (len(digits) <= len(str(HIGHEST_PORT)) and int(digits) <= HIGHEST_PORT)


def host_allowed(header: str | None, names: frozenset[str]) -> bool:
    """Whether a request's ``Host`` (one well-formed value: ``host_problem``) is the table's:
    an IP address (a rebinding attack needs a name of its own) or one of ``names``. No header
    (HTTP/1.0 tools): not a browser."""
    if header is None:
        return True
    host = request_host(header)
    if host is None:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return host.rstrip(".") in names


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 32

    def __init__(self, settings: DisplaySettings, feed: DisplayFeed,
                 listening: socket.socket | None = None):
        self.feed = feed
        self.admission = Admission(settings.max_clients + SPARE_CONNECTIONS,
                                   settings.max_clients)
        self.host_names = host_names(settings)
        self._errors = RateLimitedLog(logging.getLogger("pokdeng.display"), ERROR_LOG_S)
        self.address_family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        if listening is None:
            super().__init__((settings.host, settings.port), _Handler)
        else:
            # the daemon's socket as it is, without one made and closed first: the screen
            # process may make no socket at all (screens/syscall_filter.py)
            socketserver.BaseServer.__init__(self, listening.getsockname(), _Handler)
            self.socket = listening

    def process_request(self, request: Any, client_address: Any) -> None:
        # One thread per connection, but never more than the bound: beyond it, room is made
        # by closing the oldest connection still sending its request, or the newcomer goes.
        victims = self.admission.connect(request, str(client_address[0]))
        if victims is None:
            self.shutdown_request(request)
            return
        for victim in victims:
            self.end(victim)
        try:
            super().process_request(request, client_address)
        except Exception:
            self.admission.close(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.admission.close(request)

    def end(self, connection: Connection) -> None:
        """Close a connection the admission dropped: its thread sees the socket shut."""
        if connection.stream is not None:
            self.feed.close_stream(connection.stream)
            connection.stream.end()
        try:
            connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already gone

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that broke off (a reset, a broken pipe): one line per ERROR_LOG_S for all
        of them, whatever the way, with the count of those held back (one key: an attacker
        alternating the ways gets no more lines); no traceback on stderr (the standard
        library prints one per connection)."""
        problem = sys.exc_info()[1]
        self._errors.warning("client broke off", "display client %s: %s: %s",
                             client_address[0], type(problem).__name__, problem)


class _BoundedReader:
    """A request's reader that refuses to read past MAX_REQUEST_BYTES in all (the standard
    library alone allows a 64 KiB request line and a hundred 64 KiB header lines), nor past
    REQUEST_DEADLINE_S after the accept (its timeout is per read: a byte a second would do)."""

    def __init__(self, raw: Any, sock: socket.socket):
        self._raw = raw
        self._sock = sock
        self._left = MAX_REQUEST_BYTES
        self._deadline: float | None = time.monotonic() + REQUEST_DEADLINE_S

    def request_read(self) -> None:
        """The request is in: reads from now on are the stream's liveness checks."""
        self._deadline = None
        self._sock.settimeout(SOCKET_TIMEOUT_S)

    def readline(self, size: int = -1) -> bytes:
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"request not in within {REQUEST_DEADLINE_S:g} s")
            self._sock.settimeout(min(left, SOCKET_TIMEOUT_S))
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
    # The version an answer is given in while the request's is not known (a request line it
    # refuses: HTTP/2.0, a bad version, bad syntax). The base's HTTP/0.9 would send the error
    # page alone, with no status line or headers, which no HTTP/1 client can read.
    default_request_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the daemon's log is for the table; a page load is not news

    def setup(self) -> None:
        super().setup()
        self._reader = _BoundedReader(self.rfile, self.connection)
        self.rfile = cast(io.BufferedIOBase, self._reader)  # it reads as one
        # What send_error needs if the request line itself is refused.
        self.command, self.request_version, self.requestline = "", "HTTP/1.0", ""

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except http.client.LineTooLong:  # the request line (headers are refused by the base)
            self.close_connection = True
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request too large")

    def parse_request(self) -> bool:
        if len(self.raw_requestline.split()) == 2:
            # "GET /": HTTP/0.9, which has no headers and so no Host. Refused now, not after
            # the base waits for headers that never come (or answers with no status line).
            self.close_connection = True
            self.send_error(HTTPStatus.BAD_REQUEST, "HTTP/0.9 is not served")
            return False
        if not super().parse_request():
            return False
        problem = host_problem(self.request_version, self.headers.get_all("Host") or [])
        if problem is not None:
            self.close_connection = True
            self.send_error(HTTPStatus.BAD_REQUEST, problem)
            return False
        self._reader.request_read()
        self.server.admission.requested(self.connection)
        return True

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
        feed = self.server.feed
        if not host_allowed(self.headers.get("Host"), self.server.host_names):
            self.send_error(HTTPStatus.MISDIRECTED_REQUEST,
                            "not a name this table is reached by (display.allowed_hosts)")
        elif path in PAGES:
            self._send(asset(PAGES[path]), "text/html; charset=utf-8")
        elif path in ASSETS:
            name, kind = ASSETS[path]
            self._send(asset(name), kind)
        elif path == "/state.json":
            self._send(feed.state_json(DEALER), "application/json")
        elif path == "/players/state.json":
            self._send(feed.state_json(PLAYERS), "application/json")
        elif path == "/roadmap.svg":
            roadmap = feed.state().get("roadmap") or {}
            self._send(str(roadmap.get("svg") or "").encode(), "image/svg+xml")
        elif path == "/events":
            self._stream(feed, DEALER)
        elif path == "/players/events":  # the scoreboard's and the overlay's
            self._stream(feed, PLAYERS)
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

    def _stream(self, feed: DisplayFeed, audience: str) -> None:
        if not feed.live():
            self.send_error(HTTPStatus.SERVICE_UNAVAILABLE, "the table is not answering")
            return
        victims = self.server.admission.open_stream(self.connection, audience == DEALER)
        for victim in victims or ():
            self.server.end(victim)
        stream = feed.open_stream(audience) if victims is not None else None
        if stream is None:
            self.send_error(HTTPStatus.SERVICE_UNAVAILABLE, "too many screens connected")
            return
        self.server.admission.streaming(self.connection, stream)
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
            feed.close_stream(stream)
