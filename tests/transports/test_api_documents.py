"""The contract as documents machines read (docs/api/): the OpenAPI 3.1 document of the webhook
and the AsyncAPI 3.0.0 document of the MQTT topics are valid by their own specifications, and
every message the real transports exchange — HTTP batches and answers with the tests' real
webhook server, MQTT messages both ways on a real broker — matches the schema the documents
give it, loaded as docs/backend.md says (by ``$id``)."""

from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml
from jsonschema import Draft7Validator, Draft202012Validator
from openapi_spec_validator import validate as validate_openapi
from openapi_spec_validator.readers import read_from_filename
from paho.mqtt.enums import CallbackAPIVersion

from controller.service.telemetry.health import health_message, offline_message
from controller.table.machine import MachineSettings
from controller.transports.http import HttpTransport, HttpTransportSettings
from controller.transports.mqtt import MqttTransport, MqttTransportSettings
from controller.transports.mqtt_health import MqttHealthPublisher
from support.canonical_journals import events_sent, table_inputs, write_journal
from support.node_packages import node_packages
from support.waiting import wait_until
from testkit.backends import MqttReceiver, WebhookBackend, documented_schema_loader

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
TABLE = "T7"


@pytest.fixture(scope="module")
def loader():
    return documented_schema_loader()


@pytest.fixture(scope="module")
def registry(loader):
    return loader.schema_registry(loader.schema_files(ROOT))


def schema_at(document: Path, ref: str, loader, registry) -> Draft202012Validator:
    """The validator of a document's ``$ref`` to a schema file, by that file's ``$id``."""
    schema = json.loads((document.parent / ref).read_text(encoding="utf-8"))
    return loader.validator(registry, schema["$id"].removeprefix(loader.ID_BASE))


def problems(validator: Draft202012Validator, value: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path)) or '(message)'}: {e.message[:200]}"
            for e in validator.iter_errors(value)]


@pytest.fixture(scope="module")
def journal_events(tmp_path_factory) -> list[dict[str, Any]]:
    """Real events of a real journal (a shoe's first rounds and clock reports), as sent."""
    path = tmp_path_factory.mktemp("api") / "journal.sqlite"
    write_journal(path, table_inputs(60), MachineSettings(table_id=TABLE))
    return events_sent(path)


# -- the documents ----------------------------------------------------------------------------


def test_the_openapi_document_is_valid_openapi_3_1() -> None:
    spec, url = read_from_filename(str(API / "openapi.yaml"))
    assert spec["openapi"].startswith("3.1")
    validate_openapi(spec, base_uri=url)
    broken = copy.deepcopy(spec)
    del broken["paths"]["/events"]["post"]["parameters"][0]["in"]
    with pytest.raises(Exception, match="'in' is a required property"):  # it does check
        validate_openapi(broken, base_uri=url)


def test_the_asyncapi_document_is_valid_by_the_official_3_0_0_schema() -> None:
    official = json.loads((node_packages() / "node_modules" / "@asyncapi" / "specs" / "schemas"
                           / "3.0.0.json").read_text(encoding="utf-8"))
    document = yaml.safe_load((API / "asyncapi.yaml").read_text(encoding="utf-8"))
    assert document["asyncapi"] == "3.0.0"
    validator = Draft7Validator(official)
    assert [e.message[:300] for e in validator.iter_errors(document)] == []
    broken = copy.deepcopy(document)
    broken["operations"]["sendEvents"]["action"] = "publish"  # AsyncAPI 2's word
    assert list(validator.iter_errors(broken))
    assert set(document["channels"]) == {"events", "status", "health", "resend", "held"}


def test_every_schema_file_and_reference_of_the_documents_resolves(loader, registry) -> None:
    """Each ``$ref`` of both documents names a schema file, and each schema's own references
    resolve in the registry by ``$id`` (a missing one fails here, not at a backend)."""
    for name in ("openapi.yaml", "asyncapi.yaml"):
        text = (API / name).read_text(encoding="utf-8")
        refs = {line.split("$ref:", 1)[1].strip().strip('"') for line in text.splitlines()
                if "$ref:" in line and "#/" not in line}
        assert refs, name
        for ref in refs:
            assert (API / ref).is_file(), f"{name}: {ref}"
            schema_at(API / name, ref, loader, registry).is_valid({})  # resolves every $ref
    for path in loader.schema_files(ROOT):
        schema = json.loads(path.read_text(encoding="utf-8"))
        loader.validator(registry, schema["$id"].removeprefix(loader.ID_BASE)).is_valid(None)


# -- HTTP -------------------------------------------------------------------------------------


class RecordingWebhook(WebhookBackend):
    """The tests' real webhook server, keeping every request with the answer it got."""

    def __init__(self, secret: bytes):
        self.exchanges: list[tuple[dict[str, str], bytes, int, bytes]] = []
        super().__init__(secret)

    def _reply(self, handler, status: int, body: bytes,  # type: ignore[override]
               headers: dict[str, str] | None = None) -> None:
        with self.lock:
            headers_in, body_in = self.last_request or ({}, b"")
            self.exchanges.append((headers_in, body_in, status, body))
        WebhookBackend._reply(handler, status, body, headers)


def test_the_webhooks_batches_and_answers_match_the_openapi_document(
        tmp_path, journal_events, loader, registry) -> None:
    document = yaml.safe_load((API / "openapi.yaml").read_text(encoding="utf-8"))
    post = document["paths"]["/events"]["post"]
    batch = schema_at(API / "openapi.yaml",
                      post["requestBody"]["content"]["application/json"]["schema"]["$ref"],
                      loader, registry)
    answer = schema_at(API / "openapi.yaml",
                       post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
                       loader, registry)
    headers = {p["name"].lower(): (p["required"], Draft202012Validator(p["schema"]))
               for p in post["parameters"] if p["in"] == "header"}
    secret = tmp_path / "secret"
    secret.write_bytes(b"api-document-secret\n")
    backend = RecordingWebhook(b"api-document-secret")
    transport = HttpTransport(HttpTransportSettings(backend.url, str(secret), allow_insecure=True,
                                                    batch_max=25), table=TABLE)
    try:
        transport.ask_held()  # the start-up ask: a batch with no events
        for start in range(0, len(journal_events), 25):
            if start == 50:
                backend.reply_extra = {"resend_from": 3}  # an answer that asks again
            transport.deliver(journal_events[start:start + 25])
        backend.fail_with = [503]
        with pytest.raises(Exception, match="503"):
            transport.deliver(journal_events[-1:])
    finally:
        transport.close()
        backend.down()
    assert len(backend.exchanges) >= 4
    for sent_headers, body, status, reply in backend.exchanges:
        sent = {name.lower(): value for name, value in sent_headers.items()}
        for name, (required, validator) in headers.items():
            assert name in sent or not required, f"header {name} missing"
            if name in sent:
                assert problems(validator, sent[name]) == [], (name, sent[name])
        assert problems(batch, json.loads(body)) == []
        codes = set(post["responses"])
        assert str(status) in codes or f"{str(status)[0]}XX" in codes, status
        if 200 <= status < 300:
            assert problems(answer, json.loads(reply)) == [], reply
    bodies = [json.loads(body) for _, body, _, _ in backend.exchanges]
    assert bodies[0]["events"] == []  # the start-up ask
    assert sum(len(b["events"]) for b in bodies) >= len(journal_events)
    replies = [json.loads(reply) for _, _, status, reply in backend.exchanges if status == 200]
    assert any("resend_from" in r for r in replies) and all("held" in r for r in replies)
    assert any(r["held"]["seq"] > 0 for r in replies)


# -- MQTT -------------------------------------------------------------------------------------


class TopicRecorder:
    """A paho client recording every message under pokdeng/<table>/ (payload, topic)."""

    def __init__(self, port: int):
        self.messages: list[tuple[str, bytes]] = []
        self.changed = threading.Condition()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"rec-{time.time()}",
                                  protocol=mqtt.MQTTv5)
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.on_connect = lambda c, *args: c.subscribe(f"pokdeng/{TABLE}/#", qos=1)
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        assert subscribed.wait(10), "the recorder could not subscribe"

    def _on_message(self, client, userdata, message) -> None:
        with self.changed:
            self.messages.append((message.topic.rsplit("/", 1)[1], bytes(message.payload)))
            self.changed.notify_all()

    def kinds(self) -> set[str]:
        with self.changed:
            return {kind for kind, _ in self.messages}

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.mark.mosquitto
def test_the_mqtt_messages_both_ways_match_the_asyncapi_document(
        mosquitto, journal_events, loader, registry) -> None:
    document = yaml.safe_load((API / "asyncapi.yaml").read_text(encoding="utf-8"))
    validators = {}
    for channel, spec in document["channels"].items():  # the topic's last level: its channel
        [message] = spec["messages"].values()
        name = message["$ref"].rsplit("/", 1)[1]
        payload = document["components"]["messages"][name]["payload"]
        validators[channel] = schema_at(API / "asyncapi.yaml", payload["schema"]["$ref"],
                                        loader, registry)
    recorder = TopicRecorder(mosquitto.port)
    settings = MqttTransportSettings("127.0.0.1", mosquitto.port, protocol="5",
                                     reconnect_min_s=0.1, reconnect_max_s=0.5)
    receiver = MqttReceiver(mosquitto.port, TABLE)  # the documented backend: held and resend
    receiver.connect()  # a new session: it asks to resend from seq 1
    transport = MqttTransport(settings, table=TABLE)
    health = MqttHealthPublisher(settings, TABLE, will=offline_message(TABLE, "connection lost"))
    try:
        transport.deliver(journal_events)
        machine_status = {"table": TABLE, "state": "betting", "paused": False, "shoe": 1,
                          "round": 2, "devices": {"shoe": True, "panel": True}}
        health.publish(health_message(machine_status, {"mqtt": {"backlog": 0, "state": "ok"}},
                                      {"bytes": 4096, "records": 120}))
        wait_until(lambda: receiver.in_order.next_seq > journal_events[-1]["seq"], 30,
                   "the backend to store every event")
        wait_until(lambda: {"events", "status", "health", "resend", "held"} <= recorder.kinds(),
                   30, "a message on every topic", details=recorder.kinds)
    finally:
        health.close(offline_message(TABLE, "shutdown"))
        transport.close()
        receiver.disconnect()
    wait_until(lambda: sum(1 for kind, payload in recorder.messages if kind == "status"
                           and b'"offline"' in payload) >= 1, 10, "the offline status")
    recorder.close()
    counts: dict[str, int] = {}
    for kind, payload in recorder.messages:
        counts[kind] = counts.get(kind, 0) + 1
        assert problems(validators[kind], json.loads(payload)) == [], (kind, payload[:300])
    assert counts["events"] >= len(journal_events) and counts["status"] >= 2
    assert counts["health"] >= 2 and counts["held"] >= 1 and counts["resend"] >= 1


def test_the_message_schemas_refuse_what_the_contract_does_not_allow(
        journal_events, loader, registry) -> None:
    """The schemas are not permissive: a card value in a card_dealt event (sealed), a batch
    without its table, a digest in capitals, a resend from 0, a status with a field the
    table does not send."""
    def valid(name: str, value: Any) -> bool:
        return loader.validator(registry, name).is_valid(value)

    dealt = next(e for e in journal_events if e["type"] == "card_dealt")
    assert valid("api/event.json", dealt)
    assert not valid("api/event.json", {**dealt, "data": {**dealt["data"], "card": "AS"}})
    assert valid("api/batch.json", {"table": TABLE, "events": [dealt]})
    assert not valid("api/batch.json", {"events": [dealt]})
    assert valid("api/held.json", {"seq": 3, "sha256": "a" * 64})
    assert not valid("api/held.json", {"seq": 3, "sha256": "A" * 64})
    assert not valid("api/held.json", {"seq": 0, "sha256": "a" * 64})
    assert not valid("api/resend.json", {"from_seq": 0})
    assert not valid("api/answer.json", {"resend_from": "3"})
    online = {"state": "online", "table": TABLE, "client_id": "c", "software": "pokdeng-table/1",
              "since": "2026-12-01T10:00:00.000Z", "connected_at": "2026-12-01T10:00:01.000Z"}
    assert valid("api/status.json", online)
    assert not valid("api/status.json", {**online, "card": "AS"})


def test_a_javascript_backend_loads_the_schemas_by_id_and_validates_the_same_messages(
        journal_events, loader) -> None:
    """docs/backend.md's Ajv recipe (tests/node/validate.js) in a real node process: the
    table's real batch validates, a batch with a card value in a card_dealt event does not."""
    import subprocess

    from support.node_packages import node

    dealt = next(i for i, e in enumerate(journal_events) if e["type"] == "card_dealt")
    sealed = [dict(e) for e in journal_events]
    sealed[dealt] = {**sealed[dealt], "data": {**sealed[dealt]["data"], "card": "AS"}}
    lines = [json.dumps({"table": TABLE, "events": journal_events}),
             json.dumps({"table": TABLE, "events": []}),
             json.dumps({"table": TABLE, "events": sealed})]
    files = [str(path) for path in loader.schema_files(ROOT)]
    done = subprocess.run(
        [node(), str(node_packages() / "validate.js"), *files, loader.ID_BASE + "api/batch.json"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = done.stdout.splitlines()
    assert verdicts[:2] == ["ok", "ok"]
    assert verdicts[2] != "ok" and "additionalProperties" in verdicts[2]
