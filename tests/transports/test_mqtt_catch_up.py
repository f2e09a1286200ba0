"""MQTT delivery means the backend can have it: against a real mosquitto restarted without
persistence, with a backend (docs/backend.md's receiver) that reconnects late, every event
ends up stored once, in order, with no gap."""

from __future__ import annotations

import json
import logging

import pytest

from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.transports import create
from controller.transports.mqtt import MqttTransportSettings
from controller.transports.mqtt_health import MqttHealthPublisher
from support.backends import first_copies, slow_connect_callback
from support.health_helpers import HealthSubscriber
from support.journal_helpers import TABLE, fill
from support.waiting import wait_until
from testkit.backends import MqttReceiver


def unanchored(events: list[dict]) -> list[dict]:
    """The events as journaled: without the anchor each carries on the way out."""
    return [strip_anchor(event) for event in events]

pytestmark = pytest.mark.mosquitto


def mqtt_transport(port: int):
    return create("mqtt", {"host": "127.0.0.1", "port": port, "protocol": "5",
                           "reconnect_min_s": 0.1, "reconnect_max_s": 0.3,
                           "connect_timeout_s": 1.0, "publish_timeout_s": 2.0,
                           "backoff_initial_s": 0.05, "backoff_max_s": 0.3}, table=TABLE)


@pytest.mark.slow
def test_a_broker_restart_without_persistence_loses_nothing(mosquitto_factory, tmp_path):
    broker = mosquitto_factory(persistence=False)
    journal = Journal(tmp_path / "journal.db")
    receiver = MqttReceiver(broker.port, TABLE)
    try:
        with Outbox(journal.path, [mqtt_transport(broker.port)]) as outbox:
            receiver.connect()
            wait_until(lambda: receiver.sessions, 5, "the receiver to connect")
            written = fill(journal, 10)
            outbox.notify()
            wait_until(lambda: len(receiver.stored) == len(written), 10, "the first events")

            receiver.disconnect()  # the backend is away; its session queues for it
            first_lost = len(written) + 1
            written += fill(journal, 10)
            outbox.notify()
            assert outbox.wait_delivered(journal.last_event_seq(), 10)  # PUBACKed: queued

            broker.stop()  # persistence off: the queue and the session are gone
            broker.start()
            written += fill(journal, 10)
            outbox.notify()
            wait_until(lambda: outbox.status()["mqtt"]["state"] == "no subscriber", 10,
                       "the table to see that no one subscribes")
            status = outbox.status()["mqtt"]
            assert status["backlog"] > 0 and "no subscriber" in status["last_error"]

            receiver.connect()  # late, after the table reconnected
            assert outbox.wait_delivered(journal.last_event_seq(), 15)
            wait_until(lambda: len(receiver.stored) == len(written), 15,
                       "the receiver to catch up",
                       details=lambda: f"stored {len(receiver.stored)}, asked {receiver.asked}")
            assert outbox.status()["mqtt"]["state"] == "ok"
    finally:
        receiver.close()
        journal.close()
    assert unanchored(receiver.stored) == written  # every event once, in seq order, no gap
    assert receiver.sessions == [False, False]  # the restart lost the session
    assert receiver.asked == [1, first_lost]  # on each connect: from the next one it needs
    # repeats (the resend) carry the very same bytes
    first_payload: dict[str, bytes] = {}
    for payload in receiver.payloads:
        assert first_payload.setdefault(json.loads(payload)["id"], payload) == payload
    by_id = {e["id"]: e for e in written}
    assert all(strip_anchor(json.loads(p)) == by_id[i] for i, p in first_payload.items())


def deliver_five(journal: Journal, outbox: Outbox, receiver: MqttReceiver) -> list[dict]:
    """The receiver connected and holding five inputs' events, first copies: what a resend
    request then asks again."""
    receiver.connect()
    wait_until(lambda: receiver.sessions, 5, "the receiver to connect")
    written = fill(journal, 5)
    outbox.notify()
    assert outbox.wait_delivered(journal.last_event_seq(), 10)
    wait_until(lambda: len(receiver.stored) == len(written), 10, "the events")
    return written


def test_a_resend_request_is_bounded_by_what_was_published(mosquitto_factory, tmp_path, caplog):
    broker = mosquitto_factory()
    journal = Journal(tmp_path / "journal.db")
    receiver = MqttReceiver(broker.port, TABLE)
    try:
        with caplog.at_level(logging.INFO), \
                Outbox(journal.path, [mqtt_transport(broker.port)],
                       resend_interval_s=0.2) as outbox:
            written = deliver_five(journal, outbox, receiver)
            horizon = written[-1]["seq"]
            for bad in (b"nonsense", b'{"from_seq": 0}', b'{"from_seq": "3"}',
                        b'{"from": 3}', b"[1]"):
                receiver.client.publish(receiver.resend_topic, bad, qos=1).wait_for_publish(2)
            receiver.client.publish(receiver.resend_topic, json.dumps(
                {"from_seq": horizon + 50}), qos=1).wait_for_publish(2)
            wait_until(lambda: f"resend from seq {horizon + 50} asked; nothing to resend"
                       in caplog.text, 5, "the past-horizon log")
            before = len(receiver.payloads)
            receiver.client.publish(receiver.resend_topic, json.dumps({"from_seq": 2}),
                                    qos=1).wait_for_publish(2)
            wait_until(lambda: "resend done up to seq" in caplog.text, 10, "the resend")
            wait_until(lambda: len(receiver.payloads) == before + horizon - 1, 5, "the resent")
    finally:
        receiver.close()
        journal.close()
    resent = [json.loads(p)["seq"] for p in receiver.payloads[before:]]
    assert resent == list(range(2, horizon + 1))  # in order, nothing past the horizon
    assert caplog.text.count("resend request ignored") == 1  # five, one line per 5 s
    assert f"resending seq 2-{horizon} as the backend asked" in caplog.text


def test_a_flood_of_resend_requests_is_answered_and_logged_a_line_per_interval(
        mosquitto_factory, tmp_path, caplog):
    """3,000 requests (half malformed) from the network: the table still resends what was
    asked, and its log has a line or two, not 3,000 (journald's rate limit would otherwise
    drop the table's own lines)."""
    broker = mosquitto_factory()
    journal = Journal(tmp_path / "journal.db")
    receiver = MqttReceiver(broker.port, TABLE)
    try:
        with caplog.at_level(logging.INFO, logger="pokdeng.transports.mqtt"), \
                Outbox(journal.path, [mqtt_transport(broker.port)],
                       resend_interval_s=0.2) as outbox:
            written = deliver_five(journal, outbox, receiver)
            before = len(receiver.payloads)
            for n in range(1500):
                receiver.client.publish(receiver.resend_topic, b"nonsense %d" % n, qos=0)
                receiver.client.publish(receiver.resend_topic, b'{"from_seq": 1}', qos=0)
            receiver.client.publish(receiver.resend_topic, b'{"from_seq": 1}',
                                    qos=1).wait_for_publish(5)
            wait_until(lambda: len(receiver.payloads) >= before + len(written), 10,
                       "the resend asked for")
    finally:
        receiver.close()
        journal.close()
    lines = [r for r in caplog.records if r.name == "pokdeng.transports.mqtt"
             and "resend" in r.getMessage()]
    assert 2 <= len(lines) <= 6, [r.getMessage() for r in lines]


def test_a_dead_broker_shows_in_the_status_before_anything_is_sent(mosquitto_factory,
                                                                    tmp_path):
    broker = mosquitto_factory()
    journal = Journal(tmp_path / "journal.db")
    receiver = MqttReceiver(broker.port, TABLE)
    receiver.connect()
    try:
        with Outbox(journal.path, [mqtt_transport(broker.port)]) as outbox:
            wait_until(lambda: receiver.sessions, 5, "the receiver to connect")
            fill(journal, 3)
            outbox.notify()
            assert outbox.wait_delivered(journal.last_event_seq(), 10)
            assert outbox.status()["mqtt"]["state"] == "ok"
            broker.stop()  # nothing left to send: only the connection can tell
            wait_until(lambda: outbox.status()["mqtt"]["state"] == "disconnected", 5,
                       "the status to show the lost broker")
            status = outbox.status()["mqtt"]
            assert "not connected to mqtt broker 127.0.0.1" in status["last_error"]
            broker.start()
            wait_until(lambda: outbox.status()["mqtt"]["state"] == "ok", 10, "the reconnect")
            assert outbox.status()["mqtt"]["last_error"] is None
    finally:
        receiver.close()
        journal.close()


def test_the_studio_acl_lets_a_table_publish_its_own_events_and_hear_its_resends(
        mosquitto_factory, tmp_path):
    broker = mosquitto_factory(users={TABLE: "table pass", "backend": "backend pass",
                                      "T8": "other table"}, acl=True)
    journal = Journal(tmp_path / "journal.db")
    password = tmp_path / "mqtt.password"
    password.write_text("table pass\n")
    receiver = MqttReceiver(broker.port, TABLE, login=("backend", "backend pass"))
    intruder = MqttReceiver(broker.port, TABLE, client_id="T8", login=("T8", "other table"))
    transport = create("mqtt", {"host": "127.0.0.1", "port": broker.port, "protocol": "5",
                                "username": TABLE, "password_file": str(password),
                                "backoff_initial_s": 0.05, "backoff_max_s": 0.3},
                       table=TABLE)
    try:
        receiver.connect()
        intruder.connect()  # another table: may not read this table's events
        wait_until(lambda: receiver.sessions and intruder.sessions, 5, "both to connect")
        with Outbox(journal.path, [transport], resend_interval_s=0.1) as outbox:
            written = fill(journal, 6)
            outbox.notify()
            assert outbox.wait_delivered(journal.last_event_seq(), 10)
            wait_until(lambda: len(receiver.stored) == len(written), 10, "the events")
            before = len(receiver.payloads)
            receiver.client.publish(receiver.resend_topic, json.dumps({"from_seq": 1}),
                                    qos=1).wait_for_publish(2)
            wait_until(lambda: len(receiver.payloads) == before + len(written), 10,
                       "the resend the backend asked for")
    finally:
        receiver.close()
        intruder.close()
        journal.close()
    assert unanchored(receiver.stored) == written
    assert intruder.payloads == []


def test_the_studio_acl_lets_a_table_publish_its_health_and_the_fleet_read_every_table(
        mosquitto_factory, tmp_path):
    broker = mosquitto_factory(users={TABLE: "table pass", f"{TABLE}-health": "table pass",
                                      "fleet": "fleet pass", "T8": "other table",
                                      "T8-health": "other table"}, acl=True)
    passwords = {}
    for user, secret in ((TABLE, "table pass"), ("T8", "other table")):
        passwords[user] = tmp_path / f"{user}.password"
        passwords[user].write_text(secret + "\n")

    def publisher(user: str, table: str) -> MqttHealthPublisher:
        settings = MqttTransportSettings(host="127.0.0.1", port=broker.port, username=user,
                                         password_file=str(passwords[user]))
        return MqttHealthPublisher(settings, table, will={"state": "offline"})

    fleet = HealthSubscriber(broker.port, "+", login=("fleet", "fleet pass"))
    own = publisher(TABLE, TABLE)
    forger = publisher("T8", TABLE)  # another table's account, writing this table's health
    try:
        own.publish({"table": TABLE, "state": "ready"})
        fleet.wait_for(lambda m: m.get("state") == "ready", 10, "the table's own health")
        forger.publish({"table": TABLE, "state": "forged"})
        own.publish({"table": TABLE, "state": "betting"})
        fleet.wait_for(lambda m: m.get("state") == "betting", 10, "the next health message")
    finally:
        forger.close({"state": "offline"})
        own.close({"table": TABLE, "state": "offline"})
        fleet.client.loop_stop()
        fleet.client.disconnect()
    assert "forged" not in " ".join(fleet.texts)  # the broker dropped the other table's write


@pytest.mark.slow
def test_batches_in_flight_through_a_broker_restart_reach_the_backend_in_order(
        mosquitto_factory, tmp_path):
    """Several batches on the way (in_flight_batches 4, batch_max 10) when the broker, with
    persistence, restarts: the backend's persistent session gets every event, each first copy
    in seq order, without having to ask for a gap. The table's connect callback is slowed
    down, as on a loaded machine: a batch published between "connected" and paho's resend of
    the unacknowledged ones would overtake them (it did, before the connection counted as up
    only from its SUBACK)."""
    broker = mosquitto_factory()
    journal = Journal(tmp_path / "journal.db")
    written = fill(journal, 1500)  # a backlog: ~2,000 events, as after an outage
    receiver = MqttReceiver(broker.port, TABLE)
    transport = create("mqtt", {"host": "127.0.0.1", "port": broker.port, "protocol": "5",
                                "reconnect_min_s": 0.1, "reconnect_max_s": 0.3,
                                "connect_timeout_s": 2.0, "publish_timeout_s": 2.0,
                                "backoff_initial_s": 0.05, "backoff_max_s": 0.3,
                                "batch_max": 10, "in_flight_batches": 4}, table=TABLE)
    slow_connect_callback(transport)
    try:
        receiver.connect()
        wait_until(lambda: receiver.sessions, 5, "the receiver to connect")
        with Outbox(journal.path, [transport]) as outbox:
            wait_until(lambda: outbox.status()["mqtt"]["delivered_seq"] >= 200, 15,
                       "the first batches delivered", interval=0.001)
            broker.stop()  # batches on the way: paho holds them, the outbox retries
            restarted_at = outbox.status()["mqtt"]["delivered_seq"]
            broker.start()
            assert outbox.wait_delivered(journal.last_event_seq(), 30)
            assert outbox.in_flight_peaks()["mqtt"] > 1  # several batches were on the way
        wait_until(lambda: len(receiver.stored) == len(written), 15, "the receiver to catch up",
                   details=lambda: f"stored {len(receiver.stored)}, asked {receiver.asked}, "
                                   f"sessions {receiver.sessions}, restarted at "
                                   f"{restarted_at}, arrivals {receiver.arrivals()}")
    finally:
        receiver.close()
        journal.close()
    assert restarted_at < len(written)  # the restart landed mid-stream
    assert receiver.sessions == [False, True]  # the broker kept the backend's session
    assert unanchored(receiver.stored) == written  # every event once, in seq order, no gap
    assert receiver.asked == [1]  # only on its first connect: no gap made it ask again
    first_ids = first_copies(json.loads(payload)["id"] for payload in receiver.payloads)
    assert first_ids == [e["id"] for e in written]  # each first copy in seq order
