"""One identity per client on the studio broker (config/mosquitto/pokdeng.conf and its ACL, in a
real mosquitto): a login is its client id, so another table's account cannot connect as this
table (throwing it off, so the broker publishes its "offline" will) nor as the backend (taking
its persistent session and the events queued in it)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.transports import create
from controller.transports.mqtt import MqttTransportSettings
from controller.transports.mqtt_health import MqttHealthPublisher
from support.journal_helpers import TABLE, fill
from support.waiting import wait_until
from testkit.backends import MqttReceiver

OTHER = "T8"
USERS = {TABLE: "table pass", f"{TABLE}-health": "table pass", "backend": "backend pass",
         OTHER: "other table", f"{OTHER}-health": "other table"}


class Impostor:
    """Another table's account asking for someone else's client id."""

    def __init__(self, port: int, client_id: str, clean_start: bool = True):
        self.connected = threading.Event()
        self.messages: list[bytes] = []
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=mqtt.MQTTv5)
        self.client.username_pw_set(OTHER, USERS[OTHER])
        self.client.on_connect = lambda *args: self.connected.set()
        self.client.on_message = lambda client, userdata, message: self.messages.append(
            message.payload)
        self.client.connect("127.0.0.1", port, clean_start=clean_start)
        self.client.loop_start()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


class StatusWatcher:
    """The backend (its one connection): the table's events, and its retained status and
    health topics, whose last wills say offline."""

    def __init__(self, port: int):
        self.seen: list[str] = []
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="status-watch",
                                  protocol=mqtt.MQTTv5)
        self.client.username_pw_set("backend", USERS["backend"])
        self.client.on_connect = lambda client, *args: client.subscribe(
            [(f"pokdeng/{TABLE}/{topic}", 1) for topic in ("events", "status", "health")])
        self.client.on_message = self._message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _message(self, client: Any, userdata: Any, message: Any) -> None:
        topic = message.topic.rsplit("/", 1)[-1]
        if topic != "events":
            self.seen.append(f"{topic}:{message.payload.decode()}")

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def table_transport(port: int, password: Path) -> Any:
    return create("mqtt", {"host": "127.0.0.1", "port": port, "protocol": "5",
                           "username": TABLE, "password_file": str(password),
                           "backoff_initial_s": 0.05, "backoff_max_s": 0.3}, table=TABLE)


def test_another_account_cannot_throw_the_table_off_with_its_client_ids(
        mosquitto_factory, tmp_path: Path) -> None:
    broker = mosquitto_factory(users=USERS, acl=True)
    password = tmp_path / "mqtt.password"
    password.write_text(USERS[TABLE] + "\n")
    journal = Journal(tmp_path / "journal.db")
    transport = table_transport(broker.port, password)
    settings = MqttTransportSettings(host="127.0.0.1", port=broker.port, username=TABLE,
                                     password_file=str(password))
    health = MqttHealthPublisher(settings, TABLE, will={"state": "offline"})
    watcher = StatusWatcher(broker.port)
    impostors: list[Impostor] = []
    try:
        with Outbox(journal.path, [transport]) as outbox:
            fill(journal, 3)
            outbox.notify()
            assert outbox.wait_delivered(journal.last_event_seq(), 10)
            health.publish({"state": "ready"})
            wait_until(lambda: 'health:{"state":"ready"}' in watcher.seen, 10, "the health")
            for client_id in (transport.client_id, health.client_id):
                impostors.append(Impostor(broker.port, client_id))
            wait_until(lambda: all(i.connected.is_set() for i in impostors), 10,
                       "the impostors to be let in (under their own identity)")
            fill(journal, 3)
            outbox.notify()
            assert outbox.wait_delivered(journal.last_event_seq(), 10)
            health.publish({"state": "betting"})
            wait_until(lambda: 'health:{"state":"betting"}' in watcher.seen, 10, "health")
            assert outbox.status()["mqtt"]["state"] == "ok"
            while_dealing = list(watcher.seen)  # before the table's own orderly "offline"
    finally:
        for impostor in impostors:
            impostor.close()
        health.close({"state": "offline"})
        watcher.close()
        journal.close()
    thrown_off = [seen for seen in while_dealing if "offline" in seen]
    assert thrown_off == [], f"the table was thrown off: {while_dealing}"


def test_another_account_cannot_take_the_backends_session(mosquitto_factory,
                                                          tmp_path: Path) -> None:
    broker = mosquitto_factory(users=USERS, acl=True)
    password = tmp_path / "mqtt.password"
    password.write_text(USERS[TABLE] + "\n")
    journal = Journal(tmp_path / "journal.db")
    backend = MqttReceiver(broker.port, TABLE, client_id="backend",
                           login=("backend", USERS["backend"]))
    backend.connect()
    wait_until(lambda: backend.sessions, 10, "the backend's session")
    backend.disconnect()  # away: the broker queues the table's events in its session
    impostor = None
    try:
        with Outbox(journal.path, [table_transport(broker.port, password)]) as outbox:
            written = fill(journal, 5)
            outbox.notify()
            assert outbox.wait_delivered(journal.last_event_seq(), 10)
            # the backend's client id, keeping the session: the queued events are the prize
            impostor = Impostor(broker.port, "backend", clean_start=False)
            wait_until(impostor.connected.is_set, 10, "the impostor to be let in")
            impostor.client.subscribe(f"pokdeng/{TABLE}/events", qos=1)
            backend.connect()
            wait_until(lambda: len(backend.stored) == len(written), 10,
                       "every queued event at the backend")
    finally:
        if impostor is not None:
            impostor.close()
        backend.close()
        journal.close()
    assert backend.sessions[-1] is True  # its own session, kept for it
    assert [e["seq"] for e in backend.stored] == [e["seq"] for e in written]
    assert backend.asked == [1]  # its first connect only (a new session): nothing went missing
    assert impostor is not None and [json.loads(m) for m in impostor.messages] == []
