"""HTTP(S) webhook transport: one signed JSON POST per batch of events.

Request (see docs/durability.md, "HTTP webhook")::

    POST <url>
    Content-Type: application/json
    Idempotency-Key: <table>:<first_seq>-<last_seq>
    X-Pokdeng-Table: <table>
    X-Pokdeng-Timestamp: <Unix seconds of this attempt>
    X-Pokdeng-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>", per-table secret>

    {"events":[<envelope>, …],"table":"<table>"}

Each attempt is signed afresh (controller/transports/signing.py), so a backend can refuse a
replay outside its time window; a retry keeps its Idempotency-Key. A plain ``http://`` url is
refused unless ``allow_insecure`` is set.

Any 2xx accepts the whole batch. 408, 429 and 5xx, timeouts and connection errors are
transient (``Retry-After`` in seconds is honoured); any other status is a refusal
(``PermanentError``: 401/403 say the backend refuses our signature). The outbox retries both,
so a backend that answers 404 for a minute gets every event once it answers 2xx again.
Backends must de-duplicate by event ``id``: after a restart a batch may re-form with other
bounds, and a reply slower than ``timeout_s`` makes the whole batch come again.

A backend whose address refused the connection (or reset it, or cannot be reached) is
probed with a plain TCP connection every second (probe.py); once one is accepted the outbox
retries at once (``came_back``) instead of at the end of its backoff. An answer (5xx, 4xx) or
a timeout is a backend that is there and failing: the backoff alone paces those retries.

A 2xx reply may ask for events again (docs/backend.md, "Catching up"): a JSON object body
with ``"resend_from": <seq>`` makes the outbox resend what it already delivered from there.

Built on the standard library's ``http.client`` rather than requests/urllib3: one keep-alive
connection, exact control of the body bytes that are signed, and no extra dependency on the
table PC.
"""

from __future__ import annotations

import errno
import http.client
import json
import logging
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from controller import __version__
from controller.bounds import external_count
from controller.transports import (
    OptionConflict,
    PermanentError,
    TransientError,
    Transport,
    TransportConfigError,
    option,
    read_secret,
)
from controller.transports.probe import ConnectProbe
from controller.transports.signing import signed_now

log = logging.getLogger("pokdeng.transports.http")


@dataclass(frozen=True)
class HttpTransportSettings:
    url: str = option(pattern=re.compile(r"^https?://[^\s/]+"),
                      what="an http:// or https:// URL")
    secret_file: str | None = option(None, secret="secret", required=True)
    ca_file: str | None = option(None, path=True)
    verify_tls: bool = True
    timeout_s: float = option(5.0, above=0, maxval=300)
    batch_max: int = option(100, minval=1, maxval=10_000)
    backoff_initial_s: float = option(0.5, above=0, maxval=60)
    backoff_max_s: float = option(30.0, above=0, maxval=3600)
    # failing this long: the table records the backend unreachable (an event)
    unreachable_after_s: float = option(30.0, above=0, maxval=3600)
    # name under $CREDENTIALS_DIRECTORY (LoadCredential=)
    secret_credential: str | None = option(None, secret="secret", required=True)
    # plain http:// only with this set: a backend on this machine or in a test
    allow_insecure: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.url, str) and self.url.lower().startswith("http://") \
                and not self.allow_insecure:
            raise OptionConflict(
                "http", "url", "plain http:// lets anyone on the network path read and alter "
                "what this table sends; use https://, or set allow_insecure: true (a backend "
                "on this machine or in a test only)")


def encode_batch(table: str, events: list[dict[str, Any]]) -> bytes:
    """The request body: the same events always give the same bytes."""
    return json.dumps({"table": table, "events": events}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def idempotency_key(table: str, events: list[dict[str, Any]]) -> str:
    return f"{table}:{events[0]['seq']}-{events[-1]['seq']}"


def _nobody_there(exc: BaseException) -> bool:
    """The backend's address took no connection (refused, reset, unreachable): something
    accepting one again is worth a retry at once. Not a timeout: a slow backend is there."""
    return isinstance(exc, ConnectionError) or \
        getattr(exc, "errno", None) in (errno.EHOSTUNREACH, errno.ENETUNREACH)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: ignore, our own backoff applies
    return seconds if seconds >= 0 else None


class HttpTransport(Transport):
    kind = "http"

    def __init__(self, settings: HttpTransportSettings, *, table: str, name: str | None = None):
        super().__init__(name)
        self.settings = settings
        self.table = table
        parts = urlsplit(settings.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TransportConfigError(
                f"http transport: url: expected http(s)://host[:port]/path, got {settings.url!r}")
        if settings.timeout_s <= 0:
            raise TransportConfigError("http transport: timeout_s must be > 0")
        if settings.batch_max < 1:
            raise TransportConfigError("http transport: batch_max must be >= 1")
        self.batch_max = settings.batch_max
        self.backoff_initial_s = settings.backoff_initial_s
        self.backoff_max_s = settings.backoff_max_s
        self.unreachable_after_s = settings.unreachable_after_s
        self._secret = read_secret("http transport: secret_file", settings.secret_file,
                                   settings.secret_credential)
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._context: ssl.SSLContext | None = None
        if self._https:
            self._context = ssl.create_default_context(cafile=settings.ca_file)
            if not settings.verify_tls:
                self._context.check_hostname = False
                self._context.verify_mode = ssl.CERT_NONE
                log.warning(
                    "TLS CERTIFICATE VERIFICATION IS OFF for %s (verify_tls: false): anyone on "
                    "the network path can read and alter what this table sends. Use ca_file "
                    "instead.", settings.url)
        elif settings.ca_file or not settings.verify_tls:
            raise TransportConfigError(
                "http transport: ca_file/verify_tls given but the url is not https")
        self._conn: http.client.HTTPConnection | None = None
        self._reused = False
        self._probe = ConnectProbe(self._host, self._port or (443 if self._https else 80),
                                   self.came_back, name=f"probe-{self.name}")

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            self._conn = self._new_connection()
        return self._conn

    def _new_connection(self) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port,
                                               timeout=self.settings.timeout_s,
                                               context=self._context)
        return http.client.HTTPConnection(self._host, self._port,
                                          timeout=self.settings.timeout_s)

    tells_held = True  # in every 2xx answer; asked with an empty batch

    def _headers(self, body: bytes, key: str) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            "Idempotency-Key": key,
            "X-Pokdeng-Table": self.table,
            **signed_now(self._secret, body),
            "User-Agent": f"pokdeng-table/{__version__}",
        }

    def ask_held(self) -> None:
        """A batch with no events, on a connection of its own (the outbox's may be busy): the
        backend answers where it stands (docs/backend.md)."""
        body = encode_batch(self.table, [])
        conn = self._new_connection()
        try:
            conn.request("POST", self._path, body=body,
                         headers=self._headers(body, f"{self.table}:held"))
            response = conn.getresponse()
            reply = response.read(65536)
        except (OSError, http.client.HTTPException) as exc:
            raise TransientError(f"POST {self.settings.url} (where do you stand?): "
                                 f"{type(exc).__name__}: {exc}") from exc
        finally:
            conn.close()
        if not 200 <= response.status < 300:
            raise TransientError(f"POST {self.settings.url} (where do you stand?) -> "
                                 f"{response.status} {response.reason}")
        if not self._note_reply(reply):
            self.report_held(None)  # it answered, and said nothing of where it stands

    def deliver(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        body = encode_batch(self.table, events)
        headers = self._headers(body, idempotency_key(self.table, events))
        try:
            try:
                response = self._post(body, headers)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                if not self._reused:
                    raise
                # The server closed an idle keep-alive connection: once more on a fresh one.
                self._drop_connection()
                response = self._post(body, headers)
            reply = response.read(65536)
            status, reason = response.status, response.reason
            retry_after = _retry_after(response.getheader("Retry-After"))
            if response.will_close:
                self._drop_connection()
        except ssl.SSLCertVerificationError as exc:
            self._drop_connection()
            raise TransientError(f"TLS certificate verification failed for {self.settings.url}: "
                                 f"{exc.verify_message}") from exc
        except (OSError, http.client.HTTPException) as exc:
            self._drop_connection()
            if _nobody_there(exc):
                self._probe.start()
            what = "timed out" if isinstance(exc, (socket.timeout, TimeoutError)) else \
                f"{type(exc).__name__}: {exc}"
            raise TransientError(f"POST {self.settings.url} {what}") from exc
        if 200 <= status < 300:
            self._note_reply(reply)
            return
        excerpt = reply[:200].decode("utf-8", "replace").strip()
        message = f"POST {self.settings.url} -> {status} {reason}" + (
            f": {excerpt}" if excerpt else "")
        if status in (408, 429) or status >= 500:
            raise TransientError(message, retry_after)
        if status in (401, 403):
            raise PermanentError(f"backend refuses our signature: check the secret "
                                 f"(secret_file/secret_credential) against the backend's; "
                                 f"{message}")
        raise PermanentError(message)

    def _note_reply(self, reply: bytes) -> bool:
        """A 2xx body may say where the backend stands (``held``) and ask for events again
        (``resend_from``); any other body (or none) is just an acknowledgement. True when it
        said where it stands."""
        if b"resend_from" not in reply and b"held" not in reply:
            return False
        try:
            answer = json.loads(reply)
            if not isinstance(answer, dict):
                raise ValueError("not an object")
        except ValueError:
            log.warning("http %s: reply mentions resend_from or held but is not a JSON "
                        "object; ignored", self.settings.url)
            return False
        if "resend_from" in answer:
            self._note_resend_request(answer["resend_from"])
        if "held" in answer:
            if answer["held"] is None:
                # null is no position: not "nothing to compare", which would let its events
                # go unchecked; the guard refuses it like any unreadable answer
                log.warning("http %s: held: null is not where a backend stands (docs/backend.md)",
                            self.settings.url)
                self.report_held({"seq": None})
            else:
                self.report_held(answer["held"])
            return True
        return False

    def _note_resend_request(self, value: Any) -> None:
        """``{"resend_from": N}`` asks for the events from seq N again."""
        try:
            asked = external_count(value, "resend_from", minimum=1)
        except ValueError as exc:
            log.warning("http %s: %s; ignored", self.settings.url, exc)
            return
        log.info("http %s: backend asks to resend from seq %d", self.settings.url, asked)
        self.request_resend(asked)

    def _post(self, body: bytes, headers: dict[str, str]) -> http.client.HTTPResponse:
        self._reused = self._conn is not None
        conn = self._connection()
        conn.request("POST", self._path, body=body, headers=headers)
        return conn.getresponse()

    def _drop_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
            self._conn = None

    def _close(self) -> None:
        self._probe.close()
        self._drop_connection()
