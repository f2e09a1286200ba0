"""A backend that asks from seq 1 gets every event, archived shoes included, exactly as first sent.

Real parts throughout: a journal written the daemon's way (machine, then append), an outbox
delivering to the real webhook or through a real mosquitto to docs/backend.md's receiver,
retention's own ``archive_closed_shoes`` cutting the journal behind delivered shoes, and the
archive files it wrote read back for the resend.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
from pathlib import Path

import pytest

from controller.durability.archives.archive import (
    MANIFEST_NAME,
    archive_closed_shoes,
    archive_dir_for,
    export_with_archives,
)
from controller.durability.archives.archive_resend import ArchiveSource
from controller.durability.delivery.anchors import strip_anchor
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import DeviceStatus
from controller.table.machine import MachineSettings, TableMachine
from controller.transports import create
from support.waiting import wait_until
from testkit.backends import MqttReceiver, WebhookBackend

TABLE = "T7"
SETTINGS = MachineSettings(table_id=TABLE, decks=1)  # one-deck shoes: a few rounds each
KEY = b"k" * 32


class ArchivingTable:
    """Shoes journaled the daemon's way while an outbox delivers them; after each shoe, once
    every transport has it, retention archives it (one archive file per shoe)."""

    def __init__(self, path: Path, key: bytes | None = None):
        self.path = path
        self.key = key
        self.machine = TableMachine(SETTINGS)
        self.journal = Journal(path, key)
        self.clock = 0.0
        self.archived_up_to = 0  # the last archived event's seq

    def feed(self, inputs) -> None:
        for inp in inputs:
            self.journal.append(inp, self.machine.handle(inp))
            self.clock = max(self.clock, inp.at)

    def shoe(self, seed: int) -> None:
        self.feed(shoe_script(seed, decks=1, start_at=self.clock + 5))
        at = self.clock + 1  # something between shoes, as a real table has
        self.feed([DeviceStatus(at=at, name="panel", connected=False),
                   DeviceStatus(at=at + 1, name="panel", connected=True)])

    def archive(self, outbox: Outbox) -> None:
        outbox.notify()
        last = self.journal.last_event_seq()
        assert outbox.wait_delivered(last, 20)
        # archiving reads the positions recorded in the journal, a moment after the outbox's
        conn = self.journal.database()
        wait_until(lambda: conn.execute("SELECT MIN(last_seq) FROM delivery").fetchone()[0]
                   >= last, 5, "the delivered position recorded")
        result = archive_closed_shoes(self.path, 0.0, settings=SETTINGS, key=self.key)
        assert result.archived, result.describe()
        self.archived_up_to = result.last_seq

    def archived_shoes_then_live(self, outbox: Outbox, archived: int, live_inputs: int) -> int:
        """Shoes 1..``archived`` played and archived, then the first ``live_inputs`` inputs
        of the next shoe journaled and delivered; returns the last event's seq."""
        for seed in range(1, archived + 1):
            self.shoe(seed)
            self.archive(outbox)
        self.feed(shoe_script(archived + 1, decks=1, start_at=self.clock + 5)[:live_inputs])
        outbox.notify()
        horizon = self.journal.last_event_seq()
        assert outbox.wait_delivered(horizon, 20)
        return horizon

    def archives(self) -> ArchiveSource:
        return ArchiveSource.beside(self.path, key=self.key)

    def close(self) -> None:
        self.journal.close()


def first_bodies(events: list[dict]) -> dict[str, dict]:
    """Each id's body as it first arrived."""
    first: dict[str, dict] = {}
    for event in events:
        first.setdefault(event["id"], event)
    return first


@pytest.mark.slow
@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "keyed"])
def test_http_backend_asking_from_seq_1_gets_archived_shoes_as_first_sent(
        tmp_path, webhook_secret, key, caplog):
    webhook = WebhookBackend(webhook_secret.read_bytes().rstrip(b"\n"))
    table = ArchivingTable(tmp_path / "journal.sqlite", key)
    transport = create("http", {"url": webhook.url, "secret_file": str(webhook_secret),
                                "allow_insecure": True, "batch_max": 40,
                                "backoff_initial_s": 0.01, "backoff_max_s": 0.05},
                       table=TABLE)
    try:
        with caplog.at_level(logging.INFO, logger="pokdeng.outbox"), \
                Outbox(table.path, [transport], idle_poll_s=0.05, resend_interval_s=0.1,
                       archives=table.archives()) as outbox:
            table.archived_shoes_then_live(outbox, 3, 30)  # shoe 4 live
            assert len(list(archive_dir_for(table.path).glob("*.jsonl.gz"))) == 3

            # The backend's next 2xx asks for everything again, from seq 1: the reply to one
            # input's events, so the resend's horizon (what was delivered when it was asked)
            # is the journal's end. (With two inputs the outbox's poll could send the first
            # alone, and the ask would come before the second's events.)
            webhook.reply_extra = {"resend_from": 1}
            table.feed(shoe_script(4, decks=1, start_at=table.clock + 5)[30:31])
            outbox.notify()
            horizon = table.journal.last_event_seq()
            wait_until(lambda: f"resend done up to seq {horizon}" in caplog.text, 20,
                       "the resend", details=lambda: outbox.status())
    finally:
        table.close()
        webhook.down()

    assert f"resending seq 1-{table.archived_up_to} from the archives (checked)" in caplog.text
    first_delivery, resent = webhook.events[:horizon], webhook.events[horizon:]
    assert [e["seq"] for e in first_delivery] == list(range(1, horizon + 1))
    assert [e["seq"] for e in resent] == list(range(1, horizon + 1))  # every one, in order
    assert resent == first_delivery          # the same bodies and anchors as the first time
    assert webhook.conflicts == [] and webhook.bad_signatures == 0
    archived = [e for e in resent if e["seq"] <= table.archived_up_to]
    if key is None:   # a plain chain held back the anchors of open betting windows, then too
        assert 0 < sum("anchor" in e for e in archived) < len(archived)
    else:
        assert all("anchor" in e for e in archived)
    journaled = [json.loads(body) for body in export_with_archives(table.path)]
    assert [strip_anchor(e) for e in resent] == journaled


@pytest.mark.slow
@pytest.mark.mosquitto
def test_mqtt_backend_starting_late_catches_up_through_the_archives(mosquitto, tmp_path,
                                                                    webhook_secret):
    table = ArchivingTable(tmp_path / "journal.sqlite")
    early = MqttReceiver(mosquitto.port, TABLE, client_id="backend-early")
    late = MqttReceiver(mosquitto.port, TABLE, client_id="backend-late")
    transport = create("mqtt", {"host": "127.0.0.1", "port": mosquitto.port, "protocol": "5",
                                "reconnect_min_s": 0.1, "reconnect_max_s": 0.3,
                                "backoff_initial_s": 0.05, "backoff_max_s": 0.3}, table=TABLE)
    try:
        with Outbox(table.path, [transport], idle_poll_s=0.05, resend_interval_s=0.1,
                    archives=table.archives()) as outbox:
            early.connect()
            wait_until(lambda: early.sessions, 5, "the early backend to connect")
            horizon = table.archived_shoes_then_live(outbox, 2, 30)
            wait_until(lambda: len(early.stored) == horizon, 10, "the first delivery")

            late.connect()  # a new session: the documented receiver asks from seq 1
            wait_until(lambda: len(late.stored) == horizon, 20, "the late backend",
                       details=lambda: f"stored {len(late.stored)}, asked {late.asked}")
    finally:
        early.close()
        late.close()
        table.close()
    assert late.asked == [1]
    assert table.archived_up_to > 0
    first_payloads = {json.loads(p)["id"]: p for p in reversed(early.payloads)}
    late_payloads = {json.loads(p)["id"]: p for p in late.payloads}
    # every event once, in order, each the very bytes the early backend first received
    assert [e["seq"] for e in late.stored] == list(range(1, horizon + 1))
    assert all(late_payloads[i] == first_payloads[i] for i in late_payloads)
    assert late.stored == early.stored


def edit_an_event(archive: Path) -> int:
    """Change one archived event's body and recompress the file: the record's number."""
    lines = gzip.decompress(archive.read_bytes()).decode().splitlines()
    index = next(i for i, line in enumerate(lines[1:], 1) if json.loads(line)["kind"] == "event")
    record = json.loads(lines[index])
    record["body"] = record["body"].replace('"type":', '"type": ', 1)  # another byte, same JSON
    lines[index] = json.dumps(record, sort_keys=True, separators=(",", ":"))
    archive.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return int(record["n"])


@pytest.mark.parametrize("damage", ["file", "file-and-manifest", "manifest-range"])
def test_a_damaged_archive_is_not_sent_and_the_resend_starts_at_the_live_journal(
        tmp_path, caplog, damage):
    table = ArchivingTable(tmp_path / "journal.sqlite", KEY)
    sink = tmp_path / "sink.jsonl"
    transport = create("file", {"path": str(sink)}, table=TABLE)
    try:
        with caplog.at_level(logging.INFO, logger="pokdeng.outbox"), \
                Outbox(table.path, [transport], idle_poll_s=0.05, resend_interval_s=0.1,
                       archives=table.archives()) as outbox:
            horizon = table.archived_shoes_then_live(outbox, 2, 20)
            transport.request_resend(1)  # sound archives: walked, and remembered as such
            wait_until(lambda: caplog.text.count(f"resend done up to seq {horizon}") == 1, 10,
                       "the first resend")
            whole = len(sink.read_text().splitlines())
            assert whole == 2 * horizon

            directory = archive_dir_for(table.path)
            manifest_path = directory / MANIFEST_NAME
            manifest = json.loads(manifest_path.read_text())
            damaged = directory / manifest["archives"][1]["file"]
            if damage == "manifest-range":  # an entry that lost its end
                del manifest["archives"][1]["last_hash"]
                problem = f"{MANIFEST_NAME}: {damaged.name}: its range is incomplete"
            else:
                record = edit_an_event(damaged)
                problem = f"{damaged.name}: damaged or edited: its SHA-256 differs from the " \
                    "manifest"
            if damage == "file-and-manifest":  # someone who also fixed the manifest's SHA-256
                manifest["archives"][1]["sha256"] = hashlib.sha256(
                    damaged.read_bytes()).hexdigest()
                problem = f"{damaged.name}: record {record}: hash does not match the record's " \
                    "contents"
            manifest_path.write_text(json.dumps(manifest))
            transport.request_resend(1)
            wait_until(lambda: caplog.text.count(f"resend done up to seq {horizon}") == 2, 10,
                       "the second resend")
    finally:
        table.close()
    resent = [json.loads(line)["seq"] for line in sink.read_text().splitlines()[whole:]]
    assert resent == list(range(table.archived_up_to + 1, horizon + 1))
    assert problem in caplog.text
    assert f"events up to seq {table.archived_up_to} are archived and cannot be read" in caplog.text


def test_a_resend_is_bounded_from_where_the_backend_asked_and_goes_on_when_asked_again(
        tmp_path, caplog):
    """At most resend_max_events per request, from the seq asked: a backend catching up from
    seq 1 gets 1..N, then asks from N+1 (the last N events would leave it a gap forever)."""
    table = ArchivingTable(tmp_path / "journal.sqlite")
    sink = tmp_path / "sink.jsonl"
    transport = create("file", {"path": str(sink)}, table=TABLE)
    try:
        with caplog.at_level(logging.INFO, logger="pokdeng.outbox"), \
                Outbox(table.path, [transport], idle_poll_s=0.05, resend_interval_s=0.1,
                       resend_max_events=40) as outbox:
            for seed in (1, 2):
                table.shoe(seed)
                table.archive(outbox)
            assert table.archived_up_to > 80  # both windows come from the archives
            delivered = len(sink.read_text().splitlines())
            for ask, done in ((1, 40), (41, 80)):
                transport.request_resend(ask)
                wait_until(lambda d=done: f"resend done up to seq {d}" in caplog.text, 10,
                           f"the resend from {ask}")
                assert f"(ask again from seq {done + 1} for more)" in caplog.text
    finally:
        table.close()
    resent = [json.loads(line)["seq"] for line in sink.read_text().splitlines()[delivered:]]
    assert resent == list(range(1, 81))
