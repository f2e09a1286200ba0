"""The dealer's USB HID button panel (with the supervisor key switch), over pyusb.

The panel is found by vendor/product id (and serial number, when two panels share an id),
the kernel's usbhid driver is detached from its interface, the interface is claimed and its
interrupt-IN reports are read in the driver thread, which blocks on the endpoint for up to
``read_timeout_ms`` (an idle panel wakes the process twice a second, not twenty times; ``stop()``
takes at most that long, since a synchronous libusb read cannot be interrupted). LED reports
are written by a second thread that sleeps until ``set_leds`` or a reconnect wakes it, so an
LED never waits for the read to time out. Bits of the report are mapped to buttons and the key
switch by the options::

    vendor_id: 0x16c0            # required (placeholder ids: edit for your panel)
    product_id: 0x05df           # required
    serial: PANEL-0001           # optional
    interface: 0                 # the HID interface number
    report_id: null              # set when the panel uses numbered reports
    buttons: {new_shoe: 0, start_round: 1, reveal: 2, cancel_round: 3, end_shoe: 4}
    pause_switch_bit: 7          # the key switch, a level: bit set = PAUSE
    pause_switch_active_low: false
    leds: {start_round: 1, reveal: 2}   # optional: bits of the LED (output) report
    led_report_length: 1
    led_report_id: null
    timestamp_byte: null         # set when each report carries the panel's ms counter (4 bytes)
    debounce_ms: 20
    reconnect_seconds: 2.0
    read_timeout_ms: 500
    detach_kernel_driver: true

Posts ``Button`` on a debounced press edge, ``Switch("pause", on)`` on a debounced level
change and always on (re)connect (read with HID GET_REPORT: the switch is a level, and what
changed while we were away is not in any report), ``DeviceStatus("panel", …)`` on connect and
once on loss; an unplugged panel is retried every ``reconnect_seconds``.

Presses are debounced on the panel's time, not on when this process got round to reading a
report (``ReportClock``; docs/panel.md "When did the panel see it"): a report's time is the
panel's own millisecond stamp when it has one; without a stamp a level only counts once the
host has seen it unchanged for the debounce time while reading.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import usb.core
import usb.util

from controller.rate_limited_log import RateLimitedLog
from controller.table.inputs import BUTTONS, Button, DeviceStatus, Switch
from drivers.base import Clock, DeviceUnavailable, Driver, InputSink
from drivers.debounce import Debouncer, DeviceClock
from drivers.options import OptionReader

log = logging.getLogger("pokdeng.drivers.hid_panel")

#: the debouncer channel of the key switch (buttons use their own names)
PAUSE_CHANNEL = "switch:pause"
MAX_REPORT_BYTES = 64  # a full-speed interrupt endpoint's largest packet
MAX_BIT = 8 * MAX_REPORT_BYTES - 1
HID_GET_REPORT, HID_SET_REPORT = 0x01, 0x09
HID_INPUT_REPORT, HID_OUTPUT_REPORT = 0x01, 0x02
CONTROL_TIMEOUT_MS = 500
TIMESTAMP_BYTES = 4  # the panel's free-running millisecond counter, little-endian
LATENCY_MARGIN_S = 0.002  # beyond a polling interval, for a report on its way to the host


class ReportError(ValueError):
    """A report that does not fit the configured layout (wrong id, too short)."""


@dataclass(frozen=True)
class ReportLayout:
    """Where the buttons, the key switch and the LEDs sit in the panel's reports. Pure."""

    buttons: Mapping[str, int]
    pause_bit: int | None = None
    pause_active_low: bool = False
    report_id: int | None = None
    leds: Mapping[str, int] = field(default_factory=dict)
    led_report_length: int = 1
    led_report_id: int | None = None
    timestamp_byte: int | None = None  # where the panel's ms counter starts (after the id)

    @property
    def input_bits(self) -> list[int]:
        bits = list(self.buttons.values())
        if self.pause_bit is not None:
            bits.append(self.pause_bit)
        return bits

    @property
    def min_report_bytes(self) -> int:
        needed = max(self.input_bits, default=0) // 8 + 1
        if self.timestamp_byte is not None:
            needed = max(needed, self.timestamp_byte + TIMESTAMP_BYTES)
        return needed

    def stamp(self, report: bytes) -> int | None:
        """The panel's millisecond counter in a report (None: this panel has none). Call after
        ``decode``, which checks the report is long enough."""
        if self.timestamp_byte is None:
            return None
        start = self.timestamp_byte + (1 if self.report_id is not None else 0)
        return int.from_bytes(report[start:start + TIMESTAMP_BYTES], "little")

    def decode(self, report: bytes) -> dict[str, bool]:
        """The level of every channel (button names and ``PAUSE_CHANNEL``) in one input report."""
        data = bytes(report)
        if self.report_id is not None:
            if not data or data[0] != self.report_id:
                got = data[0] if data else "none"
                raise ReportError(f"report id {got} is not the panel's report id {self.report_id}")
            data = data[1:]
        if len(data) < self.min_report_bytes:
            raise ReportError(
                f"report of {len(data)} byte(s) is too short: the layout needs "
                f"{self.min_report_bytes}"
            )
        value = int.from_bytes(data, "little")
        levels = {name: bool(value >> bit & 1) for name, bit in self.buttons.items()}
        if self.pause_bit is not None:
            levels[PAUSE_CHANNEL] = bool(value >> self.pause_bit & 1) != self.pause_active_low
        return levels

    def encode_leds(self, states: Mapping[str, bool]) -> bytes:
        """The output report lighting the LEDs whose state is true."""
        value = 0
        for name, on in states.items():
            if on and name in self.leds:
                value |= 1 << self.leds[name]
        body = value.to_bytes(self.led_report_length, "little")
        return body if self.led_report_id is None else bytes([self.led_report_id]) + body


@dataclass(frozen=True)
class HidPanelConfig:
    vendor_id: int
    product_id: int
    serial: str | None
    interface: int
    layout: ReportLayout
    debounce_s: float
    reconnect_seconds: float
    read_timeout_ms: int
    detach_kernel_driver: bool

    @classmethod
    def from_options(cls, options: Mapping[str, Any], driver: str = "hid_panel") -> HidPanelConfig:
        opts = OptionReader(options, driver)
        vendor_id = opts.integer("vendor_id", minimum=0, maximum=0xFFFF)
        product_id = opts.integer("product_id", minimum=0, maximum=0xFFFF)
        serial = opts.text("serial", None)
        interface = opts.integer("interface", 0, 0, 255)
        buttons = opts.bit_map("buttons", MAX_BIT, BUTTONS)
        if not buttons:
            opts.problem("buttons", "map at least one button to a bit")
        pause_bit = opts.integer("pause_switch_bit", None, 0, MAX_BIT)
        for name, bit in buttons.items():
            if bit == pause_bit:
                opts.problem("pause_switch_bit", f"bit {bit} is already used by {name}")
        led_report_length = opts.integer("led_report_length", 1, 1, MAX_REPORT_BYTES)
        leds = opts.bit_map("leds", 8 * led_report_length - 1, None, {})
        pause_active_low = opts.flag("pause_switch_active_low", False)
        report_id = opts.integer("report_id", None, 1, 255)
        led_report_id = opts.integer("led_report_id", None, 1, 255)
        timestamp_byte = opts.integer("timestamp_byte", None, 0,
                                      MAX_REPORT_BYTES - TIMESTAMP_BYTES)
        if timestamp_byte is not None:
            stamp_bits = range(8 * timestamp_byte, 8 * (timestamp_byte + TIMESTAMP_BYTES))
            for name, bit in [*buttons.items(), ("pause_switch_bit", pause_bit)]:
                if bit in stamp_bits:
                    opts.problem("timestamp_byte", f"bit {bit} ({name}) is inside the "
                                 f"{TIMESTAMP_BYTES}-byte timestamp")
        debounce_ms = opts.number("debounce_ms", 20, 0, 1000)
        reconnect_seconds = opts.number("reconnect_seconds", 2.0, 0.01, 3600)
        read_timeout_ms = opts.integer("read_timeout_ms", 500, 5, 5000)
        detach_kernel_driver = opts.flag("detach_kernel_driver", True)
        opts.finish()
        layout = ReportLayout(
            buttons=buttons,
            pause_bit=pause_bit,
            pause_active_low=pause_active_low,
            report_id=report_id,
            leds=leds,
            led_report_length=led_report_length,
            led_report_id=led_report_id,
            timestamp_byte=timestamp_byte,
        )
        config = cls(
            vendor_id=vendor_id,
            product_id=product_id,
            serial=serial,
            interface=interface,
            layout=layout,
            debounce_s=debounce_ms / 1000.0,
            reconnect_seconds=reconnect_seconds,
            read_timeout_ms=read_timeout_ms,
            detach_kernel_driver=detach_kernel_driver,
        )
        return config

    def describe(self) -> str:
        serial = f" serial {self.serial}" if self.serial else ""
        return f"USB panel {self.vendor_id:04x}:{self.product_id:04x}{serial}"


class ReportClock:
    """When the panel saw each report, on a time line of the panel's own (seconds). Pure.

    Reports come in the order the panel sent them, however late they are read. With a stamp
    (the panel's millisecond counter) a report's time is exact. Without one it is the host's
    time just after the read: an upper bound, so a level is only confirmed by ``quiet_until``:
    the host read on and found nothing new. ``quiet_until`` is a lower bound either way: a
    read that began at host time ``s`` and timed out after ``T`` means no report reached the
    host before ``s + T``, so nothing changed before ``s + T - latency`` (``latency``: how long
    a report can take to reach the host, the endpoint's polling interval and a margin)."""

    def __init__(self, latency_s: float):
        self.latency_s = latency_s
        self._device = DeviceClock()
        self._anchor: tuple[float, float] | None = None  # (host time after a read, its time)

    def report(self, stamp_ms: int | None, read_at: float) -> float:
        """The time of a report read just before host time ``read_at``."""
        at = read_at if stamp_ms is None else self._device.seconds(stamp_ms)
        # the panel sent it before it was read: later host times map to at least this much
        # panel time, whatever the two clocks' offset (a late read only makes this cautious)
        self._anchor = (read_at, at)
        return at

    def quiet_until(self, empty_at: float) -> float | None:
        """Panel time the last levels held until, given no report reached the host before
        host time ``empty_at`` (None before the first report)."""
        if self._anchor is None:
            return None
        read_at, at = self._anchor
        return at + (empty_at - self.latency_s - read_at)

    def host_time(self, device_time: float) -> float | None:
        """The host time from which an empty read proves the panel reached ``device_time``."""
        if self._anchor is None:
            return None
        read_at, at = self._anchor
        return read_at + (device_time - at) + self.latency_s


class _HidSession:
    """One connection to the panel: found, detached from usbhid, claimed; closed once."""

    def __init__(self, config: HidPanelConfig, backend: Any):
        self.config = config
        self.backend = backend
        self.device: usb.core.Device | None = None
        self.ep_in: usb.core.Endpoint | None = None
        self.ep_out: usb.core.Endpoint | None = None
        self.detached = False

    def open(self) -> None:
        cfg = self.config
        found = usb.core.find(find_all=True, idVendor=cfg.vendor_id, idProduct=cfg.product_id,
                              backend=self.backend)
        candidates = [d for d in found if cfg.serial is None or self._serial(d) == cfg.serial]
        if not candidates:
            raise DeviceUnavailable("not found")
        dev = self.device = candidates[0]
        number = cfg.interface
        if cfg.detach_kernel_driver:
            try:
                if dev.is_kernel_driver_active(number):
                    dev.detach_kernel_driver(number)
                    self.detached = True
                    log.info("detached the kernel driver from interface %d of the %s",
                             number, cfg.describe())
            except NotImplementedError:  # platforms without kernel drivers to detach
                pass
        try:
            dev.get_active_configuration()
        except usb.core.USBError:
            dev.set_configuration()
        usb.util.claim_interface(dev, number)
        intf = usb.util.find_descriptor(dev.get_active_configuration(), bInterfaceNumber=number)
        if intf is None:
            raise DeviceUnavailable(f"no interface {number}")
        self.ep_in = self._endpoint(intf, usb.util.ENDPOINT_IN)
        self.ep_out = self._endpoint(intf, usb.util.ENDPOINT_OUT)
        if self.ep_in is None:
            raise DeviceUnavailable(f"interface {number} has no interrupt-IN endpoint")

    @staticmethod
    def _serial(dev: usb.core.Device) -> str | None:
        try:
            serial: str | None = dev.serial_number  # pyusb is untyped: a string, or None
            return serial
        except (usb.core.USBError, ValueError) as exc:  # no permission, no strings
            log.debug("cannot read the serial number of %s: %s", dev._str(), exc)
            return None

    @staticmethod
    def _endpoint(intf: usb.core.Interface, direction: int) -> usb.core.Endpoint | None:
        return usb.util.find_descriptor(
            intf,
            custom_match=lambda e: usb.util.endpoint_direction(e.bEndpointAddress) == direction
            and usb.util.endpoint_type(e.bmAttributes) == usb.util.ENDPOINT_TYPE_INTR,
        )

    @property
    def poll_interval_s(self) -> float:
        """The endpoint's polling interval: a report reaches the host within one of them."""
        assert self.device is not None and self.ep_in is not None
        interval = max(1, int(self.ep_in.bInterval))
        if self.device.speed == usb.util.SPEED_HIGH:  # 2**(bInterval-1) microframes of 125 us
            return float(2 ** (min(interval, 16) - 1) * 125e-6)
        return interval / 1000.0

    def read(self, timeout_ms: int) -> bytes | None:
        """One input report, or None when none came within the timeout."""
        assert self.ep_in is not None
        try:
            return bytes(self.ep_in.read(self.ep_in.wMaxPacketSize, timeout_ms))
        except usb.core.USBTimeoutError:
            return None

    def input_report(self) -> bytes | None:
        """The current input level (HID GET_REPORT), or None if the panel does not answer it."""
        assert self.device is not None and self.ep_in is not None
        report_id = self.config.layout.report_id or 0
        try:
            return bytes(self.device.ctrl_transfer(
                0xA1, HID_GET_REPORT, (HID_INPUT_REPORT << 8) | report_id, self.config.interface,
                self.ep_in.wMaxPacketSize, CONTROL_TIMEOUT_MS))
        except usb.core.USBError as exc:
            if exc.errno == errno.EPIPE:  # stalled: GET_REPORT not supported
                return None
            raise

    def write_leds(self, report: bytes) -> None:
        assert self.device is not None
        if self.ep_out is not None:
            self.ep_out.write(report, CONTROL_TIMEOUT_MS)
        else:  # panels without an OUT endpoint take output reports on endpoint 0
            report_id = self.config.layout.led_report_id or 0
            self.device.ctrl_transfer(0x21, HID_SET_REPORT, (HID_OUTPUT_REPORT << 8) | report_id,
                                      self.config.interface, report, CONTROL_TIMEOUT_MS)

    def close(self, give_back: bool) -> None:
        """Release the panel; on a clean stop give it back to the kernel driver. Never raises:
        the panel may already be gone."""
        dev = self.device
        if dev is None:
            return
        try:
            usb.util.release_interface(dev, self.config.interface)
            if give_back and self.detached:
                dev.attach_kernel_driver(self.config.interface)
        except (usb.core.USBError, NotImplementedError) as exc:
            log.debug("releasing the %s: %s", self.config.describe(), exc)
        finally:
            usb.util.dispose_resources(dev)
            self.device = None


class HidPanel(Driver):
    """The USB HID dealer panel driver (see the module docstring for its options)."""

    device = "panel"

    def __init__(self, sink: InputSink, options: Mapping[str, Any] | None = None,
                 clock: Clock = time.time, name: str | None = None, *,
                 backend: Any = None, monotonic: Callable[[], float] = time.monotonic,
                 report_hook: Callable[[bytes], None] | None = None):
        super().__init__(sink, options, clock, name)
        self.config = HidPanelConfig.from_options(self.options, self.name if name else "hid_panel")
        self._backend = backend  # None: pyusb picks libusb; tests pass the emulated backend
        self._monotonic = monotonic
        self._report_hook = report_hook  # read-panel --raw: every report as it arrives
        self._debouncer = Debouncer(self.config.debounce_s)
        self._report_clock = ReportClock(LATENCY_MARGIN_S)  # each session makes its own
        self._problems = RateLimitedLog(log)
        self._led_lock = threading.Lock()
        self._led_changed = threading.Condition(self._led_lock)
        self._led_states = {name: False for name in self.config.layout.leds}
        self._leds_dirty = False
        # the connected session, shared with the LED writer; the lock keeps a write and the
        # close of the session apart
        self._session_lock = threading.Lock()
        self._session: _HidSession | None = None
        self._led_failed_on: _HidSession | None = None  # retry only after the next reconnect
        self.connected = threading.Event()
        self.counters = {"reports": 0, "bad_reports": 0, "presses": 0, "connects": 0}

    # -- called by the daemon (any thread) ---------------------------------------------------
    def set_leds(self, states: Mapping[str, bool]) -> None:
        """Set the LEDs named in ``states`` (others keep their state). The driver sends
        the report within ``read_timeout_ms``, and again after every reconnect. A button name
        with no LED on this panel is ignored; any other unknown name is an error."""
        leds = self.config.layout.leds
        unknown = [n for n in states if n not in leds and n not in BUTTONS]
        if unknown:
            raise ValueError(f"unknown LED(s) {', '.join(map(repr, unknown))}; this panel has: "
                             f"{', '.join(leds) or 'no LEDs'}")
        with self._led_lock:
            for name, on in states.items():
                if name in leds:
                    self._led_states[name] = bool(on)
            self._leds_dirty = bool(leds)
            self._led_changed.notify()

    # -- the driver thread ---------------------------------------------------------------------
    def _run(self, stop: threading.Event) -> None:
        led_writer = threading.Thread(target=self._write_leds_until, args=(stop,),
                                      name=f"driver-{self.name}-leds", daemon=True)
        led_writer.start()
        try:
            self._connect_and_serve(stop)
        finally:
            self._wake()
            led_writer.join()

    def _connect_and_serve(self, stop: threading.Event) -> None:
        reported_down = False
        while not stop.is_set():
            session = _HidSession(self.config, self._backend)
            try:
                session.open()
                levels = self._initial_levels(session)
            except (usb.core.USBError, usb.core.NoBackendError, DeviceUnavailable) as exc:
                session.close(give_back=False)
                self._set_access_problem(f"{self.config.describe()}: {_plain(exc)}")
                if not reported_down:
                    self.post(DeviceStatus(self.clock(), self.device, False))
                    reported_down = True
                log.warning("%s unavailable: %s; retrying in %g s", self.config.describe(),
                            _plain(exc), self.config.reconnect_seconds)
                stop.wait(self.config.reconnect_seconds)
                continue
            self._set_access_problem(None)
            with self._session_lock:
                self._session = session
            self._on_connected(levels)
            self._report_clock = ReportClock(session.poll_interval_s + LATENCY_MARGIN_S)
            reported_down = False
            try:
                self._serve(session, stop)
            except usb.core.USBError as exc:
                log.warning("%s lost: %s", self.config.describe(), _plain(exc))
                self.connected.clear()
                self.post(DeviceStatus(self.clock(), self.device, False))
                reported_down = True
            finally:
                with self._session_lock:  # never close under an LED write
                    self._session = None
                    session.close(give_back=stop.is_set())
        self.connected.clear()

    def _wake(self) -> None:
        with self._led_lock:
            self._led_changed.notify_all()

    def _initial_levels(self, session: _HidSession) -> dict[str, bool] | None:
        report = session.input_report()
        if report is None:
            log.warning("%s does not answer GET_REPORT: the key switch position is unknown "
                        "until the panel sends a report", self.config.describe())
            return None
        try:
            return self.config.layout.decode(report)
        except ReportError as exc:
            log.warning("%s: bad input report on connect (%s): %s", self.config.describe(),
                        exc, report.hex(" "))
            return None

    def _on_connected(self, levels: dict[str, bool] | None) -> None:
        layout = self.config.layout
        if levels is None:  # unknown: buttons count as up, the switch as not yet known
            levels = {name: False for name in layout.buttons}
        # a button held down while connecting is not a press: adopt the levels without edges
        self._debouncer.reset(levels)
        with self._led_lock:
            self._leds_dirty = bool(layout.leds)
            self._led_changed.notify()
        self.counters["connects"] += 1
        log.info("%s connected", self.config.describe())
        self.post(DeviceStatus(self.clock(), self.device, True))
        if PAUSE_CHANNEL in levels:
            self.post(Switch(self.clock(), "pause", levels[PAUSE_CHANNEL]))
        self.connected.set()

    def _serve(self, session: _HidSession, stop: threading.Event) -> None:
        cfg = self.config
        clock = self._report_clock
        while not stop.is_set():
            timeout_ms = cfg.read_timeout_ms
            deadline = self._debouncer.next_deadline()
            due = None if deadline is None else clock.host_time(deadline)
            if due is not None:  # wake up when a pending press is due for confirmation
                due_ms = int((due - self._monotonic()) * 1000) + 1
                timeout_ms = max(1, min(timeout_ms, due_ms))
            started = self._monotonic()
            report = session.read(timeout_ms)
            if report is None:  # nothing new: the levels held at least until then
                quiet = clock.quiet_until(started + timeout_ms / 1000.0)
                if quiet is not None:
                    self._post_changes(quiet)
                continue
            read_at = self._monotonic()
            self.counters["reports"] += 1
            if self._report_hook is not None:
                self._report_hook(report)
            try:
                levels = cfg.layout.decode(report)
            except ReportError as exc:
                self.counters["bad_reports"] += 1
                self._problems.warning("bad_report", "%s: ignored a bad report (%s)",
                                       cfg.describe(), exc)
                log.debug("bad report bytes: %s", report.hex(" "))
                continue
            stamp = cfg.layout.stamp(report)
            at = clock.report(stamp, read_at)
            if stamp is not None:  # the earlier levels held until the panel sent this one
                self._post_changes(at)
            self._debouncer.feed(at, levels)
            if stamp is not None or cfg.debounce_s == 0:
                self._post_changes(at)

    def _post_changes(self, held_until: float) -> None:
        for channel, level in self._debouncer.poll(held_until):
            self._post_change(channel, level)

    def _post_change(self, channel: str, level: bool) -> None:
        if channel == PAUSE_CHANNEL:
            self.post(Switch(self.clock(), "pause", level))
        elif level:
            # releases are debounced too, so a re-press within debounce_ms of the press never
            # shows as a second edge: it is the same press with a bounce in it
            self.counters["presses"] += 1
            self.post(Button(self.clock(), channel))

    # -- the LED thread ------------------------------------------------------------------------
    def _write_leds_until(self, stop: threading.Event) -> None:
        """Send the LED report whenever it changes or the panel reconnects; sleep otherwise."""
        while True:
            with self._led_lock:
                while not stop.is_set() and not self._led_report_due():
                    self._led_changed.wait()
                if stop.is_set():
                    return
                report = self.config.layout.encode_leds(self._led_states)
                self._leds_dirty = False
            self._send_leds(report)

    def _led_report_due(self) -> bool:
        session = self._session
        return self._leds_dirty and session is not None and session is not self._led_failed_on

    def _send_leds(self, report: bytes) -> None:
        with self._session_lock:
            session = self._session
            if session is None:  # gone meanwhile: the reconnect sends the state again
                return
            try:
                session.write_leds(report)
            except usb.core.USBError as exc:
                # a gone panel is noticed (and reconnected) by the reading thread; until
                # then, do not hammer it: retry on the next session
                self._problems.warning("led_write", "%s: LED report not taken: %s",
                                       self.config.describe(), _plain(exc))
                with self._led_lock:
                    self._leds_dirty = True
                    self._led_failed_on = session


def _plain(exc: BaseException) -> str:
    """An error in plain words for a log line."""
    if isinstance(exc, usb.core.NoBackendError):
        return "no USB library (libusb) available"
    if isinstance(exc, usb.core.USBError) and exc.errno == errno.EACCES:
        return f"{exc.strerror}: check the udev rule gives the pokdeng group access"
    return str(exc.strerror if isinstance(exc, usb.core.USBError) and exc.strerror else exc)
