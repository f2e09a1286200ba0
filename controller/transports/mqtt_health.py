"""The retained per-table health topic ``<prefix>/<table>/health`` on the MQTT broker.

A connection of its own, beside the event transport's, because MQTT gives each connection
one last will and the event connection's is its ``status`` topic: this one's will is the
health topic's ``{"state": "offline", "reason": "connection lost", …}`` (retained), so a table
that dies or loses its network shows offline without saying so. It uses the ``transports.mqtt``
settings (broker, TLS, password); its client id is the transport's with ``-health`` appended,
and it logs in as ``health_username`` (default ``<username>-health``): the studio broker makes a
login its client id, so one login cannot hold two connections.

``publish`` never blocks the caller on the network: paho queues the message (QoS 1, retained)
and the latest one is published again on every reconnect, replacing the will the broker may
have sent meanwhile.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.transports.mqtt import (
    MqttTransportSettings,
    health_login,
    new_client,
    start_connecting,
    stop_client,
)

log = logging.getLogger("pokdeng.transports.mqtt.health")

#: how long an orderly stop waits for the broker to take the offline message
CLOSE_WAIT_S = 2.0


def health_topic(settings: MqttTransportSettings, table: str) -> str:
    return f"{settings.topic_prefix.strip('/')}/{table}/health"


def _payload(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


class MqttHealthPublisher:
    """Publishes one table's health, retained; its last will says the table is offline."""

    def __init__(self, settings: MqttTransportSettings, table: str, will: dict[str, Any]):
        self.topic = health_topic(settings, table)
        self.client_id = (settings.client_id or f"pokdeng-table-{table}") + "-health"
        self._lock = threading.Lock()
        self._latest: bytes | None = None
        self._connected = threading.Event()
        # The event transport's broker, password and TLS (its settings, checked there).
        client = new_client(settings, self.client_id, "pokdeng.transports.mqtt.health.paho",
                            username=health_login(settings))
        client.will_set(self.topic, _payload(will), qos=1, retain=True)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        self._client = client
        start_connecting(client, settings)

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: mqtt.ConnectFlags,
                    reason_code: ReasonCode, properties: Properties | None) -> None:
        if reason_code.is_failure:
            log.error("mqtt health connection refused: %s", reason_code)
            return
        self._connected.set()
        with self._lock:
            latest = self._latest
        if latest is not None:  # replaces the will the broker may have published meanwhile
            client.publish(self.topic, latest, qos=1, retain=True)

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: mqtt.DisconnectFlags,
                       reason_code: ReasonCode, properties: Properties | None) -> None:
        self._connected.clear()

    def publish(self, message: dict[str, Any]) -> None:
        """Queue ``message`` as the topic's retained value (sent now or on reconnect)."""
        payload = _payload(message)
        with self._lock:
            self._latest = payload
        if self._connected.is_set():
            self._client.publish(self.topic, payload, qos=1, retain=True)

    def close(self, offline: dict[str, Any]) -> None:
        """An orderly stop: the retained value becomes ``offline``, then disconnect (no will)."""
        with self._lock:
            self._latest = _payload(offline)
        if self._connected.is_set():
            info = self._client.publish(self.topic, _payload(offline), qos=1, retain=True)
            try:
                info.wait_for_publish(CLOSE_WAIT_S)
            except (RuntimeError, ValueError):
                log.warning("mqtt health: the offline message may not have reached the broker")
        stop_client(self._client)
