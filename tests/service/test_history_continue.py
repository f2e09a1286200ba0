"""The supervisor's way out of a fork when no copy of the journal is as new as the backend
(docs/install.md, "A table whose history forked"): ``pokdeng-table journal continue`` sets the
restored journal aside and starts a new one after the backend's last event, confirmed by the
backend itself, over HTTP and MQTT. The real daemon then deals on it and the backend takes
every new event: no id with two bodies, nothing it held lost. Refused: a backend that holds
another position, an event of another table, a journal that is not behind, no backend answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.durability.delivery.held import held_of
from support.daemon_helpers import NotifyListener, start_daemon, stop_daemon
from support.histories import (
    EX_DATAERR,
    TABLE,
    config_for,
    holding,
    http,
    play,
    pokdeng,
    received,
    run,
    state_copy,
)
from testkit.backends import free_port


def event_file(tmp_path: Path, event: dict[str, Any]) -> Path:
    """The backend's last event, as the backend's operator hands it over."""
    path = tmp_path / "backend-last-event.json"
    path.write_text(json.dumps(event) + "\n")
    return path


def continue_(config: Path, event: Path, *extra: str):
    return pokdeng("journal", "continue", "--config", str(config), "--backend-event",
                   str(event), "--wait", "5", *extra, timeout=60)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_restored_copy_continues_after_the_backend_over_http(histories, tmp_path) -> None:
    held = received(histories["table"])          # what the backend holds: 3 rounds
    last = held[-1]
    state = state_copy(histories, "early", tmp_path)  # the newest copy: after 1 round
    backend = holding(held)
    try:
        config = config_for(state, http(backend))
        assert run(config).returncode == EX_DATAERR  # refused as it is

        # without --yes: says what it would do, does nothing
        journal = state / "journal.sqlite"
        before = digest(journal)
        plan = continue_(config, event_file(tmp_path, last))
        assert plan.returncode == 0, plan.stderr
        assert f"seq {last['seq'] + 1}" in plan.stdout and "Nothing done yet" in plan.stdout
        assert digest(journal) == before and not list(state.glob("forked-*"))

        done = continue_(config, event_file(tmp_path, last), "--yes")
        assert done.returncode == 0, done.stderr
        set_aside = next(state.glob("forked-*"))
        assert digest(set_aside / "journal.sqlite") == before  # kept, untouched
        assert pokdeng("journal", "verify", "--state-dir", str(state)).returncode == 0

        # the table deals again: a shoe on the demo's simulated shoe (its file sink) ...
        (state / "events.jsonl").unlink()
        play(state, 1, seed=5)
        new = received(state)
        assert [e["seq"] for e in new] == list(range(last["seq"] + 1,
                                                     last["seq"] + 1 + len(new)))
        assert min(e["shoe"] for e in new if e["shoe"]) == last["shoe"] + 1
        assert pokdeng("journal", "verify", "--state-dir", str(state)).returncode == 0

        # ... and the backend that held seq 1..N takes them: one body per id, nothing lost
        assert run_briefly(config, tmp_path, lambda: backend.wait_for_seq(new[-1]["seq"], 30))
    finally:
        backend.down()
    assert backend.conflicts == [] and backend.foreign == 0
    stored = {e["id"]: e for e in backend.stored}
    assert all(e["id"] in stored for e in held + new)
    assert held_of(backend.stored)["seq"] >= new[-1]["seq"]  # every seq, 1 to the last


def test_continuing_is_refused_unless_the_backend_confirms_it(histories, tmp_path) -> None:
    held = received(histories["table"])
    state = state_copy(histories, "early", tmp_path)
    journal = state / "journal.sqlite"
    before = digest(journal)
    backend = holding(held)
    try:
        config = config_for(state, http(backend))
        # the backend holds more than the event brought
        behind = continue_(config, event_file(tmp_path, held[-2]), "--yes")
        assert behind.returncode == 1
        assert f"up to seq {held[-1]['seq']}" in behind.stderr
        # the same seq, another body (an edited export)
        edited = {**held[-1], "time": "2026-01-01T00:00:00.000Z"}
        other = continue_(config, event_file(tmp_path, edited), "--yes")
        assert other.returncode == 1 and "another event seq" in other.stderr
        # another table's event
        foreign = continue_(config, event_file(tmp_path, {**held[-1], "table": "T9",
                                                          "id": f"T9:{held[-1]['seq']}"}))
        assert foreign.returncode == 1 and "not of this table" in foreign.stderr
    finally:
        backend.down()
    # no backend answers: nothing is continued unconfirmed
    silent = config_for(state, {"http": {"url": f"http://127.0.0.1:{free_port()}/events",
                                         "allow_insecure": True}})
    unconfirmed = continue_(silent, event_file(tmp_path, held[-1]), "--yes")
    assert unconfirmed.returncode == 1 and "no answer from backend(s) http" in \
        unconfirmed.stderr
    assert digest(journal) == before and not list(state.glob("forked-*"))

    # a journal that is the backend's history is dealt on, not continued
    current = state_copy(histories, "table", tmp_path)
    backend = holding(held)
    try:
        same = continue_(config_for(current, http(backend)), event_file(tmp_path, held[-1]),
                         "--yes")
    finally:
        backend.down()
    assert same.returncode == 1 and "not behind the backend" in same.stderr


def stopped_cleanly(journal: Path) -> None:
    """The journal as a stopped table leaves it: no -wal or -shm beside it (the last
    connection's close folds the WAL in and removes both)."""
    conn = sqlite3.connect(journal)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert not journal.with_name(journal.name + "-wal").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the state directory away")
def test_root_continues_a_table_whose_state_directory_is_its_users(histories) -> None:
    """As on a packaged table: root runs `journal continue` on a state directory the daemon's
    user owns. The backend is asked as root; the journal's files are worked on as that user
    (durability/as_owner.py), so all it leaves there (the new journal, forked-<time>/ and what
    it holds, SQLite's -wal and -shm) is the user's, and the daemon can open it."""
    uid = 47201  # no account has it here
    held = received(histories["table"])
    base = Path(tempfile.mkdtemp(prefix="pokdeng-continue-"))  # root's, 0711, as /var/lib
    base.chmod(0o711)
    backend = holding(held)
    try:
        state = state_copy(histories, "early", base)
        stopped_cleanly(state / "journal.sqlite")
        config = config_for(state, http(backend))
        for path in (state, *state.rglob("*")):
            os.chown(path, uid, uid, follow_symlinks=False)
        done = continue_(config, event_file(base, held[-1]), "--yes")
        assert done.returncode == 0, done.stderr
        assert next(state.glob("forked-*/journal.sqlite")).is_file()
        assert [str(path) for path in state.rglob("*") if path.lstat().st_uid != uid] == []
    finally:
        backend.down()
        shutil.rmtree(base)


def test_another_tables_copy_continues_after_the_backend_over_mqtt(
        histories, tmp_path, mosquitto) -> None:
    """The position retained on <prefix>/<table>/held confirms the event brought."""
    held = received(histories["table"])
    backend = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="backend",
                          protocol=mqtt.MQTTv5)
    backend.connect("127.0.0.1", mosquitto.port)
    backend.loop_start()
    try:
        backend.publish(f"pokdeng/{TABLE}/held", json.dumps(held_of(held)), qos=1,
                        retain=True).wait_for_publish(5)
        state = state_copy(histories, "other", tmp_path)
        config = config_for(state, {"mqtt": {"host": "127.0.0.1", "port": mosquitto.port,
                                             "protocol": "5"}})
        assert run(config).returncode == EX_DATAERR
        wrong = continue_(config, event_file(tmp_path, held[-3]), "--yes")
        assert wrong.returncode == 1 and "up to seq" in wrong.stderr
        done = continue_(config, event_file(tmp_path, held[-1]), "--yes")
        assert done.returncode == 0, done.stderr
        assert run_briefly(config, tmp_path)  # READY on the continued journal
    finally:
        backend.loop_stop()
        backend.disconnect()


def run_briefly(config: Path, tmp_path: Path,
                until: Callable[[], bool] = lambda: True) -> bool:
    """The real daemon started on ``config`` (READY, not exit 65), stopped once ``until``."""
    notify = NotifyListener(tmp_path / "brief.notify")
    log = tmp_path / "brief.log"
    proc = start_daemon(config, notify.path, log)
    try:
        notify.wait_for("READY", "1", timeout=60)
        return until()
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-3000:]
        notify.close()
