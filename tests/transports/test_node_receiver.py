"""The reference receiver in Node.js (examples/node-receiver/, written from docs/backend.md)
against the real daemon over HTTP and MQTT: a sandbox table (``demo --config``) plays, is
killed mid-round and comes back; the receiver goes away, comes back without its MQTT session
and asks for a resend while the table is offline. Every event ends up stored once per
transport, in seq order, with the table's body; no id ever comes with two bodies; the table
never stops for a hash (its exit 65), and the receiver's ``held`` digest is the table's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.durability.canonical_form import event_digest
from support import node_packages
from support.waiting import wait_until
from testkit.backends import free_port

RECEIVER_DIR = Path(__file__).resolve().parents[2] / "examples" / "node-receiver"
TABLE = "T01"

pytestmark = [pytest.mark.mosquitto, pytest.mark.slow]


@pytest.fixture(scope="module")
def node() -> str:
    """node with the receiver's packages (``npm ci`` from its lock file when missing)."""
    return node_packages.node(RECEIVER_DIR, ("ajv", "canonicalize", "mqtt"))


class Receiver:
    """The Node receiver as a process: its store, and what it said on stdout."""

    def __init__(self, node: str, store: Path, secret: Path, http_port: int, broker_port: int,
                 client_id: str):
        self.store = store
        self.proc = subprocess.Popen(
            [node, str(RECEIVER_DIR / "receiver.js"), "--store", str(store),
             "--secret", f"{TABLE}={secret}", "--http-port", str(http_port),
             "--mqtt-url", f"mqtt://127.0.0.1:{broker_port}", "--mqtt-client-id", client_id],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.said: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        wait_until(lambda: any(s["what"] == "http listening" for s in self.said), 15,
                   "the receiver to listen", details=self.stderr)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.said.append(json.loads(line))

    def stderr(self) -> str:
        return "" if self.proc.poll() is None else (self.proc.stderr.read() or "")

    def stored(self, transport: str) -> list[dict]:
        path = self.store / transport / f"{TABLE}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(15)
        self._reader.join(5)


def events_written(state: Path) -> list[dict]:
    """The table's own record: its file transport's events, each id once, in seq order."""
    by_id: dict[str, dict] = {}
    path = state / "events.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        by_id.setdefault(event["id"], event)
    return sorted(by_id.values(), key=lambda e: e["seq"])


def mid_round(state: Path) -> bool:
    """The table's last round is open (opened, neither resulted nor cancelled)."""
    opened = ended = 0
    for event in events_written(state):
        if event["type"] == "round_opened":
            opened = event["seq"]
        elif event["type"] in ("round_result", "round_cancelled"):
            ended = event["seq"]
    return opened > ended


def retained_held(port: int) -> dict:
    """What the broker keeps on the table's held topic (the receiver's position)."""
    got: list[bytes] = []
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="held-reader",
                         protocol=mqtt.MQTTv5)
    client.on_message = lambda c, u, message: got.append(bytes(message.payload))
    client.connect("127.0.0.1", port)
    client.subscribe(f"pokdeng/{TABLE}/held", qos=1)
    client.loop_start()
    try:
        wait_until(lambda: got, 10, "the retained held message")
    finally:
        client.disconnect()
        client.loop_stop()
    return json.loads(got[-1])


def test_the_node_receiver_holds_every_event_once_through_kills_and_absences(
        node, mosquitto_factory, tmp_path: Path) -> None:
    broker = mosquitto_factory()
    secret = tmp_path / "secret"
    secret.write_text("studio-secret\n")
    http_port = free_port()
    sandbox = tmp_path / "sandbox.yaml"
    sandbox.write_text(f"""table:
  id: {TABLE}
transports:
  http:
    url: http://127.0.0.1:{http_port}/pokdeng/events
    allow_insecure: true
    secret_file: {secret}
    backoff_initial_s: 0.1
    backoff_max_s: 1
  mqtt:
    host: 127.0.0.1
    port: {broker.port}
    protocol: "5"
    secret_file: {secret}
    backoff_initial_s: 0.1
    backoff_max_s: 1
""")
    state, store = tmp_path / "state", tmp_path / "store"
    table_args = [sys.executable, "-m", "controller", "demo", "--config", str(sandbox),
                  "--state-dir", str(state), "--no-display", "--quiet", "--speed", "20",
                  "--seed", "3"]
    receiver = Receiver(node, store, secret, http_port, broker.port, "backend-1")
    table = subprocess.Popen([*table_args, "--rounds", "100"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: sum(e["type"] == "round_result" for e in receiver.stored("http"))
                   >= 2, 60, "two rounds at the receiver")
        receiver.stop()  # the backend goes away; the table deals on
        away_from = len(events_written(state))
        wait_until(lambda: len(events_written(state)) > away_from + 20 and mid_round(state),
                   60, "the table to deal on, and be mid-round")
        table.send_signal(signal.SIGKILL)  # the table dies mid-round
        table.wait(15)
        assert mid_round(state)

        # The receiver comes back without its MQTT session (another client id): it asks the
        # table, which is offline, to resend from the next event it needs.
        receiver = Receiver(node, store, secret, http_port, broker.port, "backend-2")
        wait_until(lambda: any(s["what"] == "resend asked" and s["transport"] == "mqtt"
                               for s in receiver.said), 15, "the receiver to ask")
        asked = next(s["from_seq"] for s in receiver.said
                     if s["what"] == "resend asked" and s["transport"] == "mqtt")
        assert asked == len(receiver.stored("mqtt")) + 1

        again = subprocess.run([*table_args, "--rounds", "2"], capture_output=True, text=True,
                               timeout=180)
        assert again.returncode == 0, again.stderr  # 65 would be a table stopped for a hash
        written = events_written(state)
        wait_until(lambda: all(len(receiver.stored(t)) == len(written)
                               for t in ("http", "mqtt")), 60,
                   "every event at the receiver, on both transports",
                   details=lambda: f"http {len(receiver.stored('http'))}, mqtt "
                                   f"{len(receiver.stored('mqtt'))} of {len(written)}")
        # the receiver says where it stands after it stored: the last word may come a moment
        # after the last event was stored, on a busy machine
        last = {"seq": len(written), "sha256": event_digest(written[-1])}
        seen: list[dict] = []
        wait_until(lambda: seen.append(retained_held(broker.port)) or seen[-1] == last, 30,
                   "the receiver's retained position at the last event",
                   details=lambda: f"retained {seen[-1:]}, last event {last}")
        held = seen[-1]
        # the one request, made while the table was off, brought everything back: the
        # table's session kept it (a request lost there would leave a gap, and a second ask)
        mqtt_asks = [s["from_seq"] for s in receiver.said
                     if s["what"] == "resend asked" and s["transport"] == "mqtt"]
        assert mqtt_asks == [asked]
    finally:
        if table.poll() is None:
            table.kill()
        receiver.stop()
    assert [e["seq"] for e in written] == list(range(1, len(written) + 1))
    for transport in ("http", "mqtt"):
        # once each, in seq order, with the very body the table journaled
        assert receiver.stored(transport) == written, transport
    alarms = store / "alarms.jsonl"
    assert not alarms.exists() or alarms.read_text() == ""  # no id with two bodies, no bad
    #                                                         signature, no schema failure
    assert held == {"seq": len(written), "sha256": event_digest(written[-1])}
    assert os.path.getsize(state / "journal.sqlite") > 0
