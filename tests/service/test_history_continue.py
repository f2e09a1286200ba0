"""The supervisor's way out of a fork when no copy of the journal is as new as the backend
(docs/install.md, "A table whose history forked"): ``pokdeng-table journal continue`` sets the
restored journal aside and starts a new one after the backend's last event, confirmed by the
backend itself, over HTTP, MQTT or a file transport's file. The real daemon then deals on it
and the backend takes every new event: no id with two bodies, nothing it held lost, no shoe
number dealt twice. Refused: a backend that holds another position, an event of another
table, a journal that is not behind or that proves the table sent more (whatever a backend
claims), no backend answer (unless --unconfirmed with a reason, journaled), numbers out of
bounds.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from controller.durability.delivery.held import event_digest, held_of
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


def continue_(config: Path, event: Path, *extra: str, wait: float = 30):
    """``journal continue``; ``wait``: for the backends' answers (generous: a loaded PC)."""
    return pokdeng("journal", "continue", "--config", str(config), "--backend-event",
                   str(event), "--wait", str(wait), *extra, timeout=wait + 60)


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
    unconfirmed = continue_(silent, event_file(tmp_path, held[-1]), "--yes", wait=3)
    assert unconfirmed.returncode == 1 and "http: no answer on where it stands" in \
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
                until: Callable[[], bool] = lambda: True, name: str = "brief") -> bool:
    """The real daemon started on ``config`` (READY, not exit 65), stopped once ``until``."""
    notify = NotifyListener(tmp_path / f"{name}.notify")
    log = tmp_path / f"{name}.log"
    proc = start_daemon(config, notify.path, log)
    try:
        notify.wait_for("READY", "1", timeout=60)
        return until()
    finally:
        assert stop_daemon(proc) == 0, log.read_text()[-3000:]
        notify.close()


def events_file(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    """The backend's last events of this table, as JSON Lines."""
    path = tmp_path / "backend-last-events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def file_only(state: Path, events: Path | None = None) -> Path:
    """A table whose one backend is the file transport (JSON Lines at ``events``)."""
    return config_for(state, {"file": {"path": str(events or state / "events.jsonl")}})


def delivered(state: Path) -> dict[str, int]:
    with sqlite3.connect(state / "journal.sqlite") as conn:
        return dict(conn.execute("SELECT transport, last_seq FROM delivery").fetchall())


def untouched(state: Path, before: str) -> bool:
    return digest(state / "journal.sqlite") == before and not list(state.glob("forked-*"))


def test_a_backend_that_lies_is_refused_by_the_journals_delivered_rows(histories,
                                                                       tmp_path) -> None:
    """The HTTP backend was delivered every event, then claims it holds only up to seq 30, a
    forged event 30: the journal's delivery row for it is believed, not the claim."""
    held = received(histories["table"])
    state = state_copy(histories, "table", tmp_path)
    backend = holding([])
    try:
        config = config_for(state, http(backend))
        assert run_briefly(config, tmp_path, lambda: backend.wait_for_seq(held[-1]["seq"], 30))
        sent_to_http = delivered(state)["http"]
        assert sent_to_http >= held[-1]["seq"]
        before = digest(state / "journal.sqlite")

        forged = {**held[29], "time": "2026-01-01T00:00:00.000Z"}
        backend.stored = [e for e in backend.stored if e["seq"] < 30] + [forged]
        assert held_of(backend.stored) == {"seq": 30, "sha256": event_digest(forged)}
        for extra in ((), ("--unconfirmed", "--reason", "the backend cannot be reached")):
            lying = continue_(config, event_file(tmp_path, forged), "--yes", *extra)
            assert lying.returncode == 1, lying.stdout
            assert f"'http' up to seq {sent_to_http}" in lying.stderr
            assert "is not the table's history as it sent it" in lying.stderr
            assert "ask the backend's operator again" in lying.stderr
    finally:
        backend.down()
    assert untouched(state, before)


def test_a_file_only_table_whose_journal_is_ahead_is_refused(histories, tmp_path) -> None:
    """Its file was delivered 80 events; an edited event 40 handed in is not its history."""
    state = state_copy(histories, "table", tmp_path)
    events = received(state)
    before = digest(state / "journal.sqlite")
    edited = {**events[39], "time": "2026-01-01T00:00:00.000Z"}
    refused = continue_(file_only(state), event_file(tmp_path, edited), "--yes")
    assert refused.returncode == 1, refused.stdout
    assert f"'file' up to seq {events[-1]['seq']}" in refused.stderr
    assert untouched(state, before)


def test_a_file_transport_confirms_only_its_own_last_event(histories, tmp_path) -> None:
    """The file the table's events went to is its backend: only the event its file ends
    with, byte for byte (same digest), is continued after; then the table appends after it."""
    held = received(histories["table"])
    state = state_copy(histories, "early", tmp_path)
    backend_file = tmp_path / "table-events.jsonl"
    shutil.copy(histories["table"] / "events.jsonl", backend_file)
    config = file_only(state, backend_file)
    before = digest(state / "journal.sqlite")

    edited = {**held[-1], "time": "2026-01-01T00:00:00.000Z"}
    forged = continue_(config, event_file(tmp_path, edited), "--yes")
    assert forged.returncode == 1
    assert f"backend file holds another event seq {held[-1]['seq']}" in forged.stderr
    older = continue_(config, event_file(tmp_path, held[-2]), "--yes")
    assert older.returncode == 1 and f"up to seq {held[-1]['seq']}" in older.stderr
    assert untouched(state, before)

    done = continue_(config, event_file(tmp_path, held[-1]), "--yes")
    assert done.returncode == 0, done.stderr
    assert "confirmed by file" in done.stdout

    def appended() -> bool:
        lines = backend_file.read_text().splitlines()
        return json.loads(lines[-1])["seq"] > held[-1]["seq"]

    assert run_briefly(config, tmp_path, lambda: wait_until(appended, 30))
    ids = [json.loads(line)["id"] for line in backend_file.read_text().splitlines()]
    assert len(ids) == len(set(ids))  # no id twice
    assert json.loads(backend_file.read_text().splitlines()[len(held)])["seq"] == \
        held[-1]["seq"] + 1


def test_a_continued_journals_first_event_does_not_deal_shoe_one_again(histories,
                                                                         tmp_path) -> None:
    """Continued once, the table sent its first event (a clock_status, no shoe) and its copy
    was lost again: continuing after that event deals the shoe after the backend's, never
    shoe 1 again. The shoe is told by the lines before the last, which no backend confirms:
    refused without --unconfirmed --reason, recorded with it."""
    held = received(histories["table"])
    state = state_copy(histories, "early", tmp_path)
    backend = holding(held)
    try:
        config = config_for(state, http(backend))
        assert continue_(config, event_file(tmp_path, held[-1]), "--yes").returncode == 0
        restored = tmp_path / "restored"  # the copy taken right after continuing
        shutil.copytree(state, restored, ignore=shutil.ignore_patterns("*.sock", "shoe.pty"))
        assert run_briefly(config, tmp_path,
                           lambda: backend.wait_for_seq(held[-1]["seq"] + 1, 30))
        # what the continued journal sent: its first event a clock_status, none in a shoe
        since = sorted((e for e in backend.stored if e["seq"] > held[-1]["seq"]),
                       key=lambda e: e["seq"])
        assert since[0]["type"] == "clock_status"
        assert all(e["shoe"] is None for e in since)
        last = since[-1]

        config = config_for(restored, http(backend))
        assert run(config).returncode == EX_DATAERR  # the backend holds more than this copy
        alone = continue_(config, event_file(tmp_path, last), "--yes")
        assert alone.returncode == 1 and "names no shoe" in alone.stderr
        told = events_file(tmp_path, [held[-1], *since])
        claim = continue_(config, told, "--yes")
        assert claim.returncode == 1, claim.stdout
        assert ("the backend's last shoe (1) is told only by the lines before seq "
                f"{last['seq']}, which no backend confirms") in claim.stderr
        done = continue_(config, told, "--yes", "--unconfirmed", "--reason",
                         "the backend's export, checked by its operator")
        assert done.returncode == 0, done.stderr
        assert "the dealer starts shoe 2" in done.stdout
        with sqlite3.connect(restored / "journal.sqlite") as conn:
            recorded = json.loads(conn.execute(
                "SELECT value FROM meta WHERE key='continued'").fetchone()[0])
        assert "the backend's last shoe (1) is told only" in recorded["unconfirmed"]["what"]
        assert recorded["source"] == "http"  # the event itself the backend did confirm

        (restored / "events.jsonl").unlink()
        play(restored, 1, seed=5)  # the table deals a shoe on the continued journal
        new = received(restored)
        assert new[0]["seq"] == last["seq"] + 1
        assert {e["shoe"] for e in new if e["shoe"] is not None} == {2}
        assert run_briefly(config, tmp_path,
                           lambda: backend.wait_for_seq(new[-1]["seq"], 30), name="again")
    finally:
        backend.down()
    assert backend.conflicts == [] and backend.foreign == 0
    assert max(e["shoe"] or 0 for e in held) == 1  # shoe 1 is the backend's, dealt once


def test_numbers_out_of_bounds_are_refused_and_the_table_still_runs(histories,
                                                                     tmp_path) -> None:
    held = received(histories["table"])
    state = state_copy(histories, "table", tmp_path)
    config = file_only(state)
    before = digest(state / "journal.sqlite")
    last = held[-1]
    for event, named in (
            ({**last, "seq": 2**63 - 1, "id": f"{TABLE}:{2**63 - 1}"},
             "seq must be between 1 and 9007199254740991, got 9223372036854775807"),
            ({**last, "shoe": 2**53}, "shoe must be between 0 and 9007199254740991"),
            ({**last, "round": -1}, "round must be between 0 and 9007199254740991")):
        refused = continue_(config, event_file(tmp_path, event), "--yes")
        assert refused.returncode == 2, refused.stdout
        assert named in refused.stderr and "Traceback" not in refused.stderr
    assert untouched(state, before)
    assert run_briefly(config, tmp_path)  # READY: the state directory as it was


def test_unconfirmed_needs_a_reason_and_is_journaled(histories, tmp_path) -> None:
    held = received(histories["table"])
    state = state_copy(histories, "early", tmp_path)
    silent = config_for(state, {"http": {"url": f"http://127.0.0.1:{free_port()}/events",
                                         "allow_insecure": True}})
    event = event_file(tmp_path, held[-1])
    before = digest(state / "journal.sqlite")
    no_reason = continue_(silent, event, "--yes", "--unconfirmed")
    assert no_reason.returncode == 2 and "--unconfirmed needs --reason" in no_reason.stderr
    blank = continue_(silent, event, "--yes", "--unconfirmed", "--reason", "  ")
    assert blank.returncode == 2
    reason_only = continue_(silent, event, "--yes", "--reason", "no backend")
    assert reason_only.returncode == 2
    refused = continue_(silent, event, "--yes", wait=3)
    assert refused.returncode == 1 and "--unconfirmed --reason TEXT" in refused.stderr
    assert untouched(state, before)

    reason = "backend database restored from tape; its API is down until Monday"
    done = subprocess.run(
        [sys.executable, "-m", "controller", "journal", "continue", "--config", str(silent),
         "--backend-event", str(event), "--wait", "2", "--unconfirmed", "--reason", reason,
         "--yes"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "SUDO_USER": "floor-supervisor"})
    assert done.returncode == 0, done.stderr
    assert "UNCONFIRMED" in done.stdout and reason in done.stdout
    who = "floor-supervisor" if os.geteuid() == 0 else pwd.getpwuid(os.getuid()).pw_name
    with sqlite3.connect(state / "journal.sqlite") as conn:
        recorded = json.loads(conn.execute(
            "SELECT value FROM meta WHERE key='continued'").fetchone()[0])
    assert recorded["unconfirmed"] == {
        "by": who, "reason": reason, "what": "http: no answer on where it stands within 2 s"}
    assert recorded["source"] == "unconfirmed" and recorded["after_seq"] == held[-1]["seq"]
    assert recorded["at"].endswith("Z")
    assert pokdeng("journal", "verify", "--state-dir", str(state)).returncode == 0


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_continuation_from_an_edited_event_stops_when_the_backend_answers(
        histories, tmp_path) -> None:
    """Continued unconfirmed (its backend down) from an edited event N: when the backend is
    back, it holds event N with another digest than the continuation recorded. The daemon
    stops on the forked history, as it would for any event it holds; the genuine event,
    continued the same way, deals on."""
    held = received(histories["table"])
    last = held[-1]
    down = {"http": {"url": f"http://127.0.0.1:{free_port()}/events", "allow_insecure": True}}
    edited = {**last, "time": "2026-01-01T00:00:00.000Z"}
    for name, event in (("edited", edited), ("genuine", last)):
        state = state_copy(histories, "early", tmp_path / name)
        done = continue_(config_for(state, down), event_file(tmp_path, event), "--yes",
                         "--unconfirmed", "--reason", "the backend is down", wait=2)
        assert done.returncode == 0, done.stderr
        backend = holding(held)
        try:
            config = config_for(state, http(backend))
            if name == "edited":
                stopped = run(config)
                assert stopped.returncode == EX_DATAERR, stopped.stderr
                assert f"forked at seq {last['seq']}" in stopped.stderr + stopped.stdout
                assert event_digest(last) in stopped.stderr + stopped.stdout
            else:
                assert run_briefly(config, tmp_path)  # READY: the backend holds that event
        finally:
            backend.down()
        assert backend.conflicts == []
