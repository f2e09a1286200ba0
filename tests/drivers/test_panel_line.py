"""The serial line panel driver over a real pty (the test plays the panel's firmware)."""

from __future__ import annotations

import logging
import time

import pytest

from controller.table.inputs import Button, DeviceStatus, Switch
from drivers import registry
from drivers.base import DriverConfigError
from drivers.line_panel import LinePanel, LinePanelConfig
from support.panel_helpers import Collector, PtyPanel, summary, wait_until

pytestmark = pytest.mark.usefixtures("no_leaked_driver_threads")


@pytest.fixture
def line(tmp_path):
    panel = PtyPanel(tmp_path / "panel")
    panel.plug()
    yield panel
    panel.unplug()


def options(line: PtyPanel, **extra):
    return {"url": str(line.path), "reconnect_seconds": 0.05, "debounce_ms": 50,
            "leds": ["start_round", "reveal"], **extra}


@pytest.fixture
def connected(line):
    sink = Collector()
    driver = LinePanel(sink, options(line))
    driver.start()
    line.expect(b"status?\n")
    yield driver, line, sink
    driver.stop()


def test_buttons_and_the_switch_level(connected):
    driver, line, sink = connected
    line.send(b"switch pause on\r\n")
    sink.wait_count(Switch, 1)
    line.send(b"START_ROUND\n  reveal \r\nswitch pause on\nswitch pause off\n")
    sink.wait_count(Switch, 2)
    sink.wait_count(Button, 2)
    assert summary(sink.snapshot()) == [
        ("device", "panel", True), ("switch", "pause", True), ("button", "start_round"),
        ("button", "reveal"), ("switch", "pause", False),  # the repeated "on" is no change
    ]


def test_split_lines_are_joined(connected):
    driver, line, sink = connected
    for piece in (b"star", b"t_rou", b"nd\nne", b"w_sh", b"oe\n"):
        line.send(piece)
        time.sleep(0.01)
    assert [b.name for b in sink.wait_count(Button, 2)] == ["start_round", "new_shoe"]


def test_garbage_is_logged_and_ignored(connected, caplog):
    driver, line, sink = connected
    caplog.set_level(logging.WARNING, logger="pokdeng.drivers.line_panel")
    line.send(b"\xff\xfe\x00\n" + b"deal\n" + b"switch pause maybe\n" + b"# firmware 1.2\n\n"
              + b"x" * 500 + b"\n" + b"end_shoe\n")
    sink.wait_count(Button, 1)
    assert [b.name for b in sink.of(Button)] == ["end_shoe"]
    assert driver.counters["bad_lines"] == 3 and driver.counters["too_long"] == 1
    messages = [r.message for r in caplog.records]
    assert any("ignored a line" in m and "not ASCII" in m for m in messages)
    assert any("longer than 64 bytes" in m for m in messages)


def test_a_repeat_within_the_debounce_is_ignored(connected):
    driver, line, sink = connected
    line.send(b"reveal\nreveal\n")
    sink.wait_count(Button, 1)
    wait_until(lambda: driver.counters["ignored_repeats"] == 1)
    time.sleep(0.1)
    line.send(b"reveal\n")
    sink.wait_count(Button, 2)


def test_leds_are_written_and_restored_after_a_reconnect(connected):
    driver, line, sink = connected
    driver.set_leds({"start_round": True, "cancel_round": True})  # no LED for cancel: ignored
    line.expect(b"led start_round on\n")
    with pytest.raises(ValueError, match="'disco'"):
        driver.set_leds({"disco": True})
    line.unplug()
    line.plug()
    line.expect(b"status?\n")
    line.expect(b"led start_round on\n")


def test_unplug_and_replug(connected, caplog):
    driver, line, sink = connected
    caplog.set_level(logging.WARNING, logger="pokdeng.drivers.line_panel")
    line.send(b"switch pause off\n")
    sink.wait_count(Switch, 1)
    line.unplug()
    sink.wait_count(DeviceStatus, 2)
    wait_until(lambda: sum("retrying" in r.message for r in caplog.records) >= 3,
               what="three retries")
    line.plug()
    line.expect(b"status?\n")  # the host asks for the switch again after the reconnect
    line.send(b"switch pause on\nnew_shoe\n")
    sink.wait_count(Button, 1)
    assert summary(sink.snapshot()) == [
        ("device", "panel", True), ("switch", "pause", False), ("device", "panel", False),
        ("device", "panel", True), ("switch", "pause", True), ("button", "new_shoe"),
    ]


def test_a_connector_that_flaps_many_times_leaves_the_driver_serving(line, tmp_path):
    """Unplugs that land between the driver's looks at the node (link there, its target gone,
    then the link gone) must never stop its thread: after the flapping it connects again."""
    sink = Collector()
    driver = LinePanel(sink, options(line, reconnect_seconds=0.01))
    driver.start()
    try:
        line.expect(b"status?\n")
        flapping_until = time.monotonic() + 2.0
        while time.monotonic() < flapping_until:
            line.unplug()
            line.plug()
        line.unplug()
        time.sleep(0.2)  # retries against nothing at all
        assert driver.running, "the driver's thread died while the connector flapped"
        line.plug()
        line.expect(b"status?\n")
        line.send(b"new_shoe\n")
        assert [b.name for b in sink.wait_count(Button, 1)] == ["new_shoe"]
    finally:
        driver.stop()


def test_the_same_switch_level_is_posted_again_after_a_reconnect(connected):
    driver, line, sink = connected
    line.send(b"switch pause on\n")
    sink.wait_count(Switch, 1)
    line.unplug()
    sink.wait_count(DeviceStatus, 2)
    line.plug()
    line.expect(b"status?\n")
    line.send(b"switch pause on\n")
    assert [s.on for s in sink.wait_count(Switch, 2)] == [True, True]


def test_a_port_absent_at_start_is_reported_once(tmp_path, caplog):
    line = PtyPanel(tmp_path / "panel")
    sink = Collector()
    caplog.set_level(logging.WARNING, logger="pokdeng.drivers.line_panel")
    with LinePanel(sink, options(line)):
        sink.wait_count(DeviceStatus, 1)
        wait_until(lambda: sum("retrying" in r.message for r in caplog.records) >= 3,
                   what="three retries")
        line.plug()
        line.expect(b"status?\n")
        sink.wait_count(DeviceStatus, 2)
    line.unplug()
    assert summary(sink.snapshot()) == [("device", "panel", False), ("device", "panel", True)]


def test_stop_is_prompt_and_idempotent(connected):
    driver, line, sink = connected
    started = time.monotonic()
    driver.stop()
    driver.stop()
    assert time.monotonic() - started < 1.0 and not driver.running


def test_registry_creates_the_line_panel(line):
    driver = registry.create("line_panel", Collector(), options(line))
    assert isinstance(driver, LinePanel)


@pytest.mark.parametrize("bad, message", [
    ({"url": None}, 'line_panel option "url": is required'),
    ({"baudrate": "fast"}, 'line_panel option "baudrate": expected an integer'),
    ({"leds": "start_round"}, 'line_panel option "leds": expected a list'),
    ({"reconnect_seconds": 0}, 'line_panel option "reconnect_seconds": must be in'),
    ({"baud": 9600}, 'line_panel option "baud": unknown option'),
])
def test_bad_options_name_the_option(tmp_path, bad, message):
    opts = {"url": "/dev/pokdeng/panel", **bad}
    with pytest.raises(DriverConfigError) as err:
        LinePanelConfig.from_options(opts)
    assert message in str(err.value)


def test_a_panel_that_never_reports_its_switch_is_warned_about(line, caplog, monkeypatch):
    import drivers.line_panel

    monkeypatch.setattr(drivers.line_panel, "STATUS_ANSWER_SECONDS", 0.1)
    caplog.set_level(logging.WARNING, logger="pokdeng.drivers.line_panel")
    sink = Collector()
    with LinePanel(sink, options(line)):
        line.expect(b"status?\n")
        wait_until(lambda: any("has not reported its key switch" in r.message
                               for r in caplog.records))
        line.send(b"reveal\n")
        sink.wait_count(Button, 1)
    assert sum("has not reported" in r.message for r in caplog.records) == 1


def test_a_panel_that_stops_reading_still_has_its_buttons_read(line):
    """Its firmware hung on its receive side (or flow control is held): what the host writes
    fills the line and stays there. The LED writes must give up, not the thread that reads the
    buttons; the LEDs follow once the panel reads again."""
    sink = Collector()
    driver = LinePanel(sink, options(line))
    driver.start()
    try:
        line.expect(b"status?\n")  # and the test reads nothing more from the line until…
        for n in range(3000):  # far more than the line holds: about 20 KB on a pty
            driver.set_leds({"start_round": n % 2 == 0, "reveal": n % 2 == 1})
            time.sleep(0.001)  # each change written on its own, as a table's would be
        time.sleep(1.0)
        line.send(b"new_shoe\n")
        assert [b.name for b in sink.wait_count(Button, 1)] == ["new_shoe"]
        assert driver.running
        driver.set_leds({"start_round": True, "reveal": True})
        line.expect(b"led reveal on\nled start_round on\n", timeout=10)
    finally:
        driver.stop()
    assert not driver.running, "the driver's thread did not end at the stop"
