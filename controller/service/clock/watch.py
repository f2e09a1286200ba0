"""What the owner loop learns about the system clock: wall-clock steps and synchronisation.

The owner loop asks ``reports()`` at every turn. A step the table clock saw
(``TableClock.take_steps``) and a change of the kernel's synchronisation state (read with
adjtimex every ``SYNC_POLL_S``) each become a ``clock`` input for the table, which journals it
and sends a ``clock_status`` event. Each is logged once, when it happens: a step and a clock
that is not synchronised at WARNING, never once a second.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from controller.service.clock.table_clock import ClockStep, TableClock
from controller.service.clock.time_sync import (
    NOT_SYNCHRONISED,
    SYNCHRONISED,
    SyncReading,
    read_kernel_sync,
)
from controller.table.events import iso_time
from controller.table.inputs import ClockReport

log = structlog.get_logger("pokdeng.clock")

SYNC_POLL_S = 10.0  # the kernel's state changes slowly; a cheap system call all the same


class ClockWatch:
    """Turns what the clocks say into the table's ``clock`` inputs, logging each change once."""

    def __init__(self, clock: TableClock, read_sync: Callable[[], SyncReading] = read_kernel_sync,
                 *, poll_seconds: float = SYNC_POLL_S,
                 monotonic: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._read_sync = read_sync
        self._poll_seconds = poll_seconds
        self._monotonic = monotonic
        self._reported: str | None = None  # the state the table last heard of
        self._next_poll = 0.0
        self.last_reading: SyncReading | None = None

    def start(self, journaled_sync: str) -> None:
        """The state the journal last recorded: the first reading is news only if it differs."""
        self._reported = journaled_sync
        self._next_poll = 0.0

    def reports(self) -> list[ClockReport]:
        """The ``clock`` inputs due now (stamped by the daemon), usually none."""
        self._clock.now()  # a reading is what notices a step
        steps = self._clock.take_steps()
        if not steps and self._monotonic() < self._next_poll:
            return []
        reading = self._poll()
        reports = []
        for step in steps:
            _log_step(step)
            reports.append(ClockReport(0.0, reading.state, reading.max_error_s, step.seconds))
        if reading.state != self._reported:
            _log_sync(reading)
            if not reports:
                reports.append(ClockReport(0.0, reading.state, reading.max_error_s))
            self._reported = reading.state
        return reports

    def _poll(self) -> SyncReading:
        try:
            reading = self._read_sync()
        except Exception as exc:  # never let a clock report stop the table
            reading = SyncReading("unknown", detail=f"cannot read: {exc}")
        self.last_reading = reading
        self._next_poll = self._monotonic() + self._poll_seconds
        return reading


def _log_step(step: ClockStep) -> None:
    after = ("event times hold until the wall clock passes them again"
             if step.seconds < 0 else "event times follow it once no countdown runs")
    log.warning(f"the wall clock was stepped {step.direction} by {abs(step.seconds):.3f} s; "
                f"the betting countdown keeps to the monotonic clock and {after}",
                step_s=step.seconds, wall_time=iso_time(step.wall_time))


def _log_sync(reading: SyncReading) -> None:
    if reading.state == NOT_SYNCHRONISED:
        log.warning("the system clock is NOT synchronised: event times may be off; "
                    "check chrony or systemd-timesyncd", max_error_s=reading.max_error_s)
    elif reading.state == SYNCHRONISED:
        log.info("the system clock is synchronised", max_error_s=reading.max_error_s)
    else:
        log.info("cannot tell whether the system clock is synchronised", reason=reading.detail)
