"""Start time does not grow with the journal: the real daemon on journals of 20 and 300 whole
shoes (built with testkit/journals.py), a SIGKILL mid-round on the big one, the full chain
check after READY, and an old journal without checkpoints (EXTEND_TIMEOUT_USEC=, one summary
line, no stale alarms)."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from controller.durability.chain_check import load_mark, store_mark, verify_in_steps
from controller.durability.delivery.anchors import anchored_events_after, strip_anchor
from controller.durability.journal import Journal, connect, export_events, verify_file
from controller.durability.recovery import recover_report
from controller.service.control.client import ControlClient
from controller.service.telemetry.health import health_message
from controller.table.inputs import Supervisor, Switch
from controller.table.machine import MachineSettings
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    log_records,
    open_shoe,
    start_daemon,
    start_round,
    stop_daemon,
    wait_status,
)
from support.waiting import wait_until
from testkit.journals import build_journal, cached_journal, next_shoe_start

# What daemon_config's table section makes of the table.
SETTINGS = MachineSettings(table_id="T1", betting_seconds=2.0)


def prepare(directory: Path, shoes: int, **build: Any) -> Path:
    """A state directory holding a journal of ``shoes`` shoes, all of it delivered to the
    file transport (as on a table that ran for weeks)."""
    state = directory / "state"
    state.mkdir(parents=True, mode=0o750)
    path = state / "journal.sqlite"
    if build:
        build_journal(path, shoes, SETTINGS, **build)
    else:
        cached_journal(path, shoes, SETTINGS)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO delivery(transport, last_seq, updated) "
                 "SELECT 'file', MAX(event_seq), 0 FROM records")
    conn.commit()
    # ... and the file holds it: its last event, as that transport sent it (a file that held
    # less than was delivered to it would hold the table's events back, docs/backend.md)
    last = conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0]
    sent = anchored_events_after(conn, last - 1, 1)
    conn.close()
    (directory / "events.jsonl").write_text(
        "".join(json.dumps(event, sort_keys=True) + "\n" for event in sent))
    return path


def one(lines: list[dict[str, Any]], event: str) -> dict[str, Any]:
    found = [line for line in lines if line.get("event") == event]
    assert len(found) == 1, (event, found)
    return found[0]


class Started:
    """A daemon started on ``directory``'s config, READY."""

    def __init__(self, directory: Path, panel: LinePanelPty, name: str = "notify"):
        self.config = daemon_config(directory, directory.parent / "shoe", panel.path,
                                    betting_seconds=2)
        self.log = directory / "daemon.log"
        self.notify = NotifyListener(directory / name)
        self.client = ControlClient(str(directory / "control.sock"))
        self.proc = start_daemon(self.config, self.notify.path, self.log)
        try:
            self.notify.wait_for("READY", "1", timeout=90)
        except AssertionError:
            self.stop(signal.SIGKILL)
            raise AssertionError(
                f"no READY; the daemon's log:\n{self.log.read_text()[-3000:]}") from None

    def ready_seconds(self) -> float:
        return float([line for line in log_records(self.log)
                      if line.get("event") == "ready"][-1]["seconds"])

    def stop(self, sig: int = signal.SIGTERM) -> int:
        try:
            return stop_daemon(self.proc, sig)
        finally:
            self.notify.close()


@pytest.mark.slow
def test_ready_time_does_not_grow_with_the_journal(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    _shoe, panel = devices
    seconds = {}
    for shoes in (20, 300):
        directory = short_dir / str(shoes)
        prepare(directory, shoes)
        daemon = Started(directory, panel)
        try:
            recovered = one(log_records(daemon.log), "recovered from the journal")
            assert recovered["start"].startswith(f"the checkpoint after shoe {shoes} ")
            assert recovered["records"] == 0 and recovered["state"] == "no_shoe"
            # the whole chain is checked after READY, off the owner thread
            status = wait_status(daemon.client, lambda s: s.get("journal_check", {}).get(
                "state") == "ok", timeout=120)
            assert status["journal_check"]["records"] > shoes * 500
            text = cli("status", "--config", str(daemon.config)).stdout
            assert "journal check: ok at " in text
        finally:
            assert daemon.stop() == 0
        seconds[shoes] = daemon.ready_seconds()
    print(f"start -> READY in the daemon: {seconds}")
    assert seconds[300] <= 3 * seconds[20] + 0.5, seconds


@pytest.mark.slow
def test_sigkill_mid_round_on_a_big_journal_restarts_with_the_same_events(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    directory = short_dir / "big"
    path = prepare(directory, 300)
    daemon = Started(directory, panel)
    try:
        panel.wait_connected()
        open_shoe(daemon.client, panel, shoe)
        start_round(daemon.client, panel)
        for card in ("8D", "KD", "QS", "2H"):
            shoe.send_card(card)
        wait_status(daemon.client, lambda s: s.get("cards_dealt", 0) >= 3 or
                    s["state"] != "betting", timeout=15)
    finally:
        daemon.stop(signal.SIGKILL)
    before = list(export_events(path))
    assert json.loads(before[-1])["shoe"] == 301

    again = Started(directory, panel, "notify2")
    try:
        recovered = [line for line in log_records(again.log)
                     if line.get("event") == "recovered from the journal"][-1]
        assert recovered["start"].startswith("the checkpoint after shoe 300 ")
        assert recovered["shoe"] == 301 and recovered["round"] == 1
        assert 0 < recovered["records"] < 100
        status = wait_status(again.client, lambda s: s["shoe"] == 301 and s["round"] == 1)
        assert status["state"] in ("betting", "dealing")
        shoe.send_card("3D")  # the table carries on from where it was killed
        wait_status(again.client, lambda s: s["cards_left"] < status["cards_left"])
    finally:
        assert again.stop() == 0
    after = list(export_events(path))
    assert after[:len(before)] == before  # nothing journaled before the kill changed
    with Journal(path) as journal:
        report = recover_report(journal, SETTINGS)
    assert report.start.startswith("the checkpoint after shoe 300 ")
    assert verify_file(path).ok
    # the file transport got exactly the journal's new events, in order
    sink = [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines()]
    sink = sink[1:]  # the prepared file's last event, delivered before this test's start
    unique = list({event["id"]: strip_anchor(event) for event in sink}.values())
    assert [json.dumps(e, sort_keys=True) for e in unique] == \
        [json.dumps(json.loads(e), sort_keys=True) for e in after[-len(unique):]]
    # (the clock's state comes first where the system clock is not synchronised)
    table_events = [e for e in unique if e["type"] != "clock_status"]
    assert table_events[0]["type"] == "shoe_started" and table_events[0]["shoe"] == 301


@pytest.mark.slow
def test_a_broken_chain_before_the_checkpoint_is_found_after_ready(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    _shoe, panel = devices
    directory = short_dir / "broken"
    path = prepare(directory, 20)
    marked = mark_the_head(path)  # as a retention run left it before the edit
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET written = written + 1 WHERE n = 500")  # behind the mark
    conn.commit()
    conn.close()
    daemon = Started(directory, panel)
    try:
        status = wait_status(daemon.client, lambda s: s.get("journal_check", {}).get(
            "state") == "failed", timeout=60)
        assert status["journal_check"]["reason"] == \
            "record 500: hash does not match the record's contents"
        daemon.notify.wait_for("STATUS", None)
        wait_until(lambda: any("JOURNAL CHECK FAILED: record 500" in m.get("STATUS", "")
                               for m in daemon.notify.messages), 10, "STATUS= names the fault")
        text = cli("status", "--config", str(daemon.config)).stdout
        assert "journal check: FAILED: record 500: hash does not match" in text
        assert daemon.proc.poll() is None  # loud, but the table still answers
        paused = wait_status(daemon.client, lambda s: s["paused"], timeout=10)
        assert paused["fault"]["code"] == "journal_check_failed", paused["fault"]
        assert "record 500" in paused["fault"]["reason"]  # a coded pause: no round dealt on
        errors = [line for line in log_records(daemon.log)
                  if line.get("event", "").startswith("journal check FAILED")]
        assert len(errors) == 1 and errors[0]["level"] == "error"
        # Retention's run after the check walks only from the mark, past the edit: it must
        # not run at all, and say why, nor the mark move over the edited record.
        archive = wait_status(daemon.client, lambda s: (s.get("journal_archive") or {}).get(
            "runs"), timeout=30)
        assert "not run: the full journal check failed (record 500: hash does not match" \
            in archive["journal_archive"]["last_error"]
        text = cli("status", "--config", str(daemon.config)).stdout
        assert "journal archive: FAILED: ArchiveError: not run: the full journal check " \
            "failed (record 500" in text
        assert health_message(archive, {}, {})["last_fault"] == "journal_check_failed"
    finally:
        assert daemon.stop() == 0
    assert stored_mark(path) == marked
    assert cli("journal", "verify", str(path)).returncode == 1


def mark_the_head(path: Path) -> int:
    """Store the verified mark at the journal's head, as a good check or retention run does;
    the record it names."""
    with Journal(path) as journal:
        chain = journal.chain
    conn = connect(path)
    try:
        result, mark = verify_in_steps(conn, chain)
        assert result.ok and mark is not None, result.describe()
        store_mark(conn, mark, chain)
    finally:
        conn.close()
    return mark.records


def stored_mark(path: Path) -> int | None:
    with Journal(path) as journal:
        chain = journal.chain
    conn = connect(path)
    try:
        mark, _why = load_mark(conn, chain)
    finally:
        conn.close()
    return None if mark is None else mark.records


@pytest.mark.slow
def test_an_old_journal_recovers_in_one_line_and_keeps_systemd_waiting(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    _shoe, panel = devices
    directory = short_dir / "old"
    at = next_shoe_start(6, SETTINGS)
    pauses = [Supervisor(at, "pause"), Supervisor(at + 1, "resume"),
              Switch(at + 2, "pause", True), Switch(at + 3, "pause", False),
              Supervisor(at + 4, "pause")]
    path = prepare(directory, 6, checkpoints=False, partial=pauses)
    with Journal(path) as journal:
        total = journal.record_count()  # what recovery found (the start then adds its own)
    daemon = Started(directory, panel)
    try:
        ready_at = next(i for i, m in enumerate(daemon.notify.messages) if "READY" in m)
        extended = [i for i, m in enumerate(daemon.notify.messages)
                    if "EXTEND_TIMEOUT_USEC" in m]
        assert extended and extended[0] < ready_at
        assert int(daemon.notify.messages[extended[0]]["EXTEND_TIMEOUT_USEC"]) == 30_000_000
        lines = log_records(daemon.log)
        recovered = one(lines, "recovered from the journal")
        assert recovered["start"] == "record 1" and recovered["records"] == total
        assert recovered["shoes_ended"] == 6 and recovered["paused"] is True
        assert recovered["fault"] == "supervisor_pause"
        assert not [line for line in lines if "table paused" in line.get("event", "")]
        # what happens now is news again
        assert cli("supervisor", "--socket", str(directory / "control.sock"),
                   "resume").returncode == 0
        assert cli("supervisor", "--socket", str(directory / "control.sock"),
                   "pause").returncode == 0
        wait_until(lambda: [line for line in log_records(daemon.log)
                            if "table paused" in line.get("event", "")], 10, "a new pause logged")
        # the old journal gets its first checkpoint at the next shoe end, not before
        assert daemon.client.status()["paused"] is True
    finally:
        assert daemon.stop() == 0
