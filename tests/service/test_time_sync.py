"""The kernel's clock synchronisation, read with adjtimex, and how the owner loop reports it."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from controller.service.clock import watch as clock_watch
from controller.service.clock.table_clock import TableClock
from controller.service.clock.time_sync import (
    NOT_SYNCHRONISED,
    STA_UNSYNC,
    SYNC_STATES,
    SYNCHRONISED,
    UNKNOWN,
    SyncReading,
    Timex,
    interpret,
    read_kernel_sync,
)
from controller.service.clock.watch import ClockWatch

C_READER = r"""
#include <stdio.h>
#include <stddef.h>
#include <sys/timex.h>
int main(void) {
    struct timex t = {0};
    int result = adjtimex(&t);
    printf("%zu %zu %zu %zu %zu %d %d %ld\n", sizeof(struct timex),
           offsetof(struct timex, maxerror), offsetof(struct timex, status),
           offsetof(struct timex, time), offsetof(struct timex, tai),
           result, t.status, t.maxerror);
    return 0;
}
"""


def test_interpret_the_kernel_flags() -> None:
    assert interpret(0, 0, 12_000) == SyncReading(SYNCHRONISED, 0.012)
    assert interpret(0, STA_UNSYNC, 16_000_000).state == NOT_SYNCHRONISED
    assert interpret(5, 0, 16_000_000).state == NOT_SYNCHRONISED  # TIME_ERROR
    assert SyncReading(NOT_SYNCHRONISED).words() == "NOT synchronised"
    assert SyncReading(UNKNOWN).words() == "unknown"


def test_the_real_kernel_reading_is_one_of_the_states() -> None:
    reading = read_kernel_sync()
    assert reading.state in SYNC_STATES
    if reading.state != UNKNOWN:
        assert reading.max_error_s is not None and reading.max_error_s >= 0


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_the_struct_matches_the_c_header_and_reads_what_c_reads(tmp_path: Path) -> None:
    source = tmp_path / "timex.c"
    source.write_text(C_READER)
    subprocess.run(["cc", "-o", str(tmp_path / "timex"), str(source)], check=True)
    out = subprocess.run([str(tmp_path / "timex")], check=True, capture_output=True,
                         text=True).stdout.split()
    size, maxerror, status, time_, tai = (int(x) for x in out[:5])
    assert ctypes.sizeof(Timex) == size
    assert (Timex.maxerror.offset, Timex.status.offset, Timex.time.offset,
            Timex.tai.offset) == (maxerror, status, time_, tai)
    result, c_status = int(out[5]), int(out[6])
    if result >= 0:  # both read the same kernel state (it changes only with NTP's word)
        assert read_kernel_sync().state == interpret(result, c_status, int(out[7])).state


class Readings:
    def __init__(self, *readings: SyncReading):
        self.readings = list(readings)
        self.calls = 0

    def __call__(self) -> SyncReading:
        self.calls += 1
        return self.readings[min(self.calls, len(self.readings)) - 1]


class Mono:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fresh_clock_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock watch's logger, not yet bound: a daemon run earlier in this process (with
    cache_logger_on_first_use) would keep it writing past ``capture_logs``."""
    monkeypatch.setattr(clock_watch, "log", structlog.get_logger("pokdeng.clock"))


@pytest.mark.usefixtures("fresh_clock_log")
def test_a_sync_change_is_reported_once_and_logged_once() -> None:
    mono = Mono()
    readings = Readings(*[SyncReading(NOT_SYNCHRONISED, 16.0)] * 3,
                        SyncReading(SYNCHRONISED, 0.01))
    watch = ClockWatch(TableClock(), readings, poll_seconds=10, monotonic=mono)
    watch.start("unknown")
    with capture_logs() as logs:
        [report] = watch.reports()
        assert (report.sync, report.max_error_s, report.step_s) == (NOT_SYNCHRONISED, 16.0, None)
        for _ in range(50):  # every turn of the loop: polled every 10 s, reported once
            mono.now += 0.5
            assert watch.reports() == []
        assert readings.calls == 3
        mono.now += 10
        [report] = watch.reports()
    assert report.sync == SYNCHRONISED
    assert [(entry["log_level"], entry["event"][:40]) for entry in logs] == [
        ("warning", "the system clock is NOT synchronised: ev"),
        ("info", "the system clock is synchronised"),
    ]


def test_the_journaled_state_is_not_news() -> None:
    watch = ClockWatch(TableClock(), Readings(SyncReading(SYNCHRONISED, 0.01)), monotonic=Mono())
    watch.start(SYNCHRONISED)
    assert watch.reports() == []


@pytest.mark.usefixtures("fresh_clock_log")
def test_a_step_is_reported_with_the_sync_state_and_logged_once() -> None:
    wall_offset = [0.0]
    mono = Mono()
    clock = TableClock(wall=lambda: 1e9 + wall_offset[0] + mono.now, monotonic=mono)
    watch = ClockWatch(clock, Readings(SyncReading(SYNCHRONISED, 0.01)), monotonic=mono)
    watch.start(SYNCHRONISED)
    with capture_logs() as logs:
        assert watch.reports() == []
        wall_offset[0] = -3600
        mono.now += 1
        [report] = watch.reports()
        assert watch.reports() == []
    assert (report.sync, report.step_s) == (SYNCHRONISED, -3600.0)
    [entry] = logs
    assert entry["log_level"] == "warning"
    assert entry["event"].startswith("the wall clock was stepped backward by 3600.000 s")


def test_a_reader_that_fails_gives_unknown() -> None:
    def broken() -> SyncReading:
        raise OSError("no libc here")

    watch = ClockWatch(TableClock(), broken, monotonic=Mono())
    watch.start(SYNCHRONISED)
    [report] = watch.reports()
    assert report.sync == UNKNOWN
    assert watch.last_reading is not None and "no libc" in (watch.last_reading.detail or "")
