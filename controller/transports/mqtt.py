"""MQTT transport (paho-mqtt 2.x): one QoS 1 message per event, a retained status, a last will.

Topics (``<prefix>`` defaults to ``pokdeng``)::

    <prefix>/<table>/events   each event's envelope as JSON, QoS 1, not retained, in seq order
    <prefix>/<table>/status   retained: {"state": "online", …} on every connect;
                              {"state": "offline", "reason": …} as the last will (connection
                              lost) and on a clean shutdown
    <prefix>/<table>/resend   subscribed: a backend publishes {"from_seq": N} to get the events
                              from seq N again (docs/backend.md, "Catching up")
    <prefix>/<table>/held     subscribed: where the backend stands, retained (docs/backend.md,
                              "Where the backend stands"): handed to ``report_held``

With a secret (protocol 5 only), each event message carries MQTT 5 user properties
``x-pokdeng-timestamp`` and ``x-pokdeng-signature``: the HTTP signature (signing.py) over the
exact payload bytes. TLS is on when ``tls`` is true, or left unset and the port is 8883.

An event counts as delivered only once the broker's PUBACK for it has arrived and, on MQTT 5,
says someone takes it: a PUBACK "No matching subscribers" (reason 16: the backend's session is
gone, e.g. a broker restarted without persistence) keeps the event and retries, and the status
says "no subscriber". A connection loss shows in ``problem()`` at once. paho's network
thread reconnects on its own; while disconnected, ``deliver`` raises ``TransientError`` and the
outbox retries. Messages whose PUBACK did not arrive in time stay queued in paho and are
re-sent on reconnect (with their first timestamp and signature); the next ``deliver`` of the
same seq waits for that message instead of publishing another copy. A connection counts as up
only from the SUBACK of its resend subscription: by then paho has sent again what it holds, so
no new event overtakes them. From then on the outbox retries at once (``came_back``), even
in the middle of a backoff: a broker that is back gets the backlog without waiting; and
paho tries to reconnect every ``reconnect_min_s`` doubling up to ``reconnect_max_s`` (0.5 s,
1 s: a connection attempt to a broker that is down costs nearly nothing), so the table notices
a broker that is back within about a second.

Up to ``in_flight_batches`` batches are on the way at once (``submit``; the outbox settles
them oldest first): one connection keeps them in order, and a batch counts as delivered only
once all its PUBACKs are in. When one fails, the outbox starts again from the first event not
yet delivered; a refused batch and every batch after it are published anew, so each event's
first copy still reaches a subscriber in seq order.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller import __version__
from controller.bounds import external_count
from controller.rate_limited_log import RateLimitedLog
from controller.transports import (
    NO_POSITION,
    OptionConflict,
    PermanentError,
    TransientError,
    Transport,
    TransportConfigError,
    option,
    read_secret,
)
from controller.transports.signing import signed_now

#: the port IANA assigned to MQTT over TLS: ``tls`` left unset means on there, off elsewhere
MQTT_TLS_PORT = 8883

log = logging.getLogger("pokdeng.transports.mqtt")

#: how long after the held subscription's SUBACK its retained message has surely come if the
#: broker has one (the broker sends it right behind the SUBACK, on the same connection)
HELD_SILENCE_S = 0.5

#: MQTT 5 PUBACK reason "No matching subscribers": the broker took the message but no one will
NO_MATCHING_SUBSCRIBERS = 16
#: the longest resend request read (a backend sends {"from_seq": N})
RESEND_REQUEST_MAX_BYTES = 200


class NoSubscriber(TransientError):
    """The broker acknowledged an event that no subscriber matched: not delivered."""

    state = "no subscriber"


# CONNACK answers that retrying will not fix (3.1.1 codes 4/5; MQTT 5 0x86, 0x87, 0x8C).
_REFUSED_FOR_GOOD = {"Bad user name or password", "Not authorized", "Bad authentication method",
                     "Client identifier not valid", "Unsupported protocol version"}


@dataclass(frozen=True)
class MqttTransportSettings:
    host: str = option()
    port: int = option(1883, minval=1, maxval=65535)
    topic_prefix: str = option("pokdeng", pattern=re.compile(r"^[^#+\s]+$"),
                               what="an MQTT topic without wildcards or spaces")
    tls: bool | None = None   # None: on when port is 8883
    ca_file: str | None = option(None, path=True)
    username: str | None = None
    password_file: str | None = option(None, secret="password")
    password_credential: str | None = option(None, secret="password")  # LoadCredential= name
    client_id: str | None = None
    # the health topic's connection logs in as this user (default <username>-health): on the
    # studio broker a login is its client id (use_username_as_clientid), so the table's two
    # connections need two logins, or each would throw the other off
    health_username: str | None = None
    keepalive: int = option(30, minval=5, maxval=3600)
    # how long the broker keeps the table's session (its QoS 1 subscription to the resend
    # topic, and the requests queued in it) while the table is away: a resend asked while the
    # table is off waits for it (MQTT 5 Session Expiry Interval; on 3.1.1 the broker's
    # persistent_client_expiration decides)
    session_expiry_s: int = option(7 * 86400, minval=0, maxval=0xFFFFFFFE)
    protocol: str = option("3.1.1", choices=("3.1.1", "5"))
    publish_timeout_s: float = option(10.0, above=0, maxval=300)  # the PUBACKs of one batch
    # batches published before the oldest one's PUBACKs are in (each counted delivered only
    # once they are): a backlog after an outage goes out without a round trip per batch
    in_flight_batches: int = option(4, minval=1, maxval=64)
    connect_timeout_s: float = option(5.0, above=0, maxval=300)   # deliver waits to (re)connect
    # paho's reconnect delay, doubling from min to max: how soon a broker back is noticed
    reconnect_min_s: float = option(0.5, above=0, maxval=3600)
    reconnect_max_s: float = option(1.0, above=0, maxval=3600)
    batch_max: int = option(100, minval=1, maxval=10_000)
    backoff_initial_s: float = option(0.5, above=0, maxval=60)
    backoff_max_s: float = option(30.0, above=0, maxval=3600)
    # failing this long: the table records the backend unreachable (an event)
    unreachable_after_s: float = option(30.0, above=0, maxval=3600)
    # the HMAC secret that signs each event message (MQTT 5 user properties)
    secret_file: str | None = option(None, secret="secret")
    secret_credential: str | None = option(None, secret="secret")  # LoadCredential= name

    @property
    def use_tls(self) -> bool:
        return self.tls if self.tls is not None else self.port == MQTT_TLS_PORT

    def __post_init__(self) -> None:
        if (self.secret_file or self.secret_credential) and self.protocol != "5":
            raise OptionConflict(
                "mqtt", "protocol", "signed messages carry their signature as MQTT 5 user "
                'properties: set protocol: "5" (or give no secret_file/secret_credential)')
        if self.ca_file and not self.use_tls:
            raise OptionConflict("mqtt", "ca_file", f"given but TLS is off (tls is false, or "
                                 f"unset with a port other than {MQTT_TLS_PORT})")


def health_login(settings: MqttTransportSettings) -> str | None:
    """The user the health topic's connection logs in as (None: the broker takes anyone)."""
    if settings.health_username:
        return settings.health_username
    return f"{settings.username}-health" if settings.username else None


def new_client(settings: MqttTransportSettings, client_id: str, logger: str,
               username: str | None = None, persistent: bool = False) -> mqtt.Client:
    """A paho client for the table's broker account: protocol, password and TLS from
    ``settings``; the login is ``username``, or the settings' (the events' connection).
    ``persistent``: MQTT 3.1.1 ``clean_session`` false (MQTT 5 says it when connecting:
    ``start_connecting``)."""
    protocol = mqtt.MQTTv5 if settings.protocol == "5" else mqtt.MQTTv311
    if protocol == mqtt.MQTTv5:
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=protocol)
    else:
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=protocol,
                             clean_session=not persistent)
    client.enable_logger(logging.getLogger(logger))
    if settings.username:
        password = None
        if settings.password_file or settings.password_credential:
            password = read_secret("mqtt transport: password_file", settings.password_file,
                                   settings.password_credential).decode("utf-8")
        client.username_pw_set(username or settings.username, password)
    elif settings.password_file or settings.password_credential:
        raise TransportConfigError("mqtt transport: password_file given without username")
    if settings.use_tls:
        try:
            client.tls_set(ca_certs=settings.ca_file)
        except (OSError, ValueError) as exc:
            raise TransportConfigError(f"mqtt transport: ca_file: {exc}") from None
    # paho annotates whole seconds, but only compares, doubles and sleeps on the delays: the
    # settings' fractions of a second reach it as given
    client.reconnect_delay_set(settings.reconnect_min_s,  # type: ignore[arg-type]
                               settings.reconnect_max_s)  # type: ignore[arg-type]
    return client


def start_connecting(client: mqtt.Client, settings: MqttTransportSettings,
                     persistent: bool = False) -> None:
    """Connect in paho's network thread, which also reconnects for ever. ``persistent``: on
    MQTT 5, resume the client's session and ask the broker to keep it ``session_expiry_s``
    after a disconnect (3.1.1: ``new_client``'s clean_session)."""
    extra: dict[str, Any] = {}
    if persistent and settings.protocol == "5":
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = settings.session_expiry_s
        extra = {"clean_start": False, "properties": properties}
    try:
        client.connect_async(settings.host, settings.port, keepalive=settings.keepalive,
                             **extra)
    except (OSError, ValueError) as exc:
        raise TransportConfigError(
            f"mqtt transport: {settings.host}:{settings.port}: {exc}") from exc
    client.loop_start()


def stop_client(client: mqtt.Client) -> None:
    """Disconnect and end paho's network thread, on an orderly stop. paho 2.x's network loop
    may take one more turn after the DISCONNECT closed its socket and log an ERROR "Client is
    not connected": on a stop nothing is wrong, so its logger is off from here."""
    client.disable_logger()
    client.disconnect()
    client.loop_stop()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _payload(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class MqttTransport(Transport):
    kind = "mqtt"

    def __init__(self, settings: MqttTransportSettings, *, table: str, name: str | None = None):
        super().__init__(name)
        self.settings = settings
        self.table = table
        if not settings.host:
            raise TransportConfigError("mqtt transport: host is empty")
        if not 0 < settings.port < 65536:
            raise TransportConfigError(f"mqtt transport: port {settings.port} out of range")
        if settings.protocol not in ("3.1.1", "5"):
            raise TransportConfigError(
                f"mqtt transport: protocol must be \"3.1.1\" or \"5\", got {settings.protocol!r}")
        if "/" in table or "+" in table or "#" in table:
            raise TransportConfigError(
                f"mqtt transport: table id {table!r} cannot be a topic level")
        self.batch_max = settings.batch_max
        self.backoff_initial_s = settings.backoff_initial_s
        self.backoff_max_s = settings.backoff_max_s
        self.unreachable_after_s = settings.unreachable_after_s
        self.window = settings.in_flight_batches
        prefix = settings.topic_prefix.strip("/")
        self.events_topic = f"{prefix}/{table}/events"
        self.status_topic = f"{prefix}/{table}/status"
        self.resend_topic = f"{prefix}/{table}/resend"
        self.held_topic = f"{prefix}/{table}/held"
        self._held_came = threading.Event()
        self.client_id = settings.client_id or f"pokdeng-table-{table}"
        # resend requests come from the network: a flood of them is one line per 5 s
        self._requests_log = RateLimitedLog(log)

        self._connected = threading.Event()
        self._lock = threading.Lock()
        self._last_problem = "not connected yet"
        self._refused_for_good: str | None = None
        self._inflight: dict[int, mqtt.MQTTMessageInfo] = {}
        self._refused_mids: dict[int, Any] = {}  # mid -> a PUBACK reason that is not delivery
        self._resend_subscription: int | None = None  # the mid of this connection's SUBSCRIBE
        self._publishing = threading.Lock()  # a batch's publishes, or the connection's loss
        self._since = _now_iso()

        # A persistent session: the broker keeps the resend subscription while the table is
        # away, and queues the requests made meanwhile for its next connection.
        client = new_client(settings, self.client_id, "pokdeng.transports.mqtt.paho",
                            persistent=True)
        self._secret: bytes | None = None
        if settings.secret_file or settings.secret_credential:
            self._secret = read_secret("mqtt transport: secret_file", settings.secret_file,
                                       settings.secret_credential)
        client.will_set(self.status_topic, _payload(self._offline("connection lost")),
                        qos=1, retain=True)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_connect_fail = self._on_connect_fail
        client.on_subscribe = self._on_subscribe
        client.on_publish = self._on_publish
        client.message_callback_add(self.resend_topic, self._on_resend_request)
        client.message_callback_add(self.held_topic, self._on_held)
        # paho holds back QoS 1 messages past 20 unacknowledged: let every event of the
        # batches on the way go out (the broker's own receive maximum still applies).
        client.max_inflight_messages_set(settings.batch_max * settings.in_flight_batches)
        self._client = client
        start_connecting(client, settings, persistent=True)

    def network_thread(self) -> threading.Thread | None:
        # paho's network loop (loop_start) sends every PUBLISH and reads every PUBACK; paho
        # keeps it as ``_thread`` and has no public name for it
        thread = getattr(self._client, "_thread", None)
        return thread if isinstance(thread, threading.Thread) else None

    # -- status ----------------------------------------------------------------------------------
    def _online(self) -> dict[str, Any]:
        return {"state": "online", "table": self.table, "client_id": self.client_id,
                "since": self._since, "connected_at": _now_iso(),
                "software": f"pokdeng-table/{__version__}"}

    def _offline(self, reason: str) -> dict[str, Any]:
        return {"state": "offline", "table": self.table, "client_id": self.client_id,
                "reason": reason}

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: mqtt.ConnectFlags,
                    reason_code: ReasonCode, properties: Properties | None) -> None:
        if reason_code.is_failure:
            text = str(reason_code)
            with self._lock:
                self._last_problem = f"broker refused the connection: {text}"
                if text in _REFUSED_FOR_GOOD:
                    self._refused_for_good = text
            log.error("mqtt %s:%s refused the connection: %s", self.settings.host,
                      self.settings.port, text)
            return
        client.publish(self.status_topic, _payload(self._online()), qos=1, retain=True)
        # Events may go out only from the SUBACK on: paho sends again the events it still
        # holds (published, no PUBACK) after this callback returns, and an event published
        # before that would overtake them on the wire.
        _, mid = client.subscribe([(self.resend_topic, 1), (self.held_topic, 1)])
        with self._lock:
            self._refused_for_good = None
            self._resend_subscription = mid
            self._last_problem = "connected; waiting for the broker to acknowledge the " \
                                 "resend subscription"

    def _on_subscribe(self, client: mqtt.Client, userdata: Any, mid: int,
                      reason_codes: list[ReasonCode], properties: Properties | None) -> None:
        with self._lock:
            if mid != self._resend_subscription:
                return
        for topic, code, why in zip(
                (self.resend_topic, self.held_topic), reason_codes,
                ("a backend's resend requests cannot reach this table",
                 "where the backend stands cannot reach this table"), strict=False):
            if code.is_failure:
                log.warning("mqtt %s: the broker refused the subscription (%s): %s (check the "
                            "broker's ACL)", topic, code, why)
        self._connected.set()
        # A retained position comes right behind the SUBACK; its absence is told too.
        self._held_came = came = threading.Event()
        timer = threading.Timer(HELD_SILENCE_S, self._held_silence, args=(came,))
        timer.daemon = True
        timer.start()
        log.info("mqtt connected to %s:%s as %s", self.settings.host, self.settings.port,
                 self.client_id)
        self.came_back()  # up from here (not at CONNACK): the outbox may retry at once

    def _on_connect_fail(self, client: mqtt.Client, userdata: Any) -> None:
        with self._lock:
            self._last_problem = ("connection attempt failed: broker unreachable or TLS "
                                  "handshake refused (check host, port, tls, ca_file)")

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: mqtt.DisconnectFlags,
                       reason_code: ReasonCode, properties: Properties | None) -> None:
        # A batch being published ends first (its socket is closed: the rest is refused), so
        # no event of it can go out on the next connection ahead of the ones paho resends.
        with self._publishing:
            was_connected = self._connected.is_set()
            self._connected.clear()
        with self._lock:
            self._last_problem = f"disconnected: {reason_code}"
        if was_connected and not self._closed:
            log.warning("mqtt connection to %s:%s lost (%s); reconnecting", self.settings.host,
                        self.settings.port, reason_code)

    def problem(self) -> str | None:
        if self._connected.is_set():
            return None
        with self._lock:
            return f"not connected to mqtt broker {self.settings.host}:{self.settings.port} " \
                   f"({self._last_problem})"

    def _on_publish(self, client: mqtt.Client, userdata: Any, mid: int, reason_code: ReasonCode,
                    properties: Properties) -> None:
        # paho calls this before it marks the message published: deliver() sees it in time.
        if reason_code.value == NO_MATCHING_SUBSCRIBERS or reason_code.is_failure:
            with self._lock:
                self._refused_mids[mid] = reason_code

    def _on_resend_request(self, client: mqtt.Client, userdata: Any,
                           message: mqtt.MQTTMessage) -> None:
        """A backend asks for events again: ``{"from_seq": N}``, N a whole number >= 1."""
        from_seq = None
        if len(message.payload) <= RESEND_REQUEST_MAX_BYTES:
            try:
                request = json.loads(message.payload)
            except (ValueError, UnicodeDecodeError):
                request = None
            if isinstance(request, dict) and set(request) == {"from_seq"}:
                try:
                    from_seq = external_count(request["from_seq"], "from_seq", minimum=1)
                except ValueError:
                    from_seq = None
        if from_seq is None:
            self._requests_log.warning(
                "bad resend", 'mqtt %s: resend request ignored: expected {"from_seq": '
                "<seq >= 1>}, got %d bytes: %.80r", message.topic, len(message.payload),
                bytes(message.payload[:80]))
            return
        self._requests_log.info("resend", "mqtt %s: backend asks to resend from seq %d",
                                message.topic, from_seq)
        self.request_resend(from_seq)

    tells_held = True  # retained on its topic: it comes with every (re)connect

    def _on_held(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        """Where the backend stands; not JSON is reported as it is (the listener says why)."""
        self._held_came.set()
        try:
            # an empty retained message clears the position: as if none was ever told
            value = json.loads(message.payload) if message.payload else NO_POSITION
        except (ValueError, UnicodeDecodeError):
            value = bytes(message.payload[:80])
        self.report_held(value)

    def _held_silence(self, came: threading.Event) -> None:
        """HELD_SILENCE_S after the SUBACK and no retained position came: the broker has
        none (a backend that never said where it stands)."""
        if not came.is_set():
            self.report_held(NO_POSITION)  # the guard weighs it: did this backend tell before?

    # -- delivery ------------------------------------------------------------------------------
    def deliver(self, events: list[dict[str, Any]]) -> None:
        self.submit(events)()

    def submit(self, events: list[dict[str, Any]]) -> Callable[[], None]:
        """Publish ``events`` (QoS 1, in order on the one connection); the call returned
        waits for their PUBACKs. Called from the delivery thread only."""
        if not events:
            return lambda: None
        if not self._connected.wait(self.settings.connect_timeout_s):
            with self._lock:
                refused, problem = self._refused_for_good, self._last_problem
            where = f"{self.settings.host}:{self.settings.port}"
            if refused:
                raise PermanentError(f"mqtt broker {where} refused this table: {refused}")
            raise TransientError(f"not connected to mqtt broker {where} ({problem})")
        waiting: list[tuple[int, mqtt.MQTTMessageInfo]] = []
        with self._publishing:
            if not self._connected.is_set():  # lost since the wait above
                raise TransientError(f"mqtt connection to {self.settings.host}:"
                                     f"{self.settings.port} lost before seq {events[0]['seq']}")
            for event in events:
                seq = event["seq"]
                info = self._inflight.get(seq)
                if info is None or info.rc not in (mqtt.MQTT_ERR_SUCCESS,):
                    info = self._publish_event(event)
                    if info.rc != mqtt.MQTT_ERR_SUCCESS:
                        raise TransientError(f"mqtt publish of seq {seq} failed: "
                                             f"{mqtt.error_string(info.rc)}")
                    self._inflight[seq] = info
                waiting.append((seq, info))
        return lambda: self._settle(waiting)

    def _settle(self, waiting: list[tuple[int, mqtt.MQTTMessageInfo]]) -> None:
        """Wait for the PUBACKs of one submitted batch; raise as ``deliver`` does."""
        deadline = time.monotonic() + self.settings.publish_timeout_s
        for seq, info in waiting:
            try:
                info.wait_for_publish(max(0.0, deadline - time.monotonic()))
                published = info.is_published()
            except (RuntimeError, ValueError) as exc:
                self._inflight.pop(seq, None)
                raise TransientError(f"mqtt publish of seq {seq} failed: {exc}") from None
            if not published:
                raise TransientError(f"no PUBACK for seq {seq} within "
                                     f"{self.settings.publish_timeout_s:g}s")
        refused = None
        with self._lock:
            for seq, info in waiting:
                reason = self._refused_mids.pop(info.mid, None)
                if reason is not None and refused is None:
                    refused = (seq, reason)
            # the rest are PUBACKs of the status message: kept only for messages in flight
            live = {info.mid for info in self._inflight.values()}
            for mid in [m for m in self._refused_mids if m not in live]:
                del self._refused_mids[mid]
        if refused is None:
            last = waiting[-1][0]
            for seq in [s for s in self._inflight if s <= last]:
                del self._inflight[seq]  # settled: batches settle oldest first
            return
        # Published anew next time, and so is every later batch already on the way: a
        # subscriber that comes back meanwhile still meets each event first in seq order.
        first = waiting[0][0]
        for seq in [s for s in self._inflight if s >= first]:
            del self._inflight[seq]
        refused_seq, reason = refused
        # The events before it were taken; the outbox sends this batch again (same ids).
        if reason.value == NO_MATCHING_SUBSCRIBERS:
            raise NoSubscriber(f"no subscriber: the broker has no subscription for "
                               f"{self.events_topic} (seq {refused_seq}); the backend must "
                               "subscribe with a persistent session (docs/backend.md)")
        raise TransientError(f"mqtt broker did not take seq {refused_seq}: {reason}")

    def _publish_event(self, event: dict[str, Any]) -> mqtt.MQTTMessageInfo:
        payload = _payload(event)
        properties = None
        if self._secret is not None:
            properties = Properties(PacketTypes.PUBLISH)
            properties.UserProperty = [(name.lower(), value) for name, value in
                                       signed_now(self._secret, payload).items()]
        return self._client.publish(self.events_topic, payload, qos=1, properties=properties)

    def _close(self) -> None:
        if self._connected.is_set():
            info = self._client.publish(self.status_topic, _payload(self._offline("shutdown")),
                                        qos=1, retain=True)
            try:
                info.wait_for_publish(2.0)
            except (RuntimeError, ValueError):
                pass
        stop_client(self._client)
