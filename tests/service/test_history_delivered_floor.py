"""A backend's word weighed against the journal's own proof: a backend that says it holds less
than this table delivered to it (an HTTP answer of seq 0, now and then or always; no retained
position on an MQTT broker restarted without persistence; an events file rotated away or cut
by hand) is not believed. Its events wait, visibly in status, and not one reaches it; a
backend whose real position comes later stops a restored table as before (65).

Each table first delivers to its backend for real (the daemon, ``pokdeng-table run``, against
a real HTTP server, a real mosquitto, a real events file), so its journal's ``delivery`` row
is what a table that ran writes; its state directory is then put back or its file changed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.durability.delivery.held import held_of
from support.backends import need_mosquitto
from support.daemon_helpers import stop_daemon
from support.histories import (
    EX_DATAERR,
    TABLE,
    config_for,
    conflicts,
    holding,
    journal_last_seq,
    pause,
    pokdeng,
    received,
    start,
    state_copy,
    status,
)
from support.waiting import wait_until
from testkit.backends import Mosquitto

WAITING = "waiting for the backend to say where it stands"







def deliver_all(config: Path, state: Path, transport: str, tmp_path: Path) -> int:
    """Run the table until everything in its journal is delivered to ``transport``, and stop
    it: the journal's delivery row then says so. The seq delivered up to."""
    proc, notify, log = start(config, tmp_path, "first")
    try:
        notify.wait_for("READY", "1", timeout=60)
        last = journal_last_seq(state)
        wait_until(lambda: status(state)["backend"][transport]["delivered_seq"] >= last, 30,
                   f"everything delivered to {transport}")
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-3000:]
        notify.close()
    return last


def waits_behind(state: Path, transport: str, floor: int) -> dict[str, Any]:
    """Wait until status shows ``transport``'s events held back below ``floor``."""
    def held_back() -> bool:
        figures = status(state)["backend"][transport]
        return figures["state"] == WAITING and \
            f"delivered up to seq {floor} to it" in (figures["last_error"] or "")
    wait_until(held_back, 20, f"{transport} held back, visibly")
    figures: dict[str, Any] = status(state)["backend"][transport]
    return figures


@pytest.mark.parametrize("answers", ["always zero", "flip"])
def test_an_http_backend_saying_it_holds_less_than_delivered_is_not_believed(
        histories, tmp_path, answers) -> None:
    """The table delivered seq 1..N to the backend; its state directory is put back; the
    backend answers "holds nothing" (always, or every other time, the other answers naming
    its real, newer position). Not one event reaches it: always zero, the events wait and
    status says why; a flip, the real answer stops the table (65)."""
    state = state_copy(histories, "early", tmp_path)
    first = holding(received(state))
    config = config_for(state, {"http": {"url": first.url, "allow_insecure": True,
                                         "backoff_initial_s": 0.05, "backoff_max_s": 0.3}},
                        confirm_s=2.0)
    try:
        floor = deliver_all(config, state, "http", tmp_path)
    finally:
        first.down()
    restored = tmp_path / "restored"
    shutil.copytree(state, restored, ignore=shutil.ignore_patterns("*.sock", "shoe.pty"))
    held = received(histories["table"]) if answers == "flip" else first.stored
    backend = holding(held)
    zero = {"held": {"seq": 0}}
    backend.replies_extra = [zero] * 1000 if answers == "always zero" else \
        [zero if i % 2 == 0 else {} for i in range(1000)]
    config = config_for(restored, {"http": {"url": backend.url, "allow_insecure": True,
                                            "backoff_initial_s": 0.05,
                                            "backoff_max_s": 0.3}}, confirm_s=2.0)
    proc, notify, log = start(config, tmp_path, "restored")
    try:
        wait_until(lambda: proc.poll() is not None or any(
            m.get("READY") == "1" for m in notify.messages), 60, "READY=1 or an exit")
        if answers == "always zero":
            pause(restored)
            wait_until(lambda: journal_last_seq(restored) > floor, 20, "the pause journaled")
            figures = waits_behind(restored, "http", floor)
            assert "http says it holds nothing of this table" in figures["last_error"]
            time.sleep(2.0)  # a few more asks, each answered "nothing"
            assert backend.requests >= 3
        else:  # a pause if it is still up: an id the backend holds, with another body
            pokdeng("supervisor", "pause", "--socket", str(restored / "c.sock"), timeout=30)
            wait_until(lambda: proc.poll() is not None, 30, "the table to stop on the fork")
    finally:
        code = stop_daemon(proc)
        notify.close()
        backend.down()
    assert code == (0 if answers == "always zero" else EX_DATAERR), log.read_text()[-3000:]
    assert backend.events == [] and backend.conflicts == []


def test_an_mqtt_broker_restarted_without_the_position_holds_the_events_back(
        histories, tmp_path) -> None:
    """The table delivered seq 1..N over MQTT; the broker restarts without persistence (the
    retained position and the backend's session gone) and the state directory is put back.
    The silence is not "holds nothing": no event is published, status says why, and the
    backend's position, published late, stops the table (65)."""
    need_mosquitto()
    (tmp_path / "broker").mkdir()
    broker = Mosquitto(tmp_path / "broker", persistence=False)
    topic = f"pokdeng/{TABLE}"
    came: list[dict[str, Any]] = []

    def backend() -> mqtt.Client:
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="backend",
                             protocol=mqtt.MQTTv5)
        client.on_message = lambda _c, _u, message: came.append(json.loads(message.payload))
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        client.subscribe(f"{topic}/events", qos=1)[1]
        return client

    state = state_copy(histories, "early", tmp_path)
    config = config_for(state, {"mqtt": {"host": "127.0.0.1", "port": broker.port,
                                         "protocol": "5", "backoff_initial_s": 0.05,
                                         "backoff_max_s": 0.3}}, confirm_s=2.0)
    broker.start()
    client = backend()
    client.publish(f"{topic}/held", json.dumps(held_of(received(state))), qos=1,
                   retain=True).wait_for_publish(5)
    try:
        floor = deliver_all(config, state, "mqtt", tmp_path)
    finally:
        client.disconnect()
        client.loop_stop()
        broker.stop()
    restored = tmp_path / "restored"
    shutil.copytree(state, restored, ignore=shutil.ignore_patterns("*.sock", "shoe.pty"))
    config = config_for(restored, {"mqtt": {"host": "127.0.0.1", "port": broker.port,
                                            "protocol": "5", "backoff_initial_s": 0.05,
                                            "backoff_max_s": 0.3}}, confirm_s=2.0)
    broker.start()  # no persistence: no retained position, no session
    came.clear()
    client = backend()
    proc, notify, log = start(config, tmp_path, "restored")
    try:
        notify.wait_for("READY", "1", timeout=60)
        pause(restored)
        wait_until(lambda: journal_last_seq(restored) > floor, 20, "the pause journaled")
        figures = waits_behind(restored, "mqtt", floor)
        assert "has no position now, though it said where it stood before" in \
            figures["last_error"], figures
        time.sleep(1.0)  # anything published meanwhile has come
        assert came == []
        newer = received(histories["table"])
        client.publish(f"{topic}/held", json.dumps(held_of(newer)), qos=1,
                       retain=True).wait_for_publish(5)
        wait_until(lambda: proc.poll() is not None, 30, "the table to stop on the fork")
        time.sleep(0.5)
    finally:
        code = stop_daemon(proc)
        notify.close()
        client.disconnect()
        client.loop_stop()
        broker.stop()
    assert code == EX_DATAERR, log.read_text()[-3000:]
    assert came == [] and conflicts(received(histories["table"]), came) == []


@pytest.mark.parametrize("change", ["rotated", "last lines cut"])
def test_an_events_file_holding_less_than_delivered_is_not_appended_to(
        histories, tmp_path, change) -> None:
    """A file-only table: its events file moved away (a rotation; the new file is empty) or
    its last five lines cut by hand. The table appends nothing after a gap and writes no id
    again: the file stays as it is, and status says why."""
    state = state_copy(histories, "table", tmp_path)
    events = state / "events.jsonl"
    config = config_for(state, {"file": {"path": str(events)}})
    floor = deliver_all(config, state, "file", tmp_path)
    if change == "rotated":
        events.rename(state / "events.jsonl.1")
        says = "file says it holds nothing of this table"
    else:
        lines = events.read_text().splitlines(keepends=True)
        events.write_text("".join(lines[:-5]))
        says = f"file says it holds up to seq {json.loads(lines[-6])['seq']}"
    before = events.read_bytes() if events.exists() else b""
    proc, notify, log = start(config, tmp_path, "changed")
    try:
        notify.wait_for("READY", "1", timeout=60)
        pause(state)
        wait_until(lambda: journal_last_seq(state) > floor, 20, "the pause journaled")
        figures = waits_behind(state, "file", floor)
        assert says in figures["last_error"], figures
        time.sleep(1.0)
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-3000:]
        notify.close()
    assert (events.read_bytes() if events.exists() else b"") == before
    if change == "last lines cut":
        lets_the_table_write_again_after(state, config, tmp_path)


def lets_the_table_write_again_after(state: Path, config: Path, tmp_path: Path) -> None:
    """docs/install.md's step for a file that is to stay as it is: the file transport's
    delivered position set to the file's last seq, the table stopped. The table then writes
    every event after it again, as first sent: every seq once, no id with two bodies."""
    kept = received(state)
    conn = sqlite3.connect(state / "journal.sqlite")
    conn.execute("UPDATE delivery SET last_seq = ? WHERE transport = ?", (kept[-1]["seq"], "file"))
    conn.commit()
    conn.close()
    proc, notify, log = start(config, tmp_path, "after")
    try:
        notify.wait_for("READY", "1", timeout=60)
        last = journal_last_seq(state)
        wait_until(lambda: received(state)[-1]["seq"] == last, 20, "the file written again")
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-3000:]
        notify.close()
    lines = received(state)
    assert [e["seq"] for e in lines[len(kept):]] == list(range(kept[-1]["seq"] + 1, last + 1))
    assert sorted({e["seq"] for e in lines}) == list(range(1, last + 1))  # no gap
    assert conflicts(kept, lines) == []


def test_a_backend_that_lost_events_catches_up_by_asking_and_is_delivered_to_again(
        histories, tmp_path) -> None:
    """A backend restored from its backup holds seq 1..K, less than the table delivered to it
    (N): its events wait, but the resend it asks for (K+1..N: events it was sent, as they were)
    goes; then it holds N, and the table's later events follow. Every seq once, one body."""
    state = state_copy(histories, "early", tmp_path)
    first = holding(received(state))
    options = {"allow_insecure": True, "backoff_initial_s": 0.05, "backoff_max_s": 0.3}
    config = config_for(state, {"http": {"url": first.url, **options}}, confirm_s=2.0)
    try:
        floor = deliver_all(config, state, "http", tmp_path)
    finally:
        first.down()
    kept = [e for e in first.stored if e["seq"] <= floor - 5]  # its backup, five short
    backend = holding(kept)
    backend.replies_extra = [{"resend_from": floor - 4}]  # what it needs next, asked once
    config = config_for(state, {"http": {"url": backend.url, **options}}, confirm_s=2.0)
    proc, notify, log = start(config, tmp_path, "backup")
    try:
        notify.wait_for("READY", "1", timeout=60)
        pause(state)
        last = journal_last_seq(state)
        assert last > floor
        wait_until(lambda: backend.wait_for_seq(last, 0.5), 30, "the backend caught up")
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-3000:]
        notify.close()
        backend.down()
    assert backend.conflicts == []
    assert [e["seq"] for e in backend.stored] == list(range(1, last + 1))
