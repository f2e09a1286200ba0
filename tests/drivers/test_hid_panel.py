"""The USB HID panel driver, running unchanged on pyusb's core over the emulated panel backend."""

from __future__ import annotations

import logging
import time

import pytest

from controller.table.inputs import Button, DeviceStatus, Switch
from drivers import registry
from drivers.base import DriverConfigError
from drivers.debounce import Debouncer
from drivers.hid_panel import HidPanel, HidPanelConfig, ReportClock, ReportLayout
from drivers.sim.panel import SimPanel
from drivers.sim.usb_emulation import EmulatedBackend, EmulatedHidPanel
from support.panel_helpers import Collector, summary, wait_until

VID, PID = 0x16C0, 0x05DF
BUTTONS = {"new_shoe": 0, "start_round": 1, "reveal": 2, "cancel_round": 3, "end_shoe": 4}
PAUSE = 0x80
DEBOUNCE_S = 0.03


def buttons_once_settled(panel, sink, marker: str = "end_shoe") -> list[str]:
    """The buttons posted for everything the panel did so far, without a fixed wait: a marker
    press (a button the test did not just use) is queued after it and waited for; the debouncer
    confirms presses in time order, so a stray press from the earlier input would come before
    the marker. The marker is left out of the answer (and must be the last press)."""
    wait_until(panel.idle)
    panel.press_bit(BUTTONS[marker], hold_s=0.1)
    sink.wait_for(lambda items: any(isinstance(i, Button) and i.name == marker
                                    for i in items), what="the marker press")
    names = [b.name for b in sink.of(Button)]
    assert names[-1] == marker, names
    return names[:-1]


def options(**extra):
    base = {"vendor_id": "0x16c0", "product_id": PID, "buttons": BUTTONS, "pause_switch_bit": 7,
            "leds": {"start_round": 1, "reveal": 2}, "debounce_ms": DEBOUNCE_S * 1000,
            "reconnect_seconds": 0.05}
    base.update(extra)
    return base


pytestmark = pytest.mark.usefixtures("no_leaked_driver_threads")


@pytest.fixture
def hardware():
    panel = EmulatedHidPanel(vendor_id=VID, product_id=PID, serial="P-1")
    return EmulatedBackend([panel]), panel


@pytest.fixture
def running(hardware):
    backend, panel = hardware
    sink = Collector()
    driver = HidPanel(sink, options(), backend=backend)
    driver.start()
    assert driver.connected.wait(5)
    yield driver, panel, sink
    driver.stop()


def test_connect_posts_connected_then_the_switch_level(hardware):
    backend, panel = hardware
    panel.set_input(PAUSE)
    sink = Collector()
    with HidPanel(sink, options(), backend=backend):
        sink.wait_count(Switch, 1)
    assert summary(sink.snapshot())[:2] == [("device", "panel", True), ("switch", "pause", True)]


def test_press_edges_become_buttons(running):
    driver, panel, sink = running
    for name in ("new_shoe", "start_round", "reveal", "cancel_round", "end_shoe"):
        panel.press_bit(BUTTONS[name], hold_s=0.1)
        panel.queue_inputs([(0.05, 0)])  # stay released past the debounce before the next
    buttons = sink.wait_count(Button, 5)
    assert [b.name for b in buttons] == list(BUTTONS)
    assert driver.counters["presses"] == 5


def test_a_held_button_is_one_press_and_release_posts_nothing(running):
    driver, panel, sink = running
    panel.set_input(1 << BUTTONS["reveal"])
    sink.wait_count(Button, 1)
    panel.set_input(0)
    assert buttons_once_settled(panel, sink) == ["reveal"]


def test_contact_bounce_is_one_press(running):
    driver, panel, sink = running
    bit = 1 << BUTTONS["start_round"]
    bounce = [(0.0, bit), (0.003, 0), (0.002, bit), (0.004, 0), (0.002, bit)]
    release_with_bounce = [(0.08, 0), (0.003, bit), (0.002, 0)]
    panel.queue_inputs(bounce + release_with_bounce)
    sink.wait_count(Button, 1)
    assert buttons_once_settled(panel, sink) == ["start_round"]
    assert driver.counters["reports"] >= 6  # the bounces did reach the driver


def test_a_glitch_shorter_than_the_debounce_is_not_a_press(running):
    driver, panel, sink = running
    panel.queue_inputs([(0.0, 1 << BUTTONS["cancel_round"]), (DEBOUNCE_S / 3, 0)])
    assert buttons_once_settled(panel, sink) == []


def test_a_repress_within_the_debounce_is_ignored_but_a_real_second_press_counts(running):
    driver, panel, sink = running
    bit = 1 << BUTTONS["reveal"]
    panel.queue_inputs([(0.0, bit), (0.1, 0), (DEBOUNCE_S / 3, bit), (0.1, 0)])
    assert buttons_once_settled(panel, sink) == ["reveal"]
    panel.queue_inputs([(0.0, bit), (0.1, 0)])  # released long enough: a second press
    assert [b.name for b in sink.wait_count(Button, 3)] == ["reveal", "end_shoe", "reveal"]


def test_switch_is_a_debounced_level(running):
    driver, panel, sink = running
    sink.wait_count(Switch, 1)
    panel.queue_inputs([(0.0, PAUSE), (0.002, 0), (0.002, PAUSE)])
    sink.wait_count(Switch, 2)
    panel.set_input(0)
    switches = sink.wait_count(Switch, 3)
    assert [s.on for s in switches] == [False, True, False]


def test_a_button_held_while_connecting_is_not_a_press(hardware):
    backend, panel = hardware
    panel.set_input(1 << BUTTONS["end_shoe"])
    sink = Collector()
    with HidPanel(sink, options(), backend=backend) as driver:
        assert driver.connected.wait(5)
        time.sleep(3 * DEBOUNCE_S)
        panel.set_input(0)
        assert buttons_once_settled(panel, sink, marker="new_shoe") == []


def test_unplug_replug_reports_once_each_way_and_rereads_the_switch(hardware, caplog):
    backend, panel = hardware
    sink = Collector()
    caplog.set_level(logging.WARNING, logger="pokdeng.drivers.hid_panel")
    with HidPanel(sink, options(), backend=backend) as driver:
        sink.wait_count(Switch, 1)
        panel.unplug()
        sink.wait_for(lambda items: DeviceStatus in map(type, items[2:]), what="disconnect")
        wait_until(lambda: sum("retrying" in r.message for r in caplog.records) >= 3,
                   what="three retries")
        panel.set_input(PAUSE)  # the key turned while the panel was unplugged
        panel.replug()
        sink.wait_count(Switch, 2)
        panel.press_bit(BUTTONS["new_shoe"], 0.1)
        sink.wait_count(Button, 1)
        assert driver.counters["connects"] == 2
    assert summary(sink.snapshot()) == [
        ("device", "panel", True), ("switch", "pause", False),
        ("device", "panel", False),
        ("device", "panel", True), ("switch", "pause", True),
        ("button", "new_shoe"),
    ]
    retry_lines = [r.message for r in caplog.records if "retrying" in r.message]
    assert all("16c0:05df" in m and "not found" in m for m in retry_lines)


def test_a_panel_absent_at_start_is_reported_once_and_picked_up_when_plugged(hardware, caplog):
    backend, panel = hardware
    panel.unplug()
    sink = Collector()
    caplog.set_level(logging.WARNING, logger="pokdeng.drivers.hid_panel")
    with HidPanel(sink, options(), backend=backend):
        sink.wait_count(DeviceStatus, 1)
        wait_until(lambda: sum("retrying" in r.message for r in caplog.records) >= 3,
                   what="three retries")
        panel.replug()
        sink.wait_count(Switch, 1)
    assert summary(sink.snapshot()) == [("device", "panel", False), ("device", "panel", True),
                                        ("switch", "pause", False)]


def test_leds_are_sent_and_sent_again_after_a_reconnect(running):
    driver, panel, sink = running
    wait_until(lambda: panel.leds == 0, what="initial all-off LED report")
    driver.set_leds({"start_round": True})
    wait_until(lambda: panel.leds == 0b010, what="start_round LED")
    driver.set_leds({"reveal": True, "new_shoe": True})  # new_shoe has no LED here: ignored
    wait_until(lambda: panel.leds == 0b110, what="reveal LED")
    driver.set_leds({"start_round": False})
    wait_until(lambda: panel.leds == 0b100)
    with pytest.raises(ValueError, match="'disco'"):
        driver.set_leds({"disco": True})
    panel.unplug()
    panel.out_reports.clear()
    panel.replug()
    wait_until(lambda: panel.out_reports == [b"\x04"], what="LED state restored after replug")


def test_leds_by_set_report_when_the_panel_has_no_out_endpoint():
    panel = EmulatedHidPanel(vendor_id=VID, product_id=PID, has_out_endpoint=False)
    sink = Collector()
    with HidPanel(sink, options(), backend=EmulatedBackend([panel])) as driver:
        assert driver.connected.wait(5)
        driver.set_leds({"reveal": True})
        wait_until(lambda: panel.leds == 0b100)


def test_kernel_driver_detached_on_connect_and_given_back_on_stop(hardware, caplog):
    backend, panel = hardware
    caplog.set_level(logging.INFO, logger="pokdeng.drivers.hid_panel")
    assert panel.kernel_driver_bound
    driver = HidPanel(Collector(), options(), backend=backend)
    driver.start()
    assert driver.connected.wait(5)
    assert not panel.kernel_driver_bound
    assert any("detached the kernel driver" in r.message for r in caplog.records)
    driver.stop()
    assert panel.kernel_driver_bound


def test_without_detaching_a_bound_panel_stays_unavailable_with_a_plain_reason(hardware, caplog):
    backend, panel = hardware
    caplog.set_level(logging.WARNING, logger="pokdeng.drivers.hid_panel")
    sink = Collector()
    with HidPanel(sink, options(detach_kernel_driver=False), backend=backend):
        wait_until(lambda: any("Resource busy" in r.message for r in caplog.records))
    assert summary(sink.snapshot()) == [("device", "panel", False)]


def test_stop_is_prompt_idempotent_and_safe_before_start(running, hardware):
    driver, panel, sink = running
    started = time.monotonic()
    driver.stop()
    driver.stop()
    assert time.monotonic() - started < 1.0
    assert not driver.running and not driver.connected.is_set()
    never_started = HidPanel(Collector(), options(), backend=hardware[0])
    never_started.stop()
    never_started.stop()


def test_bad_reports_are_counted_and_ignored():
    panel = EmulatedHidPanel(vendor_id=VID, product_id=PID, report_length=2)
    sink = Collector()
    with HidPanel(sink, options(report_id=3, buttons={"reveal": 0}, pause_switch_bit=None),
                  backend=EmulatedBackend([panel])) as driver:
        assert driver.connected.wait(5)
        panel.queue_inputs([(0.0, 0x0102), (0.01, 0x0001)])  # report id 2, then id 1: not ours
        wait_until(lambda: driver.counters["bad_reports"] >= 2)
        # id 3 with bit 0 set, then released: held half a second, as a dealer's press is (this
        # panel has no time stamps, so a press is judged on when its reports are read)
        panel.queue_inputs([(0.0, 0x0103), (0.5, 0x0003)])
        sink.wait_count(Button, 1)
    assert [b.name for b in sink.of(Button)] == ["reveal"]


def test_switch_known_from_the_first_report_when_get_report_is_not_supported():
    panel = EmulatedHidPanel(vendor_id=VID, product_id=PID, supports_get_report=False)
    panel_bus = EmulatedBackend([panel])
    panel.set_input(PAUSE)
    sink = Collector()
    with HidPanel(sink, options(), backend=panel_bus) as driver:
        assert driver.connected.wait(5)
        assert sink.of(Switch) == []
        panel.set_input(PAUSE | 1)  # the next report carries the switch level too
        sink.wait_count(Switch, 1)
    assert [s.on for s in sink.of(Switch)] == [True]


def test_the_panel_is_chosen_by_serial_number():
    other = EmulatedHidPanel(vendor_id=VID, product_id=PID, serial="OTHER")
    ours = EmulatedHidPanel(vendor_id=VID, product_id=PID, serial="OURS")
    sink = Collector()
    with HidPanel(sink, options(serial="OURS"), backend=EmulatedBackend([other, ours])) as driver:
        assert driver.connected.wait(5)
        assert other.kernel_driver_bound and not ours.kernel_driver_bound
        other.press_bit(0, 0.06)
        ours.press_bit(1, 0.1)
        sink.wait_count(Button, 1)
        wait_until(lambda: other.idle() and ours.idle())
        assert buttons_once_settled(ours, sink) == ["start_round"]


def test_registry_creates_the_panel_drivers(hardware):
    assert registry.driver_class("hid_panel") is HidPanel
    driver = registry.create("hid_panel", Collector(), options(), backend=hardware[0])
    assert isinstance(driver, HidPanel)
    assert registry.driver_class("sim_panel") is SimPanel


@pytest.mark.parametrize("bad, option", [
    ({"vendor_id": None}, '"vendor_id": is required'),
    ({"vendor_id": "acme"}, '"vendor_id": expected an integer'),
    ({"product_id": 0x10000}, '"product_id": must be in 0..65535'),
    ({"buttons": {"start_round": 1, "deal": 2}}, '"buttons.deal": unknown name'),
    ({"buttons": {"start_round": 1, "reveal": 1}}, '"buttons.reveal": bit 1 is already used'),
    ({"buttons": {"reveal": 600}}, '"buttons.reveal": must be in 0..511'),
    ({"buttons": {}}, '"buttons": map at least one button'),
    ({"buttons": ["reveal"]}, '"buttons": expected a mapping'),
    ({"pause_switch_bit": 1}, '"pause_switch_bit": bit 1 is already used by start_round'),
    ({"leds": {"reveal": 8}}, '"leds.reveal": must be in 0..7'),
    ({"debounce_ms": -1}, '"debounce_ms": must be in 0..1000'),
    ({"reconnect_seconds": "soon"}, '"reconnect_seconds": expected a number'),
    ({"detach_kernel_driver": "yes"}, '"detach_kernel_driver": expected true or false'),
    ({"debounce_msec": 20}, '"debounce_msec": unknown option'),
    ({"timestamp_byte": 0}, '"timestamp_byte": bit 0 (new_shoe) is inside the 4-byte timestamp'),
    ({"timestamp_byte": 61}, '"timestamp_byte": must be in 0..60'),
])
def test_bad_options_are_rejected_naming_the_option(bad, option):
    with pytest.raises(DriverConfigError) as err:
        HidPanelConfig.from_options(options(**bad))
    assert option in str(err.value)
    assert str(err.value).startswith("hid_panel")


def test_layout_decodes_bits_across_bytes_and_an_inverted_switch():
    layout = ReportLayout(buttons={"reveal": 9}, pause_bit=0, pause_active_low=True)
    assert layout.decode(bytes([0x00, 0x02])) == {"reveal": True, "switch:pause": True}
    assert layout.decode(bytes([0x01, 0x00, 0xFF])) == {"reveal": False, "switch:pause": False}
    assert ReportLayout({"reveal": 0}, leds={"a": 0, "b": 9}, led_report_length=2,
                        led_report_id=5).encode_leds({"a": True, "b": True}) == b"\x05\x01\x02"


def test_sim_panel_drives_the_real_driver():
    sink = Collector()
    with SimPanel(sink, {"reconnect_seconds": 0.05}) as panel:
        assert panel.connected.wait(5)
        panel.press("start_round")
        panel.set_pause_switch(True)
        sink.wait_count(Switch, 2)
        sink.wait_count(Button, 1)
        panel.set_leds({"start_round": True})
        wait_until(lambda: panel.leds["start_round"])
        panel.unplug()
        sink.wait_count(DeviceStatus, 2)
        panel.set_pause_switch(False)
        panel.replug()
        sink.wait_count(Switch, 3)
        with pytest.raises(ValueError, match="no button 'deal'"):
            panel.press("deal")
    assert summary(sink.snapshot()) == [
        ("device", "panel", True), ("switch", "pause", False), ("button", "start_round"),
        ("switch", "pause", True), ("device", "panel", False), ("device", "panel", True),
        ("switch", "pause", False),
    ]


def test_report_hook_sees_every_raw_report(hardware):
    backend, panel = hardware
    seen: list[bytes] = []
    with HidPanel(Collector(), options(), backend=backend, report_hook=seen.append) as driver:
        assert driver.connected.wait(5)
        panel.queue_inputs([(0.0, 0x81), (0.01, 0x80)])
        wait_until(lambda: len(seen) == 2)
    assert seen == [b"\x81", b"\x80"]


def test_report_times_only_ever_underestimate_how_long_a_level_held():
    """The rule of docs/panel.md "When did the panel see it", on the pure parts."""
    debouncer = Debouncer(0.03)
    debouncer.reset({"reveal": False})
    # no stamp: a press and its release read 1 ms apart after a stall are no press, however
    # long the host then finds nothing new
    clock = ReportClock(latency_s=0.01)
    debouncer.feed(clock.report(None, 10.0), {"reveal": True})
    debouncer.feed(clock.report(None, 10.001), {"reveal": False})
    assert debouncer.poll(clock.quiet_until(12.0)) == []
    # no stamp: a press read live counts once reads found nothing for the debounce + latency
    debouncer.feed(clock.report(None, 20.0), {"reveal": True})
    assert debouncer.poll(clock.quiet_until(20.035)) == []
    assert debouncer.poll(clock.quiet_until(20.045)) == [("reveal", True)]
    # stamped: reports read 1 ms apart are as far apart as the panel stamped them: a 110 ms
    # press across the counter's wrap counts, a 10 ms glitch does not
    debouncer.reset({"reveal": False})
    clock = ReportClock(latency_s=0.01)
    changes = []
    for n, (stamp, level) in enumerate([(2**32 - 50, True), (60, False), (200, True),
                                        (210, False)]):
        at = clock.report(stamp, 30.0 + n / 1000)
        changes += debouncer.poll(at)  # the levels fed so far held until this report
        debouncer.feed(at, {"reveal": level})
    changes += debouncer.poll(clock.quiet_until(31.0))
    assert changes == [("reveal", True), ("reveal", False)]
