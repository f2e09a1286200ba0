"""One history per table: the daemon compares its journal with where its backend stands before
it journals anything, and refuses to deal on a history that forked (exit 65) — a whole state
directory restored from an earlier copy, a journal restored without its head file, another
table's copy — over HTTP and MQTT, with the real backends of the test kit. The same history
starts; no answer at start deals on; a fork told after the start stops the table.

A real table (the demo: the daemon on a simulated shoe, its file sink standing for what a
backend received) makes the histories; ``pokdeng-table run`` is started on them with a backend
that holds what the file sink says it was sent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from controller.durability.delivery.held import held_of
from support.daemon_helpers import NotifyListener, start_daemon, stop_daemon
from support.histories import (
    EX_DATAERR,
    TABLE,
    config_for,
    holding,
    http,
    received,
    run,
    state_copy,
)
from support.waiting import wait_until
from testkit.backends import WebhookBackend, free_port


def refused(state: Path, held: list[dict[str, Any]]
            ) -> tuple[subprocess.CompletedProcess, WebhookBackend]:
    """``run`` on ``state`` with an HTTP backend holding ``held``: it must exit 65."""
    backend = holding(held)
    try:
        result = run(config_for(state, http(backend)))
    finally:
        backend.down()
    assert result.returncode == EX_DATAERR, result.stdout[-2000:] + result.stderr[-2000:]
    return result, backend


def test_a_state_dir_restored_from_an_earlier_copy_is_refused_over_http(histories,
                                                                        tmp_path) -> None:
    held = received(histories["table"])
    state = state_copy(histories, "early", tmp_path)
    result, backend = refused(state, held)
    text = result.stdout + result.stderr
    mine = received(state)[-1]["seq"]
    assert "history has forked" in text
    assert f"up to seq {held[-1]['seq']}" in text and f"ends at seq {mine}" in text
    assert "A table whose history forked" in text  # what to do
    assert "pokdeng-table journal continue" in text  # when no copy is as new
    assert [json.loads(line)["seq"] for line in (state / "events.jsonl").read_text()
            .splitlines()][-1] == mine  # not one event more
    assert backend.events == [] and backend.conflicts == []  # nothing re-issued reached it


def test_a_journal_restored_without_its_head_file_is_refused(histories, tmp_path) -> None:
    state = state_copy(histories, "table", tmp_path)
    shutil.copy(histories["early"] / "journal.sqlite", state / "journal.sqlite")
    for suffix in ("-wal", "-shm"):
        (state / f"journal.sqlite{suffix}").unlink(missing_ok=True)
    _, backend = refused(state, received(histories["table"]))
    assert backend.events == []


def test_another_tables_copy_is_refused(histories, tmp_path) -> None:
    state = state_copy(histories, "other", tmp_path)
    result, backend = refused(state, received(histories["table"]))
    text = result.stdout + result.stderr
    # the journal holds an event at the backend's seq under the same id: the message says the
    # hashing may differ before it says fork, and what to check before restoring anything
    assert "a backend's position does not match this journal" in text
    assert "hashing difference is the likely cause" in text and "RFC 8785" in text
    assert "Restore nothing yet" in text and "A table whose history forked" in text
    assert backend.events == [] and backend.conflicts == []


def start(config: Path, tmp_path: Path, name: str = "daemon"
          ) -> tuple[subprocess.Popen, NotifyListener, Path]:
    notify = NotifyListener(tmp_path / f"{name}.notify")
    log = tmp_path / f"{name}.log"
    return start_daemon(config, notify.path, log), notify, log


def test_the_same_history_starts_and_no_answer_deals_on(histories, tmp_path) -> None:
    state = state_copy(histories, "table", tmp_path)
    backend = holding(received(histories["table"]))
    proc, notify, log = start(config_for(state, http(backend)), tmp_path)
    try:
        notify.wait_for("READY", "1", timeout=60)
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-2000:]
        notify.close()
        backend.down()
    assert backend.conflicts == []
    # a backend that does not answer: the table waits backend_confirm_s, then deals on
    silent = {"http": {"url": f"http://127.0.0.1:{free_port()}/events", "allow_insecure": True}}
    proc, notify, log = start(config_for(state, silent, confirm_s=1.0), tmp_path, "silent")
    try:
        notify.wait_for("READY", "1", timeout=60)
    finally:
        assert stop_daemon(proc) == 0
        notify.close()
    assert "no word from these backends on where they stand" in log.read_text()


def test_a_fork_told_after_the_start_stops_the_table(histories, tmp_path) -> None:
    """No backend at start (an outage): the table deals on; the backend that comes back holds
    a later history than this restored copy: the table stops (65) and journals no more."""
    state = state_copy(histories, "early", tmp_path)
    port = free_port()
    config = config_for(state, {"http": {"url": f"http://127.0.0.1:{port}/events",
                                         "allow_insecure": True, "backoff_initial_s": 0.05,
                                         "backoff_max_s": 0.3}}, confirm_s=0.5)
    proc, notify, log = start(config, tmp_path)
    backend = None
    try:
        notify.wait_for("READY", "1", timeout=60)
        # the backend of this table comes back on the address the table sends to
        backend = holding(received(histories["table"]), port=port, path="/events")
        wait_until(lambda: proc.poll() is not None, 30, "the table to stop on the fork")
    finally:
        if proc.poll() is None:
            stop_daemon(proc)
        notify.close()
        if backend is not None:
            backend.down()
    assert proc.returncode == EX_DATAERR, log.read_text()[-3000:]
    text = log.read_text()
    assert "a backend holds another history than this journal; stopping" in text
    assert "this table's history has forked: the journal is behind the backend" in text


def test_a_state_dir_restored_from_an_earlier_copy_is_refused_over_mqtt(
        histories, tmp_path, mosquitto) -> None:
    """The backend's position, retained on <prefix>/<table>/held as docs/backend.md says."""
    held = held_of(received(histories["table"]))
    backend = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="backend",
                          protocol=mqtt.MQTTv5)
    backend.connect("127.0.0.1", mosquitto.port)
    backend.loop_start()
    try:
        backend.publish(f"pokdeng/{TABLE}/held", json.dumps(held), qos=1,
                        retain=True).wait_for_publish(5)
        state = state_copy(histories, "early", tmp_path)
        started = time.monotonic()
        result = run(config_for(state, {"mqtt": {"host": "127.0.0.1", "port": mosquitto.port,
                                                 "protocol": "5"}}))
    finally:
        backend.loop_stop()
        backend.disconnect()
    assert result.returncode == EX_DATAERR, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"up to seq {held['seq']}" in result.stdout + result.stderr
    assert time.monotonic() - started < 60
