"""A resend request made while the table is offline waits for it: the table's session on a
real mosquitto is persistent (its QoS 1 resend subscription outlives the connection), so the
broker queues the request and hands it over when the table connects again
(docs/backend.md, "Catching up")."""

from __future__ import annotations

import json
import threading

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.transports import create
from support.journal_helpers import TABLE, fill
from support.waiting import wait_until

pytestmark = pytest.mark.mosquitto


def mqtt_transport(port: int, protocol: str):
    return create("mqtt", {"host": "127.0.0.1", "port": port, "protocol": protocol,
                           "reconnect_min_s": 0.1, "reconnect_max_s": 0.3,
                           "connect_timeout_s": 1.0, "publish_timeout_s": 2.0,
                           "backoff_initial_s": 0.05, "backoff_max_s": 0.3}, table=TABLE)


class Seqs:
    """A plain subscriber to the table's events (a persistent session, QoS 1): the seq of
    every message as it came."""

    def __init__(self, port: int):
        self.seqs: list[int] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="backend-seqs",
                                  protocol=mqtt.MQTTv5)
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.subscribe(f"pokdeng/{TABLE}/events", qos=1)
        self.client.loop_start()

    def _on_message(self, client, userdata, message) -> None:
        with self.lock:
            self.seqs.append(json.loads(message.payload)["seq"])

    def taken(self) -> list[int]:
        with self.lock:
            return list(self.seqs)

    def ask(self, from_seq: int) -> None:
        """A backend's resend request, QoS 1 as docs/backend.md says."""
        info = self.client.publish(f"pokdeng/{TABLE}/resend",
                                   json.dumps({"from_seq": from_seq}), qos=1)
        info.wait_for_publish(5)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_a_resend_asked_while_the_table_is_offline_is_served_when_it_connects(
        mosquitto_factory, tmp_path, protocol):
    broker = mosquitto_factory()
    journal = Journal(tmp_path / "journal.db")
    backend = Seqs(broker.port)
    try:
        written = fill(journal, 8)
        with Outbox(journal.path, [mqtt_transport(broker.port, protocol)]) as outbox:
            outbox.notify()
            assert outbox.wait_delivered(journal.last_event_seq(), 10)
            wait_until(lambda: len(backend.taken()) == len(written), 10, "the first copies")
        # the table is off (its transport closed, its session kept by the broker): the
        # backend asks now, and the request has to wait for the table
        backend.ask(3)
        last = written[-1]["seq"]
        assert backend.taken() == list(range(1, last + 1))

        with Outbox(journal.path, [mqtt_transport(broker.port, protocol)]) as outbox:
            # no new event, no second request: the queued one alone brings 3..8 again
            wait_until(lambda: len(backend.taken()) == last + last - 2, 15,
                       "the resend asked while the table was offline",
                       details=lambda: f"came: {backend.taken()}")
    finally:
        backend.close()
        journal.close()
    assert backend.taken() == list(range(1, last + 1)) + list(range(3, last + 1))


def test_an_orderly_stop_logs_no_error(mosquitto_factory, tmp_path, caplog):
    """A clean SIGTERM ends with ``close``: paho's network loop taking one more turn after the
    DISCONNECT must not log an ERROR (an operator's alarm) for a table that stopped well."""
    broker = mosquitto_factory()
    journal = Journal(tmp_path / "journal.db")
    backend = Seqs(broker.port)
    try:
        for _ in range(5):
            fill(journal, 3)
            with caplog.at_level("DEBUG"), \
                    Outbox(journal.path, [mqtt_transport(broker.port, "5")]) as outbox:
                outbox.notify()
                assert outbox.wait_delivered(journal.last_event_seq(), 10)
    finally:
        backend.close()
        journal.close()
    errors = [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert errors == []
