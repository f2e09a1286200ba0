"""The MQTT transport against a real mosquitto on loopback (started by the fixture)."""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.transports import PermanentError, TransientError, TransportConfigError, create
from controller.transports.mqtt import MQTT_TLS_PORT, MqttTransport, MqttTransportSettings
from support.backends import first_copies, slow_connect_callback
from support.journal_helpers import TABLE, event, fill
from support.waiting import wait_until
from testkit.backends import TcpRelay, documented_verifier, make_certificate

pytestmark = pytest.mark.mosquitto


class Subscriber:
    """A paho client recording every message on pokdeng/<table>/#; with MQTT 5 it also keeps
    each message's payload bytes and user properties (the signature)."""

    def __init__(self, port: int, topic: str = f"pokdeng/{TABLE}/#", *, host: str = "127.0.0.1",
                 protocol: int = mqtt.MQTTv311, ca_file: Path | None = None):
        self.messages: list[tuple[str, dict, bool]] = []
        self.signed: list[tuple[bytes, dict[str, str]]] = []  # events: payload, user properties
        self.changed = threading.Condition()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"sub-{time.time()}",
                                  protocol=protocol)
        if ca_file:
            self.client.tls_set(ca_certs=str(ca_file))
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.on_connect = lambda c, *a: c.subscribe(topic, qos=1)
        self.client.connect(host, port)
        self.client.loop_start()
        assert subscribed.wait(5), "subscriber could not subscribe"

    def _on_message(self, client, userdata, message):
        properties = getattr(message.properties, "UserProperty", [])
        with self.changed:
            self.messages.append((message.topic, json.loads(message.payload), message.retain))
            if message.topic.endswith("/events"):
                self.signed.append((message.payload, dict(properties)))
            self.changed.notify_all()

    def events(self) -> list[dict]:
        with self.changed:
            return [m for t, m, _ in self.messages if t.endswith("/events")]

    def statuses(self) -> list[tuple[dict, bool]]:
        with self.changed:
            return [(m, r) for t, m, r in self.messages if t.endswith("/status")]

    def wait(self, predicate, timeout: float = 10.0, what: str = "the broker's messages"):
        return wait_until(predicate, timeout, what, condition=self.changed,
                          details=lambda: f"messages: {self.messages}")

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def settings(port: int, host: str = "127.0.0.1", **options) -> MqttTransportSettings:
    options = {"reconnect_min_s": 0.1, "reconnect_max_s": 0.5, "connect_timeout_s": 2.0,
               "publish_timeout_s": 2.0, "backoff_initial_s": 0.05, "backoff_max_s": 0.3,
               **options}
    return MqttTransportSettings(host, port, **options)


def test_events_arrive_in_order_with_qos1_and_an_online_status(mosquitto):
    sub = Subscriber(mosquitto.port)
    t = MqttTransport(settings(mosquitto.port), table=TABLE)
    try:
        t.deliver([event(1), event(2), event(3)])
        t.deliver([event(4)])
        assert sub.wait(lambda: len(sub.events()) == 4)
        assert sub.events() == [event(1), event(2), event(3), event(4)]
        online = [m for m, _ in sub.statuses() if m["state"] == "online"]
        assert online and online[0]["table"] == TABLE
    finally:
        t.close()
    assert sub.wait(lambda: sub.statuses()[-1][0]["state"] == "offline")
    assert sub.statuses()[-1][0]["reason"] == "shutdown"
    sub.close()
    late = Subscriber(mosquitto.port)  # the status is retained: a late subscriber sees it
    assert late.wait(lambda: late.statuses())
    status, retained = late.statuses()[0]
    assert retained and status["state"] == "offline"
    late.close()


def test_last_will_marks_the_table_offline_when_the_process_dies(mosquitto):
    child = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from controller.transports.mqtt import MqttTransport, MqttTransportSettings
        from support.journal_helpers import event
        t = MqttTransport(MqttTransportSettings("127.0.0.1", {mosquitto.port}), table="T7")
        t.deliver([event(1)])
        print("delivered", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "delivered"
        sub = Subscriber(mosquitto.port)
        assert sub.wait(lambda: sub.statuses())
        assert sub.statuses()[0][0]["state"] == "online" and sub.statuses()[0][1]  # retained
        proc.send_signal(signal.SIGKILL)
        proc.wait(5)
        assert sub.wait(lambda: sub.statuses()[-1][0]["state"] == "offline")
        assert sub.statuses()[-1][0]["reason"] == "connection lost"
        sub.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


@pytest.mark.slow
def test_broker_restart_is_transient_and_delivery_resumes(mosquitto):
    sub = Subscriber(mosquitto.port)
    t = MqttTransport(settings(mosquitto.port), table=TABLE)
    try:
        t.deliver([event(1)])
        mosquitto.stop()
        sub.close()
        with pytest.raises(TransientError, match="not connected to mqtt broker"):
            t.deliver([event(2)])
        mosquitto.start()
        sub = Subscriber(mosquitto.port)
        def delivered() -> bool:
            try:
                t.deliver([event(2), event(3)])
                return True
            except TransientError:
                return False

        wait_until(delivered, 10, "a reconnect")
        assert sub.wait(lambda: [e["seq"] for e in sub.events()][-2:] == [2, 3])
    finally:
        t.close()
        sub.close()


def test_a_batch_sent_on_reconnect_follows_the_unacknowledged_ones_paho_sends_again(mosquitto):
    """The connection dies with a batch on the way (published, no PUBACK): paho keeps it and
    sends it again when it reconnects. The delivery thread meanwhile wants the next batch out
    and waits for the connection; it must not get in ahead of paho's resend, or a subscriber
    meets seq 11 before seq 1. The table's ``on_connect`` callback is slowed down here, as a
    loaded machine does, to widen the moment between "connected" and paho's resend."""
    relay = TcpRelay(mosquitto.port)
    sub = Subscriber(mosquitto.port)
    t = MqttTransport(settings(relay.port, connect_timeout_s=10.0, publish_timeout_s=10.0),
                      table=TABLE)
    slow_connect_callback(t)
    try:
        t.deliver([event(0)])  # connected
        relay.hold()
        first = t.submit([event(seq) for seq in range(1, 11)])  # on the way, never acknowledged
        relay.cut()
        wait_until(lambda: t.problem() is not None, 5, "the table to see the connection lost")
        later: list = []
        sender = threading.Thread(
            target=lambda: later.append(t.submit([event(seq) for seq in range(11, 21)])))
        sender.start()  # waits for the connection
        relay.restore()
        sender.join(15)
        first()
        later[0]()
        assert sub.wait(lambda: {e["seq"] for e in sub.events()} >= set(range(21)))
        assert first_copies(e["seq"] for e in sub.events()) == list(range(21))
    finally:
        t.close()
        sub.close()
        relay.cut()


def test_a_batch_cut_by_a_lost_connection_is_not_finished_on_the_next_one(mosquitto):
    """The delivery thread stalls in the middle of a batch (a loaded machine) while the
    connection drops and comes back. The rest of that batch must not go out on the new
    connection, where it could land before paho has sent again the unacknowledged first half:
    the batch fails, and is delivered again in order."""
    relay = TcpRelay(mosquitto.port)
    sub = Subscriber(mosquitto.port)
    t = MqttTransport(settings(relay.port, connect_timeout_s=10.0, publish_timeout_s=10.0),
                      table=TABLE)
    publish = t._client.publish
    at_five, go = threading.Event(), threading.Event()

    def stalling_publish(topic, payload, **options):
        if json.loads(payload).get("seq") == 5 and not go.is_set():
            at_five.set()
            go.wait(10)
        return publish(topic, payload, **options)

    t._client.publish = stalling_publish
    try:
        t.deliver([event(0)])
        outcome: list = []

        def send_batch():
            try:
                outcome.append(t.submit([event(seq) for seq in range(1, 11)]))
            except TransientError as exc:
                outcome.append(exc)

        sender = threading.Thread(target=send_batch)
        relay.hold()
        sender.start()
        assert at_five.wait(5)  # seq 1-4 are on the way, never to be acknowledged
        relay.cut()
        relay.restore()
        time.sleep(1.0)  # long enough for paho to reconnect, were it free to
        go.set()
        sender.join(10)
        assert isinstance(outcome[0], TransientError), outcome
        def delivered() -> bool:  # the outbox's retries
            try:
                t.deliver([event(seq) for seq in range(1, 11)])
                return True
            except TransientError:
                return False

        wait_until(delivered, 10, "the batch delivered again")
        assert sub.wait(lambda: {e["seq"] for e in sub.events()} >= set(range(11)))
        assert first_copies(e["seq"] for e in sub.events()) == list(range(11))
    finally:
        go.set()
        t.close()
        sub.close()
        relay.cut()


@pytest.mark.slow
def test_outbox_over_mqtt_delivers_through_a_network_outage_in_order(mosquitto, tmp_path):
    relay = TcpRelay(mosquitto.port)  # the table's path to the broker; the subscriber's stays up
    journal = Journal(tmp_path / "journal.db")
    sub = Subscriber(mosquitto.port)
    transport = create("mqtt", {"host": "127.0.0.1", "port": relay.port,
                                "reconnect_min_s": 0.1, "reconnect_max_s": 0.5,
                                "connect_timeout_s": 1.0, "backoff_initial_s": 0.05,
                                "backoff_max_s": 0.3}, table=TABLE)
    try:
        with Outbox(journal.path, [transport]) as outbox:
            written = fill(journal, 30)
            outbox.notify()
            assert outbox.wait_delivered(journal.last_event_seq(), 10)
            relay.cut()
            written += fill(journal, 300)  # most of a shoe while the network is down
            outbox.notify()
            wait_until(lambda: outbox.status()["mqtt"]["state"] == "retrying", 10,
                       "the MQTT transport to be retrying")
            assert outbox.status()["mqtt"]["backlog"] > 0
            relay.restore()
            assert outbox.wait_delivered(journal.last_event_seq(), 15)
        assert sub.wait(lambda: len({e["id"] for e in sub.events()}) == len(written))
        seen = sub.events()
        first = {e["id"]: e for e in reversed(seen)}  # the first copy of each
        first_seen = [first[event_id] for event_id in first_copies(e["id"] for e in seen)]
        assert [strip_anchor(e) for e in first_seen] == written  # every event, in seq order
        by_id = {e["id"]: e for e in written}
        assert all(e == first[e["id"]] for e in seen)  # repeats carry the same body and anchor
        assert all(strip_anchor(e) == by_id[e["id"]] for e in seen)
    finally:
        journal.close()
        sub.close()
        relay.cut()


def test_config_errors_name_the_option(tmp_path):
    with pytest.raises(TransportConfigError, match="protocol"):
        MqttTransport(MqttTransportSettings("127.0.0.1", protocol="4"), table=TABLE)
    with pytest.raises(TransportConfigError, match="password_file given without username"):
        MqttTransport(MqttTransportSettings("127.0.0.1", password_file="/x"), table=TABLE)
    with pytest.raises(TransportConfigError, match="password_file: cannot read"):
        MqttTransport(MqttTransportSettings("127.0.0.1", username="u",
                                            password_file=str(tmp_path / "none")), table=TABLE)
    with pytest.raises(TransportConfigError, match="topic level"):
        MqttTransport(MqttTransportSettings("127.0.0.1"), table="a/b")
    with pytest.raises(TransportConfigError, match="secret_file: cannot read"):
        MqttTransport(MqttTransportSettings("127.0.0.1", protocol="5",
                                            secret_file=str(tmp_path / "none")), table=TABLE)


@pytest.mark.slow
def test_username_and_password_from_a_file(mosquitto_factory, tmp_path):
    broker = mosquitto_factory(users={TABLE: "s3cret pass"})
    good = tmp_path / "mqtt.password"
    good.write_text("s3cret pass\n")
    t = MqttTransport(settings(broker.port, username=TABLE, password_file=str(good)),
                      table=TABLE)
    try:
        t.deliver([event(1)])
    finally:
        t.close()
    bad = tmp_path / "wrong.password"
    bad.write_text("guess\n")
    t = MqttTransport(settings(broker.port, username=TABLE, password_file=str(bad)),
                      table=TABLE)
    try:
        with pytest.raises(PermanentError, match="refused this table: (Not authorized|Bad user)"):
            t.deliver([event(1)])
    finally:
        t.close()


def test_password_from_a_systemd_credential(mosquitto_factory, tmp_path, monkeypatch):
    broker = mosquitto_factory(users={TABLE: "cred pass"})
    (tmp_path / "mqtt-password").write_text("cred pass\n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    t = MqttTransport(settings(broker.port, username=TABLE,
                               password_credential="mqtt-password"), table=TABLE)
    try:
        t.deliver([event(1)])
    finally:
        t.close()
    monkeypatch.delenv("CREDENTIALS_DIRECTORY")
    with pytest.raises(TransportConfigError, match="CREDENTIALS_DIRECTORY is not set"):
        MqttTransport(settings(broker.port, username=TABLE,
                               password_credential="mqtt-password"), table=TABLE)


@pytest.mark.slow
def test_tls_with_a_private_ca(mosquitto_factory, tmp_path):
    cert, key = make_certificate(tmp_path)
    broker = mosquitto_factory(tls=(cert, key))
    t = MqttTransport(settings(broker.port, tls=True, ca_file=str(cert)), table=TABLE)
    try:
        t.deliver([event(1), event(2)])
    finally:
        t.close()
    untrusted = MqttTransport(settings(broker.port, tls=True, connect_timeout_s=1.0),
                              table=TABLE)
    try:
        with pytest.raises(TransientError, match="not connected.*TLS"):
            untrusted.deliver([event(1)])
    finally:
        untrusted.close()


# -- signed messages and TLS --------------------------------------------------------------------

SECRET = b"mqtt-table-secret-\x07"


@pytest.fixture
def secret_file(tmp_path) -> Path:
    path = tmp_path / "mqtt.secret"
    path.write_bytes(SECRET + b"\n")
    return path


def verified(messages: list[tuple[bytes, dict[str, str]]]) -> list[dict]:
    """The events a backend running the documented verifier stores, each once; every message
    must carry a good signature, and nothing but the timestamp and the signature."""
    verifier, seen, stored = documented_verifier(), {}, []
    for payload, properties in messages:
        assert set(properties) == {"x-pokdeng-timestamp", "x-pokdeng-signature"}
        assert verifier.signature_ok(SECRET, properties["x-pokdeng-timestamp"],
                                     properties["x-pokdeng-signature"], payload, time.time())
        fresh, conflicts = verifier.new_events([json.loads(payload)], seen)
        assert conflicts == []
        stored += fresh
    return stored


def test_event_messages_are_signed_for_the_documented_verifier(mosquitto, secret_file):
    verifier = documented_verifier()
    sub = Subscriber(mosquitto.port, protocol=mqtt.MQTTv5)
    with MqttTransport(settings(mosquitto.port, protocol="5", secret_file=str(secret_file)),
                       table=TABLE) as t:
        t.deliver([event(1), event(2), event(3)])
    assert sub.wait(lambda: len(sub.signed) == 3)
    genuine = list(sub.signed)
    assert verified(genuine) == [event(1), event(2), event(3)]
    payload, properties = genuine[0]
    timestamp, signature = properties["x-pokdeng-timestamp"], properties["x-pokdeng-signature"]
    tampered = payload.replace(b'"target":"P1"', b'"target":"P2"')
    assert tampered != payload
    assert not verifier.signature_ok(SECRET, timestamp, signature, tampered, time.time())
    assert not verifier.signature_ok(SECRET, timestamp, signature, payload,
                                     time.time() + verifier.WINDOW_S + 1)

    # Someone else on the broker moves a real signature onto an event of their own, then
    # replays a real message: the first fails the signature, the second brings nothing new.
    forger = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="forger", protocol=mqtt.MQTTv5)
    forger.connect("127.0.0.1", mosquitto.port)
    forger.loop_start()
    try:
        for body in (json.dumps(event(4, target="P1", card="AS")).encode(), payload):
            stolen = Properties(PacketTypes.PUBLISH)
            stolen.UserProperty = list(properties.items())
            forger.publish(t.events_topic, body, qos=1, properties=stolen).wait_for_publish(5)
        assert sub.wait(lambda: len(sub.signed) == 5)
    finally:
        forger.disconnect()
        forger.loop_stop()
        sub.close()
    (forged, forged_properties), replayed = sub.signed[3:]
    assert not verifier.signature_ok(SECRET, forged_properties["x-pokdeng-timestamp"],
                                     forged_properties["x-pokdeng-signature"], forged,
                                     time.time())
    assert verified(genuine + [replayed]) == [event(1), event(2), event(3)]


def free_loopback_address(port: int) -> str:
    """A 127.x.y.z address where ``port`` is free (another test run may hold 127.0.0.1's)."""
    for _ in range(20):
        address = "127." + ".".join(str(random.randint(1, 254)) for _ in range(3))
        with socket.socket() as probe:
            try:
                probe.bind((address, port))
            except OSError:
                continue
            return address
    pytest.skip(f"port {port} is taken on every loopback address tried")


@pytest.mark.slow
def test_port_8883_means_tls_unless_turned_off(mosquitto_factory, tmp_path, secret_file):
    address = free_loopback_address(MQTT_TLS_PORT)
    cert, key = make_certificate(tmp_path, address)
    broker = mosquitto_factory(tls=(cert, key), host=address, port=MQTT_TLS_PORT)
    sub = Subscriber(broker.port, host=address, protocol=mqtt.MQTTv5, ca_file=cert)
    with MqttTransport(settings(MQTT_TLS_PORT, address, ca_file=str(cert), protocol="5",
                                secret_file=str(secret_file)), table=TABLE) as t:
        t.deliver([event(1), event(2)])  # PUBACKs from a listener that speaks only TLS
    assert sub.wait(lambda: len(sub.signed) == 2)
    sub.close()
    assert verified(sub.signed) == [event(1), event(2)]
    with MqttTransport(settings(MQTT_TLS_PORT, address, tls=False, connect_timeout_s=1.0),
                       table=TABLE) as plain, \
            pytest.raises(TransientError, match="not connected"):
        plain.deliver([event(3)])
