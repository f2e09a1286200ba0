"""Ask before you deliver: a table whose state directory was restored from an earlier copy
sends no event to a backend before it has heard where that backend stands and compared it
with its journal — also when the backend is down at start and the table deals on meanwhile,
when the only backend is the events file, and when a kill and a cut WAL lost the journal's
tail. A backend's word with a number out of range is refused, and the table starts.

The histories are real demo tables (support/histories.py); the daemon is ``pokdeng-table run``
in its own process, against a real HTTP server, a real mosquitto, a real events file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import paho.mqtt.client as mqtt
import pytest
import yaml
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.durability.delivery.held import held_of
from controller.durability.head_file import head_path
from support.backends import need_mosquitto
from support.daemon_helpers import NotifyListener, stop_daemon
from support.histories import (
    EX_DATAERR,
    TABLE,
    config_for,
    conflicts,
    holding,
    journal_last_seq,
    pause,
    received,
    start,
    state_copy,
    status,
)
from support.journal_helpers import wal_frames_end
from support.waiting import wait_until
from testkit.backends import Mosquitto, free_port

WAITING = "waiting for the backend to say where it stands"



def ready_or_exit(proc: subprocess.Popen, notify: NotifyListener, timeout: float = 60) -> None:
    wait_until(lambda: proc.poll() is not None or any(
        m.get("READY") == "1" for m in notify.messages), timeout, "READY=1 or an exit")






def test_restored_during_an_http_outage_nothing_reaches_the_backend_before_the_check(
        histories, tmp_path) -> None:
    """The backend refuses connections at start; the table deals on (a pause: new events,
    whose ids the backend already holds); they wait, visibly; the backend comes up holding
    the newer history: the table stops (65) and not one event reached it."""
    held = received(histories["table"])
    state = state_copy(histories, "early", tmp_path)
    mine = received(state)[-1]["seq"]
    port = free_port()
    config = config_for(state, {"http": {"url": f"http://127.0.0.1:{port}/events",
                                         "allow_insecure": True, "backoff_initial_s": 0.05,
                                         "backoff_max_s": 0.3}}, confirm_s=0.5)
    metrics = tmp_path / "table.prom"
    settings = yaml.safe_load(config.read_text())
    config.write_text(yaml.safe_dump({**settings, "metrics": {"textfile": str(metrics),
                                                              "interval_s": 1}}))
    awaited = f'pokdeng_table_backend_word_awaited{{table="{TABLE}",transport="http"}} 1.0'
    proc, notify, log = start(config, tmp_path)
    backend = None
    try:
        notify.wait_for("READY", "1", timeout=60)
        pause(state)
        wait_until(lambda: status(state)["backend"]["http"]["backlog"] > 0, 20, "a backlog")
        http = status(state)["backend"]["http"]
        assert http["state"] == WAITING and http["delivered_seq"] == 0, http
        wait_until(lambda: metrics.exists() and awaited in metrics.read_text(), 20,
                   "the metric of a transport waiting for its backend's word")
        assert journal_last_seq(state) > mine  # dealt on: ids the backend holds, new bodies
        backend = holding(held, port=port, path="/events")
        wait_until(lambda: proc.poll() is not None, 30, "the table to stop on the fork")
    finally:
        if proc.poll() is None:
            stop_daemon(proc)
        notify.close()
        if backend is not None:
            backend.down()
    assert proc.returncode == EX_DATAERR, log.read_text()[-3000:]
    assert backend.events == [] and backend.conflicts == []  # asked, sent nothing
    assert backend.requests >= 1  # the ask: a batch of no events


def test_restored_during_an_mqtt_outage_nothing_reaches_the_backend_before_the_check(
        histories, tmp_path) -> None:
    """The broker is down at start; it comes back with the backend's retained position and
    the backend's persistent session: no event of the restored journal reaches the backend."""
    need_mosquitto()
    held = received(histories["table"])
    broker = Mosquitto(tmp_path)
    events_topic = f"pokdeng/{TABLE}/events"
    came: list[dict[str, Any]] = []

    def backend_session() -> mqtt.Client:
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="backend",
                             protocol=mqtt.MQTTv5)
        client.on_message = lambda _c, _u, message: came.append(json.loads(message.payload))
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = 3600
        client.connect("127.0.0.1", broker.port, clean_start=False, properties=properties)
        client.loop_start()
        client.subscribe(events_topic, qos=1)[1]
        return client

    broker.start()  # the backend's session and its position, kept over the broker's restart
    client = backend_session()
    client.publish(f"pokdeng/{TABLE}/held", json.dumps(held_of(held)), qos=1,
                   retain=True).wait_for_publish(5)
    time.sleep(0.5)  # the SUBACK of the session's subscription
    client.disconnect()
    client.loop_stop()
    broker.stop()
    state = state_copy(histories, "early", tmp_path)
    mine = received(state)[-1]["seq"]
    config = config_for(state, {"mqtt": {"host": "127.0.0.1", "port": broker.port,
                                         "protocol": "5", "backoff_initial_s": 0.05,
                                         "backoff_max_s": 0.3}}, confirm_s=0.5)
    proc, notify, log = start(config, tmp_path)
    client = None
    try:
        notify.wait_for("READY", "1", timeout=60)
        pause(state)
        wait_until(lambda: journal_last_seq(state) > mine, 20, "the pause journaled")
        assert status(state)["backend"]["mqtt"]["state"] == WAITING
        broker.start()
        client = backend_session()
        wait_until(lambda: proc.poll() is not None, 30, "the table to stop on the fork")
        time.sleep(1.0)  # anything the broker queued for the session has come
    finally:
        if proc.poll() is None:
            stop_daemon(proc)
        notify.close()
        if client is not None:
            client.disconnect()
            client.loop_stop()
        broker.stop()
    assert proc.returncode == EX_DATAERR, log.read_text()[-3000:]
    assert conflicts(held, came) == []
    assert came == []  # nothing was published before the check


def test_a_file_only_table_restored_behind_its_events_file_is_refused(histories,
                                                                      tmp_path) -> None:
    """The events file is the backend's copy: kept when the older state directory is put
    back, it holds events the journal no longer has."""
    state = state_copy(histories, "early", tmp_path)
    (state / "events.jsonl").write_bytes((histories["table"] / "events.jsonl").read_bytes())
    before = (state / "events.jsonl").read_bytes()
    config = config_for(state, {"file": {"path": str(state / "events.jsonl")}})
    proc, notify, log = start(config, tmp_path)
    try:
        ready_or_exit(proc, notify)
    finally:
        if proc.poll() is None:
            stop_daemon(proc)
        notify.close()
    assert proc.returncode == EX_DATAERR, log.read_text()[-3000:]
    text = log.read_text()
    assert "history has forked" in text
    assert f"up to seq {received(histories['table'])[-1]['seq']}" in text
    assert (state / "events.jsonl").read_bytes() == before  # not one line more


def test_a_file_only_table_with_its_own_file_starts_and_delivers(histories, tmp_path) -> None:
    state = state_copy(histories, "table", tmp_path)
    config = config_for(state, {"file": {"path": str(state / "events.jsonl")}})
    proc, notify, log = start(config, tmp_path)
    try:
        notify.wait_for("READY", "1", timeout=60)
        pause(state)
        last = journal_last_seq(state)
        wait_until(lambda: received(state)[-1]["seq"] == last, 20, "the pause delivered")
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-3000:]
        notify.close()
    lines = received(state)
    assert conflicts(lines, lines) == []
    assert held_of(lines)["seq"] == last


def test_a_kill_mid_shoe_and_a_wal_cut_to_half_is_refused(tmp_path) -> None:
    """The demo (the daemon, its events file) killed mid-shoe; the journal's WAL cut to half
    its size, as a disk that lost its last writes. The next start is refused: the journal
    lost events the file holds (or, the head file's record). Nothing is appended to the file."""
    state = tmp_path / "table"
    demo = subprocess.Popen(
        [sys.executable, "-m", "controller", "demo", "--speed", "50", "--quiet", "--seed", "3",
         "--state-dir", str(state), "--no-display"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    events = state / "events.jsonl"
    try:
        def two_rounds() -> bool:
            return events.exists() and len(
                [e for e in received(state) if e["type"] == "round_result"]) >= 2
        wait_until(two_rounds, 120, "two rounds dealt")
        time.sleep(0.3)  # mid-round: cards on their way
    finally:
        demo.send_signal(signal.SIGKILL)
        demo.wait(30)
    marked = head_path(state / "journal.sqlite").exists()  # written at the rounds' ends
    wal = state / "journal.sqlite-wal"
    size = wal_frames_end(wal)  # the file itself is kept allocated past its frames
    assert size > 32, "the WAL was checkpointed away: nothing to cut"
    os.truncate(wal, size // 2)
    (state / "journal.sqlite-shm").unlink(missing_ok=True)
    before = events.read_bytes()
    file_last = max(e["seq"] for e in received(state))
    config = config_for(state, {"file": {"path": str(events)}})
    proc, notify, log = start(config, tmp_path)
    try:
        ready_or_exit(proc, notify)
    finally:
        if proc.poll() is None:
            stop_daemon(proc)
        notify.close()
    text = log.read_text()
    assert proc.returncode == EX_DATAERR, text[-3000:]
    assert "journal is behind its head file" in text or f"up to seq {file_last}" in text, \
        text[-3000:]
    assert events.read_bytes() == before
    assert marked


@pytest.mark.parametrize("transport", ["http", "mqtt"])
def test_a_position_out_of_range_is_refused_and_the_table_starts(histories, tmp_path,
                                                                  transport, request) -> None:
    """``held`` with seq 2^63-1: refused with a log line naming the backend and the value;
    the table starts, and that backend's events wait (status says so) until it answers
    readably."""
    huge = 2**63 - 1
    bad = {"seq": huge, "sha256": "0" * 64}
    state = state_copy(histories, "early", tmp_path)
    webhook = broker = None
    if transport == "http":
        webhook = holding(received(state))
        webhook.reply_extra = {"held": bad}  # its first answer; then where it really stands
        options: dict[str, Any] = {"url": webhook.url, "allow_insecure": True}
    else:
        broker = request.getfixturevalue("mosquitto")
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="backend",
                             protocol=mqtt.MQTTv5)
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        client.publish(f"pokdeng/{TABLE}/held", json.dumps(bad), qos=1,
                       retain=True).wait_for_publish(5)
        client.disconnect()
        client.loop_stop()
        options = {"host": "127.0.0.1", "port": broker.port, "protocol": "5"}
    config = config_for(state, {transport: options}, confirm_s=2.0)
    proc, notify, log = start(config, tmp_path)
    try:
        notify.wait_for("READY", "1", timeout=60)
        if webhook is not None:  # its next answer is readable and holds: delivered
            wait_until(lambda: len(webhook.events) > 0, 20, "delivery after a readable answer")
        else:  # no other word: its events wait, and status says why
            figures = status(state)["backend"]["mqtt"]
            assert figures["state"] == WAITING and str(huge) in figures["last_error"], figures
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-3000:]
        notify.close()
        if webhook is not None:
            webhook.down()
    text = log.read_text()
    assert f"backend {transport}: what it says of where it stands is refused" in text
    assert str(huge) in text and "OverflowError" not in text
    if webhook is not None:
        assert webhook.conflicts == []
