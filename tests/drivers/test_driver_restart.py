"""A driver's thread body that fails unexpectedly is logged and run again: a table must not
be left without its shoe or panel until someone restarts the daemon."""

from __future__ import annotations

import logging
import threading

import pytest

from controller.table.inputs import Button, DeviceStatus
from drivers.base import Driver
from support.panel_helpers import Collector

pytestmark = pytest.mark.usefixtures("no_leaked_driver_threads")


class FailsTwiceThenServes(Driver):
    """A panel whose first two runs meet a bug; the third serves one button, then waits."""

    device = "panel"

    def __init__(self, sink):
        super().__init__(sink)
        self.runs = 0

    def _run(self, stop: threading.Event) -> None:
        self.runs += 1
        if self.runs <= 2:
            raise RuntimeError(f"a bug met on run {self.runs}")
        self.post(Button(self.clock(), "reveal"))
        stop.wait()


def test_a_failing_thread_body_is_reported_logged_and_run_again(caplog) -> None:
    caplog.set_level(logging.ERROR, logger="pokdeng.drivers.panel")
    sink = Collector()
    driver = FailsTwiceThenServes(sink)
    driver.start()
    try:
        sink.wait_count(Button, 1, timeout=10)  # runs again after 1 s, then after 2 s more
        assert driver.running and driver.runs == 3
    finally:
        driver.stop()
    assert [s.connected for s in sink.of(DeviceStatus)] == [False, False]
    failures = [r for r in caplog.records if "stopped by an unexpected error" in r.message]
    assert [r.message.rsplit(" ", 2)[-2] for r in failures] == ["1", "2"]  # "in 1 s", "in 2 s"
    assert all(r.exc_info for r in failures)


def test_a_stop_during_the_wait_ends_the_thread_without_another_run() -> None:
    sink = Collector()
    driver = FailsTwiceThenServes(sink)
    driver.start()
    sink.wait_count(DeviceStatus, 1)
    driver.stop(timeout=5)
    assert not driver.running and driver.runs == 1
