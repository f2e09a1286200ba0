"""The real owner loop with a wall clock the test steps by an hour during open betting.

The daemon runs in-process (its own owner thread, a real SQLite journal, the control socket);
only its wall-clock source is the test's: ``time.time()`` plus an offset the test moves. The
machine's own clock is never touched. Betting must close after ``betting_seconds`` measured on
the monotonic clock, both ways, and event times must never go backwards, also across a restart
after a backward step.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.durability.journal import Journal
from controller.rules.cards import parse_card
from controller.service.clock.table_clock import TableClock
from controller.service.clock.time_sync import SyncReading
from controller.service.config.settings import parse_config
from controller.service.control.client import ControlClient
from controller.service.daemon import Daemon
from controller.service.telemetry.logging_setup import setup_logging
from controller.service.telemetry.notify import Notifier
from controller.table.events import seconds_of
from controller.table.inputs import Actor, Button, CardScan
from support.daemon_helpers import cli, control_section
from support.waiting import wait_until

BETTING_SECONDS = 2.0
HOUR = 3600.0
ROOT = Actor("root", 0)


class SteppedWall:
    """The daemon's wall clock: the real one plus an offset the test steps."""

    def __init__(self, offset: float = 0.0):
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


class EventLog:
    """Every event the daemon journals, with the monotonic time it was seen."""

    def __init__(self) -> None:
        self.events: list[tuple[dict[str, Any], float]] = []
        self.lock = threading.Lock()

    def __call__(self, events: list[dict[str, Any]]) -> None:
        seen = time.monotonic()
        with self.lock:
            self.events += [(event, seen) for event in events]

    def first(self, type_: str) -> tuple[dict[str, Any], float] | None:
        with self.lock:
            return next(((e, t) for e, t in self.events if e["type"] == type_), None)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pdc-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    out = io.StringIO()
    setup_logging("info", "json", stream=out)
    try:
        yield out
    finally:
        setup_logging("warning", "console", stream=io.StringIO())


def start_daemon(state_dir: Path, wall: SteppedWall, sync: str = "synchronised",
                 ) -> tuple[Daemon, threading.Thread, EventLog]:
    config = parse_config({
        "table": {"id": "C1", "betting_seconds": BETTING_SECONDS},
        "state_dir": str(state_dir),
        "shoe": {"driver": "beetek", "url": "/dev/null"},
        "control": control_section(state_dir / "c.sock"),
    }, "test")
    daemon = Daemon(config, notifier=Notifier({}), clock=TableClock(wall=wall), drivers=[],
                    transports=[], time_sync=lambda: SyncReading(sync, 0.02))
    events = EventLog()
    daemon.add_event_listener(events)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    assert daemon.ready.wait(10)
    return daemon, thread, events


def stop(daemon: Daemon, thread: threading.Thread) -> None:
    daemon.request_stop()
    thread.join(10)
    assert not thread.is_alive()


def open_betting(daemon: Daemon) -> None:
    """A new shoe (flip A: burn one) and a round: betting is open."""
    daemon.post(Button(0.0, "new_shoe"))
    daemon.post(CardScan(0.0, parse_card("AH")))
    daemon.post(CardScan(0.0, parse_card("9C")))
    daemon.post(Button(0.0, "start_round"))
    wait_until(lambda: daemon.snapshot().get("betting_open"), what="betting open")


def betting_duration(daemon: Daemon, events: EventLog) -> float:
    """Monotonic seconds from round_opened to betting_closed (as the listener saw them)."""
    opened = events.first("round_opened")
    closed = wait_until(lambda: events.first("betting_closed"), timeout=BETTING_SECONDS + 8,
                        what="betting_closed", details=lambda: daemon.snapshot())
    assert opened is not None
    return closed[1] - opened[1]


def journal_times(state_dir: Path) -> list[float]:
    with Journal(state_dir / "journal.sqlite") as journal:
        assert journal.verify().ok
        events = journal.events_after(0, 10_000)
    return [seconds_of(event["time"]) for event in events]  # type: ignore[misc]


def step_warnings(log_lines: io.StringIO) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log_lines.getvalue().splitlines() if line.strip()]
    return [line for line in lines
            if line.get("level") == "warning" and "wall clock was stepped" in line["event"]]


@pytest.mark.slow
@pytest.mark.parametrize("step", [+HOUR, -HOUR], ids=["forward", "backward"])
def test_a_wall_clock_step_during_betting_neither_shortens_nor_lengthens_it(
        state_dir: Path, log_lines: io.StringIO, step: float) -> None:
    wall = SteppedWall()
    daemon, thread, events = start_daemon(state_dir, wall)
    try:
        open_betting(daemon)
        wall.offset += step
        duration = betting_duration(daemon, events)
        # The step is reported once: a clock_status event of the open round, the status, a log.
        reports = [e for e, _ in events.events
                   if e["type"] == "clock_status" and "step_s" in e["data"]]
        assert [r["data"]["step_s"] for r in reports] == [pytest.approx(step, abs=0.5)]
        assert reports[0]["round"] == 1 and reports[0]["data"]["sync"] == "synchronised"
        status = ControlClient(str(state_dir / "c.sock")).status()
        assert status["last_clock_step"]["seconds"] == pytest.approx(step, abs=0.5)
        assert status["clock_sync"] == "synchronised"
        # After betting: a forward step is followed, a backward one holds table time.
        answer = daemon.control_handler.control_supervisor("cancel_round", None, ROOT).result(10)
        assert answer["ok"], answer
    finally:
        stop(daemon, thread)
    assert BETTING_SECONDS - 0.3 <= duration <= BETTING_SECONDS + 1.5, duration
    times = journal_times(state_dir)
    assert times == sorted(times)
    opened, closed = (seconds_of(events.first(t)[0]["time"])  # type: ignore[index]
                      for t in ("round_opened", "betting_closed"))
    assert closed - opened == pytest.approx(BETTING_SECONDS, abs=0.002)
    cancelled = seconds_of(events.first("round_cancelled")[0]["time"])  # type: ignore[index]
    if step > 0:
        assert cancelled >= time.time() + step - 60  # on the stepped wall clock again
    else:
        assert cancelled == pytest.approx(closed, abs=1.0)  # held: the wall clock is behind
    warnings = step_warnings(log_lines)
    assert len(warnings) == 1
    direction = "forward" if step > 0 else "backward"
    assert f"stepped {direction} by 3600" in warnings[0]["event"]


@pytest.mark.slow
def test_event_times_never_go_back_across_a_restart_after_a_backward_step(
        state_dir: Path, log_lines: io.StringIO) -> None:
    wall = SteppedWall()
    daemon, thread, events = start_daemon(state_dir, wall)
    try:
        open_betting(daemon)
        wall.offset -= HOUR
        betting_duration(daemon, events)
    finally:
        stop(daemon, thread)
    before = journal_times(state_dir)
    last_before = before[-1]
    assert last_before > wall() + HOUR - 60  # table time is an hour ahead of the wall clock

    # The same table restarts with the wall clock still an hour behind its last event.
    daemon, thread, events = start_daemon(state_dir, wall)
    try:
        answer = daemon.control_handler.control_supervisor("cancel_round", None, ROOT).result(10)
        assert answer["ok"], answer
        daemon.post(Button(0.0, "start_round"))
        # The held table time must not freeze this countdown: it closes on time.
        wait_until(lambda: events.first("round_opened"), what="round 2 opened")
        duration = betting_duration(daemon, events)
    finally:
        stop(daemon, thread)
    assert BETTING_SECONDS - 0.3 <= duration <= BETTING_SECONDS + 1.5, duration
    after = journal_times(state_dir)
    assert len(after) > len(before)
    assert after == sorted(after) and after[len(before)] >= last_before


@pytest.mark.slow
def test_a_clock_that_is_not_synchronised_is_sent_once_and_shown_to_the_supervisor(
        state_dir: Path, log_lines: io.StringIO) -> None:
    wall = SteppedWall()
    daemon, thread, events = start_daemon(state_dir, wall, sync="not_synchronised")
    try:
        daemon.post(Button(0.0, "new_shoe"))
        wait_until(lambda: events.first("shoe_started"), what="shoe_started")
        socket = str(state_dir / "c.sock")
        status = cli("status", "--socket", socket)
        view = cli("watch", "--once", "--socket", socket)
        snapshot = daemon.snapshot()
    finally:
        stop(daemon, thread)
    assert status.returncode == 0, status.stderr
    assert "clock: NOT synchronised (check chrony or systemd-timesyncd)" in status.stdout
    assert "CLOCK NOT SYNCHRONISED" in view.stdout
    assert snapshot["clock_sync"] == "not_synchronised"
    reports = [e for e, _ in events.events if e["type"] == "clock_status"]
    assert [r["data"] for r in reports] == [{"sync": "not_synchronised", "max_error_s": 0.02}]
    assert sync_warnings(log_lines) == ["warning"]

    # A restart with the same state is not news: no second event, no second warning.
    daemon, thread, events = start_daemon(state_dir, wall, sync="not_synchronised")
    stop(daemon, thread)
    assert not [e for e, _ in events.events if e["type"] == "clock_status"]
    assert sync_warnings(log_lines) == ["warning"]


def sync_warnings(log_lines: io.StringIO) -> list[str]:
    lines = [json.loads(line) for line in log_lines.getvalue().splitlines() if line.strip()]
    return [line["level"] for line in lines if "NOT synchronised" in line["event"]]
