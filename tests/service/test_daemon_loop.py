"""The owner loop in-process: clock stamping, draining on stop, and disk safety."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import controller.service.held_inputs as held_inputs_module
import controller.service.startup.parts as startup_parts_module
import controller.service.storage_fault as storage_fault_module
from controller.durability.archives.retention import JournalRetention
from controller.durability.journal import Journal, JournalError
from controller.rules.cards import parse_card
from controller.service.clock.table_clock import TableClock
from controller.service.config.settings import parse_config
from controller.service.control.client import ControlClient
from controller.service.daemon import Daemon
from controller.service.status_board import status_line
from controller.service.telemetry.notify import Notifier
from controller.table.inputs import Actor, Button, CardScan
from support.daemon_helpers import control_section, in_process_daemon
from support.waiting import wait_until


@pytest.fixture
def state_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pdl-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def make_daemon(state_dir: Path, clock: TableClock | None = None) -> Daemon:
    return in_process_daemon(state_dir, "L1", clock)


def table_input_kinds(journal: Journal) -> list[str]:
    """The journaled inputs' kinds but the controller's own reports at start: the clock (an
    unsynchronised clock, as in a container, is reported when the table starts) and the
    software (journaled at the first start)."""
    return [inp.kind for inp in journal.inputs() if inp.kind not in ("clock", "software")]


def run_in_thread(daemon: Daemon) -> threading.Thread:
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    assert daemon.ready.wait(10)
    return thread


class BackwardsClock(TableClock):
    """A wall clock that jumps back (NTP step): the table clock must not."""

    def __init__(self) -> None:
        super().__init__()
        self.readings = iter([2000.0, 1000.0, 1500.0, 3000.0])

    def now(self) -> float:
        return next(self.readings, 3000.0)


def test_inputs_are_stamped_with_a_clock_that_never_goes_back(state_dir: Path) -> None:
    daemon = make_daemon(state_dir, BackwardsClock())
    for _ in range(3):
        daemon.post(Button(0.0, "end_shoe"))  # rejected, but journaled all the same
    daemon.request_stop()
    daemon.run()
    with Journal(state_dir / "journal.sqlite") as journal:
        stamps = [inp.at for inp in journal.inputs() if inp.kind not in ("clock", "software")]
    assert len(stamps) == 3
    assert stamps == sorted(stamps) and stamps[0] >= 2000.0


def test_stop_handles_what_was_already_queued(state_dir: Path) -> None:
    daemon = make_daemon(state_dir)
    thread = run_in_thread(daemon)
    daemon.post(Button(0.0, "new_shoe"))
    for code in ("5H", "2C", "3C"):
        daemon.post(CardScan(0.0, parse_card(code)))
    daemon.request_stop()
    thread.join(10)
    with Journal(state_dir / "journal.sqlite") as journal:
        kinds = table_input_kinds(journal)
    assert kinds == ["button", "card", "card", "card"]


def test_a_failed_journal_write_holds_inputs_and_pauses(state_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_fault_module, "STORAGE_RETRY_S", 0.1)
    daemon = make_daemon(state_dir)
    thread = run_in_thread(daemon)
    try:
        daemon.post(Button(0.0, "new_shoe"))
        wait_until(lambda: daemon.snapshot().get("state") == "awaiting_flip")
        real_append = daemon.journal.append_many  # append() and group commits both write here
        failing = threading.Event()
        failing.set()

        def append(entries):
            if failing.is_set():
                raise JournalError("disk full (test)")
            return real_append(entries)

        daemon.journal.append_many = append
        daemon.post(CardScan(0.0, parse_card("5H")))
        daemon.post(CardScan(0.0, parse_card("6D")))
        wait_until(lambda: daemon.snapshot().get("held_inputs") == 2)
        snap = daemon.snapshot()
        # The machine was rebuilt from the journal: the cards that could not be written are
        # not half-applied, they are held, and the table shows why it stopped.
        assert snap["state"] == "awaiting_flip" and snap["cards_drawn"] == 0
        assert "disk full" in snap["storage_fault"] and snap["journal"] == "unwritable"
        assert snap["paused"] is True
        assert "STORAGE FAULT" in status_line(snap) and "2 inputs held" in status_line(snap)
        control = daemon.control_handler
        answer = control.control_supervisor("resume", None, Actor("root", 0)).result(10)
        assert not answer["ok"] and "journal write failed" in answer["error"]

        failing.clear()  # the disk is back: the retry journals a pause, then the held cards
        wait_until(lambda: daemon.snapshot().get("storage_fault") is None
                 and daemon.snapshot().get("held_inputs") == 0)
        snap = daemon.snapshot()
        assert snap["paused"] is True
        assert snap["journal"] == "ok"
    finally:
        daemon.request_stop()
        thread.join(10)
    with Journal(state_dir / "journal.sqlite") as journal:
        assert journal.verify().ok
        inputs = table_input_kinds(journal)
        events = journal.events_after(0, 100)
    # Journaled in order: the pause first, then both cards as they arrived (on a paused table:
    # faults for the supervisor, nothing lost).
    assert inputs == ["button", "fault", "card", "card"]
    pauses = [e["data"]["code"] for e in events if e["type"] == "paused"]
    assert pauses[0] == "journal_unwritable"
    assert "disk full" in [e for e in events if e["type"] == "paused"][0]["data"]["reason"]
    assert pauses[1:] == ["card_while_paused", "card_while_paused"]


def test_inputs_beyond_the_held_inputs_limit_are_dropped_and_counted(
        state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_fault_module, "STORAGE_RETRY_S", 60)
    monkeypatch.setattr(held_inputs_module, "HELD_INPUTS_MAX", 3)
    daemon = make_daemon(state_dir)
    thread = run_in_thread(daemon)
    try:
        daemon.journal.append_many = lambda entries: (_ for _ in ()).throw(
            JournalError("disk full (test)"))
        for _ in range(5):
            daemon.post(Button(0.0, "new_shoe"))
        wait_until(lambda: daemon.snapshot().get("dropped_inputs") == 2)
        assert daemon.snapshot()["held_inputs"] == 3
    finally:
        daemon.request_stop()
        thread.join(10)


def test_panel_presses_reach_the_table_and_leds_show_the_next_step(state_dir: Path) -> None:
    from drivers.sim.panel import SimPanel

    config = parse_config({
        "table": {"id": "L2"},
        "state_dir": str(state_dir),
        "shoe": {"driver": "beetek", "url": "/dev/null"},
        "control": control_section(state_dir / "c.sock"),
    }, "test")
    panels: list[SimPanel] = []

    def make_panel(sink, clock):
        panels.append(SimPanel(sink, {"reconnect_seconds": 0.1}, clock, "panel"))
        return panels[0]

    daemon = Daemon(config, notifier=Notifier({}), drivers=[make_panel], transports=[])
    thread = run_in_thread(daemon)
    try:
        panel = panels[0]
        wait_until(lambda: panel.connected.is_set())
        wait_until(lambda: panel.leds.get("new_shoe") is True)
        assert panel.leds.get("start_round") is False
        panel.press("new_shoe")
        wait_until(lambda: daemon.snapshot().get("state") == "awaiting_flip")
        wait_until(lambda: panel.leds.get("new_shoe") is False)
    finally:
        daemon.request_stop()
        thread.join(10)
    assert not panels[0].running  # the daemon stopped its driver


def test_an_input_that_breaks_the_machine_is_undone_and_pauses(state_dir: Path) -> None:
    daemon = make_daemon(state_dir)
    thread = run_in_thread(daemon)
    try:
        daemon.post(Button(0.0, "new_shoe"))
        wait_until(lambda: daemon.snapshot().get("state") == "awaiting_flip")
        machine = daemon.machine

        def broken(inp):
            machine.composition = None  # half-done damage before the failure
            raise RuntimeError("bug with secret KD in its message")

        machine.handle = broken
        future = daemon.submit(CardScan(0.0, parse_card("KD")))
        answer = future.result(10)
        assert not answer["ok"] and "RuntimeError" in answer["error"]
        assert "KD" not in answer["error"]
        snap = daemon.snapshot()
        assert snap["paused"] and snap["fault"]["code"] == "controller_fault"
        assert snap["fault"]["detail"]["code"] == "controller_error"
        assert "KD" not in json.dumps(snap)
        assert snap["state"] == "awaiting_flip" and snap["cards_drawn"] == 0
        assert daemon.machine is not machine  # rebuilt, not the damaged one
    finally:
        daemon.request_stop()
        thread.join(10)
    with Journal(state_dir / "journal.sqlite") as journal:
        assert table_input_kinds(journal) == ["button", "fault"]


def test_the_first_status_after_ready_already_reports_the_journal_archive(
        state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Everything a status answer reports exists before READY: no window without retention."""

    class SlowToCreate(JournalRetention):
        def __init__(self, *args: Any, **kwargs: Any):
            time.sleep(0.3)  # widens what was a race: READY came before retention existed
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(startup_parts_module, "JournalRetention", SlowToCreate)
    daemon = make_daemon(state_dir)
    thread = run_in_thread(daemon)  # returns as soon as READY was sent
    try:
        status = ControlClient(str(state_dir / "c.sock")).status()
        assert "runs" in status["journal_archive"]
    finally:
        daemon.request_stop()
        thread.join(10)
