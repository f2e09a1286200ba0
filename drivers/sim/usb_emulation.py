"""A pyusb backend that emulates the dealer's USB HID button panel.

``EmulatedBackend`` is a real ``usb.backend.IBackend``: pass it to ``usb.core.find(backend=…)``
and pyusb's own core (descriptors, resource manager, claiming, transfers) runs unchanged on
top of it, and so does ``drivers.hid_panel``. It behaves like libusb on Linux where the driver
can tell the difference:

- descriptors: device, one configuration, one HID interface (with its HID class descriptor),
  an interrupt-IN endpoint and optionally an interrupt-OUT endpoint for the LEDs; string
  descriptors (manufacturer, product, serial) and the HID report descriptor over control
  transfers; HID GET_REPORT (the current input level) and SET_REPORT (LEDs) on endpoint 0;
- the kernel's ``usbhid`` driver is bound when the panel is plugged in: claiming the interface
  fails with ``LIBUSB_ERROR_BUSY`` until it is detached, and reports the panel sends while the
  kernel owns the interface are consumed by the kernel (so a level must be re-read);
- interrupt reads block up to their timeout and raise ``usb.core.USBTimeoutError`` exactly as
  the libusb1 backend does (``-7``, ``ETIMEDOUT``); timeout 0 waits for ever;
- unplug: the panel disappears from enumeration, every open handle fails with
  ``LIBUSB_ERROR_NO_DEVICE`` (``ENODEV``), a blocked read wakes with that error; replug gives a
  new bus address and a new device identity, so a driver must find the panel again.

The panel side is driven by ``EmulatedHidPanel``: ``set_input(bits)`` changes the input
level now, ``queue_inputs([(delay_s, bits), …])`` schedules a timed sequence (contact bounce,
a press and its release), ``out_reports`` records every LED report received.

The panel's inputs happen on their schedule whether or not the host is reading: a report is
queued for the host (in order, as the host controller polling the endpoint would) stamped with
the moment it was due, and a reader that comes late gets a backlog. With ``timestamped=True``
each input report ends with the panel's free-running millisecond counter (4 bytes,
little-endian) at that moment, as panels that stamp their reports do.
"""

from __future__ import annotations

import array
import errno
import itertools
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import usb.backend
from usb.core import USBError, USBTimeoutError

# libusb error codes the libusb1 backend reports, with the errno it pairs them with
LIBUSB_ERROR_IO = -1
LIBUSB_ERROR_NO_DEVICE = -4
LIBUSB_ERROR_NOT_FOUND = -5
LIBUSB_ERROR_BUSY = -6
LIBUSB_ERROR_TIMEOUT = -7
LIBUSB_ERROR_OVERFLOW = -8
LIBUSB_ERROR_PIPE = -9
_ERRORS = {
    LIBUSB_ERROR_IO: ("Input/output error", errno.EIO),
    LIBUSB_ERROR_NO_DEVICE: ("No such device (it may have been disconnected)", errno.ENODEV),
    LIBUSB_ERROR_NOT_FOUND: ("Entity not found", errno.ENOENT),
    LIBUSB_ERROR_BUSY: ("Resource busy", errno.EBUSY),
    LIBUSB_ERROR_TIMEOUT: ("Operation timed out", errno.ETIMEDOUT),
    LIBUSB_ERROR_OVERFLOW: ("Overflow", errno.EOVERFLOW),
    LIBUSB_ERROR_PIPE: ("Pipe error", errno.EPIPE),
}


def _usb_error(code: int) -> USBError:
    text, err = _ERRORS[code]
    if code == LIBUSB_ERROR_TIMEOUT:
        return USBTimeoutError(text, code, err)
    return USBError(text, code, err)


# USB and HID protocol constants used below
DESC_DEVICE, DESC_CONFIG, DESC_STRING, DESC_INTERFACE, DESC_ENDPOINT = 1, 2, 3, 4, 5
DESC_HID, DESC_HID_REPORT = 0x21, 0x22
REQ_GET_DESCRIPTOR = 0x06
HID_GET_REPORT, HID_SET_IDLE, HID_SET_REPORT = 0x01, 0x0A, 0x09
HID_REPORT_INPUT, HID_REPORT_OUTPUT = 1, 2
ENDPOINT_IN_ADDRESS = 0x81
ENDPOINT_OUT_ADDRESS = 0x01
LANGID_EN_US = 0x0409
_MAX_QUEUED_REPORTS = 4096
TIMESTAMP_BYTES = 4


def hid_report_descriptor(input_bytes: int, output_bytes: int, timestamped: bool = False) -> bytes:
    """A vendor-page HID report descriptor: ``input_bytes`` of 1-bit inputs (buttons and the
    key switch), ``output_bytes`` of 1-bit outputs (LEDs), then the 32-bit ms counter when
    ``timestamped``."""
    items = [
        0x06, 0x00, 0xFF,        # Usage Page (Vendor Defined 0xFF00)
        0x09, 0x01,              # Usage (1)
        0xA1, 0x01,              # Collection (Application)
        0x15, 0x00, 0x25, 0x01,  # Logical Minimum 0, Logical Maximum 1
        0x75, 0x01,              # Report Size 1 bit
        0x95, 8 * input_bytes,   # Report Count
        0x09, 0x02, 0x81, 0x02,  # Usage (2), Input (Data, Variable, Absolute)
    ]
    if output_bytes:
        items += [0x95, 8 * output_bytes, 0x09, 0x03, 0x91, 0x02]  # Output (Data, Var, Abs)
    if timestamped:  # the panel's ms counter: one 32-bit input field
        items += [0x27, 0xFF, 0xFF, 0xFF, 0xFF, 0x75, 32, 0x95, 1,  # Max 2^32-1, 32 bits, x1
                  0x09, 0x04, 0x81, 0x02]                           # Usage (4), Input
    items.append(0xC0)           # End Collection
    return bytes(items)


@dataclass(eq=False)
class EmulatedHidPanel:
    """The panel hardware: its identity, its input bits and what the host sent it."""

    vendor_id: int = 0x16C0
    product_id: int = 0x05DF
    serial: str | None = "PANEL-0001"
    manufacturer: str = "pokdeng-table"
    product: str = "Emulated dealer button panel"
    report_length: int = 1            # bytes in an input report (no report id)
    led_report_length: int = 1        # bytes in an output (LED) report
    has_out_endpoint: bool = True     # LEDs by interrupt OUT, else only SET_REPORT on EP0
    supports_get_report: bool = True  # answers HID GET_REPORT with the current level
    timestamped: bool = False         # each input report ends with the panel's ms counter
    clock_start_ms: int = 0           # the counter's value when the panel was made
    bus: int = 1
    port_number: int = 3

    # -- state, guarded by the backend's lock ----------------------------------------------
    plugged: bool = field(default=True, init=False)
    generation: int = field(default=0, init=False)
    address: int = field(default=0, init=False)
    kernel_driver_bound: bool = field(default=True, init=False)
    level: int = field(default=0, init=False)
    out_reports: list[bytes] = field(default_factory=list, init=False)
    _epoch: float = field(default_factory=time.monotonic, init=False)  # the counter's zero
    _scheduled: deque[tuple[float, int]] = field(default_factory=deque, init=False)  # (due, bits)
    _deliverable: deque[bytes] = field(default_factory=deque, init=False)  # report bytes
    _claimed_by: object | None = field(default=None, init=False)
    _backend: EmulatedBackend | None = field(default=None, init=False)

    # -- the panel side (what the dealer does) ------------------------------------------------
    def set_input(self, bits: int) -> None:
        """Change the input level now (the panel sends a report)."""
        self.queue_inputs([(0.0, bits)])

    def queue_inputs(self, steps: Iterable[tuple[float, int]]) -> None:
        """Schedule input levels: each ``(delay_s, bits)`` follows the previous one by delay_s."""
        steps = [(max(0.0, float(delay)), bits) for delay, bits in steps]
        for _, bits in steps:
            self._check_bits(bits)
        with self._cond:
            due = max([time.monotonic()] + [d for d, _ in self._scheduled])
            for delay, bits in steps:
                due += delay
                self._scheduled.append((due, bits))
            self._cond.notify_all()

    def press_bit(self, bit: int, hold_s: float = 0.1) -> None:
        """Press and release one input bit, holding it ``hold_s`` seconds."""
        with self._cond:  # a re-entrant lock: the read and the scheduling are one step
            base = self._last_scheduled_level()
            self.queue_inputs([(0.0, base | (1 << bit)), (hold_s, base & ~(1 << bit))])

    def set_bit(self, bit: int, on: bool) -> None:
        """Set or clear one input bit after whatever is already scheduled."""
        with self._cond:
            base = self._last_scheduled_level()
            self.queue_inputs([(0.0, base | (1 << bit) if on else base & ~(1 << bit))])

    def idle(self) -> bool:
        """True when every scheduled input has happened."""
        with self._cond:
            self._advance()
            return not self._scheduled

    def unplug(self) -> None:
        with self._cond:
            self.plugged = False
            self._claimed_by = None  # the panel's inputs still change while it is unplugged
            self._deliverable.clear()
            self._cond.notify_all()

    def replug(self) -> None:
        """Plug back in: a new address and identity; the kernel binds usbhid again."""
        with self._cond:
            if self.plugged:
                return
            self.plugged = True
            self._attach()

    @property
    def leds(self) -> int | None:
        """The last LED report received as an integer (bit n = LED bit n), or None."""
        with self._cond:
            if not self.out_reports:
                return None
            return int.from_bytes(self.out_reports[-1], "little")

    # -- helpers for the backend ------------------------------------------------------------
    @property
    def _cond(self) -> threading.Condition:
        if self._backend is None:
            raise RuntimeError("the emulated panel is not on a backend; add it with add_device()")
        return self._backend.cond

    def _check_bits(self, bits: int) -> None:
        if not 0 <= bits < 1 << (8 * self.report_length):
            raise ValueError(f"input bits {bits:#x} do not fit a {self.report_length}-byte report")

    def _attach(self) -> None:
        assert self._backend is not None
        self.generation += 1
        self.address = self._backend.next_address()
        self.kernel_driver_bound = True
        self._claimed_by = None
        self._deliverable.clear()

    def _advance(self) -> None:
        """Let scheduled inputs that are due happen; unread reports go to whoever owns the
        interface (the kernel's usbhid when we have not claimed it: then they are lost to us)."""
        now = time.monotonic()
        while self._scheduled and self._scheduled[0][0] <= now:
            due, bits = self._scheduled.popleft()
            if bits == self.level:
                continue  # a HID device reports changes only
            self.level = bits
            if self._claimed_by is not None and len(self._deliverable) < _MAX_QUEUED_REPORTS:
                self._deliverable.append(self._report(due))  # stamped when it happened

    def _last_scheduled_level(self) -> int:
        self._advance()
        return self._scheduled[-1][1] if self._scheduled else self.level

    def _next_due(self) -> float | None:
        return self._scheduled[0][0] if self._scheduled else None

    def _report(self, at: float | None = None) -> bytes:
        """The input report for the current level, stamped at monotonic time ``at`` (now)."""
        report = self.level.to_bytes(self.report_length, "little")
        if self.timestamped:
            ms = self.clock_start_ms + int(((time.monotonic() if at is None else at)
                                            - self._epoch) * 1000)
            report += (ms % (1 << 32)).to_bytes(TIMESTAMP_BYTES, "little")
        return report

    @property
    def input_report_length(self) -> int:
        return self.report_length + (TIMESTAMP_BYTES if self.timestamped else 0)

    def _strings(self) -> dict[int, str]:
        strings = {1: self.manufacturer, 2: self.product}
        if self.serial is not None:
            strings[3] = self.serial
        return strings


@dataclass(frozen=True, eq=False)
class _DeviceId:
    """What enumerate_devices yields: one plug-in of one panel (like a libusb_device)."""

    panel: EmulatedHidPanel
    generation: int


@dataclass(eq=False)
class _Handle:
    """An open device handle (like a libusb_device_handle)."""

    device: _DeviceId
    claimed: set[int] = field(default_factory=set)
    closed: bool = False


# pyusb is untyped (no stubs exist), so its IBackend is Any to mypy: the one place we subclass it
class EmulatedBackend(usb.backend.IBackend):  # type: ignore[misc]
    """A pyusb backend whose bus holds emulated HID panels."""

    def __init__(self, panels: Sequence[EmulatedHidPanel] = ()):
        self.cond = threading.Condition()
        self._panels: list[EmulatedHidPanel] = []
        self._addresses = itertools.count(2)
        for panel in panels:
            self.add_device(panel)

    def add_device(self, panel: EmulatedHidPanel) -> EmulatedHidPanel:
        with self.cond:
            panel._backend = self
            panel._attach()
            self._panels.append(panel)
        return panel

    def next_address(self) -> int:
        return next(self._addresses)

    # -- enumeration and descriptors (cached by libusb: valid even after an unplug) -------------
    def enumerate_devices(self) -> Iterator[_DeviceId]:
        with self.cond:
            found = [_DeviceId(p, p.generation) for p in self._panels if p.plugged]
        return iter(found)

    def get_parent(self, dev: _DeviceId) -> None:
        return None

    def get_device_descriptor(self, dev: _DeviceId) -> SimpleNamespace:
        p = dev.panel
        return SimpleNamespace(
            bLength=18, bDescriptorType=DESC_DEVICE, bcdUSB=0x0200,
            bDeviceClass=0, bDeviceSubClass=0, bDeviceProtocol=0, bMaxPacketSize0=8,
            idVendor=p.vendor_id, idProduct=p.product_id, bcdDevice=0x0100,
            iManufacturer=1, iProduct=2, iSerialNumber=3 if p.serial is not None else 0,
            bNumConfigurations=1,
            address=p.address, bus=p.bus, port_number=p.port_number,
            port_numbers=(p.port_number,), speed=2,  # full speed, as HID panels are
        )

    def get_configuration_descriptor(self, dev: _DeviceId, config: int) -> SimpleNamespace:
        self._check_index(config, 1, "configuration")
        n_endpoints = self._n_endpoints(dev.panel)
        return SimpleNamespace(
            bLength=9, bDescriptorType=DESC_CONFIG, wTotalLength=9 + 9 + 9 + 7 * n_endpoints,
            bNumInterfaces=1, bConfigurationValue=1, iConfiguration=0,
            bmAttributes=0x80, bMaxPower=50, extra_descriptors=[],
        )

    def get_interface_descriptor(self, dev: _DeviceId, intf: int, alt: int,
                                 config: int) -> SimpleNamespace:
        self._check_index(config, 1, "configuration")
        self._check_index(intf, 1, "interface")
        self._check_index(alt, 1, "alternate setting")
        p = dev.panel
        report_len = len(hid_report_descriptor(p.report_length, p.led_report_length,
                                               p.timestamped))
        hid_descriptor = [9, DESC_HID, 0x11, 0x01, 0x00, 0x01, DESC_HID_REPORT,
                          report_len & 0xFF, report_len >> 8]
        return SimpleNamespace(
            bLength=9, bDescriptorType=DESC_INTERFACE, bInterfaceNumber=0, bAlternateSetting=0,
            bNumEndpoints=self._n_endpoints(p), bInterfaceClass=3, bInterfaceSubClass=0,
            bInterfaceProtocol=0, iInterface=0, extra_descriptors=hid_descriptor,
        )

    def get_endpoint_descriptor(self, dev: _DeviceId, ep: int, intf: int, alt: int,
                                config: int) -> SimpleNamespace:
        p = dev.panel
        self._check_index(ep, self._n_endpoints(p), "endpoint")
        address, size = ((ENDPOINT_IN_ADDRESS, p.input_report_length) if ep == 0
                         else (ENDPOINT_OUT_ADDRESS, p.led_report_length))
        return SimpleNamespace(
            bLength=7, bDescriptorType=DESC_ENDPOINT, bEndpointAddress=address,
            bmAttributes=0x03, wMaxPacketSize=max(size, 1), bInterval=10,
            bRefresh=0, bSynchAddress=0, extra_descriptors=[],
        )

    # -- handles -----------------------------------------------------------------------------
    def open_device(self, dev: _DeviceId) -> _Handle:
        with self.cond:
            self._require_present(dev)
            return _Handle(dev)

    def close_device(self, dev_handle: _Handle) -> None:
        # like libusb_close: never fails, releases what the handle claimed
        with self.cond:
            p = dev_handle.device.panel
            if p._claimed_by is dev_handle:
                p._claimed_by = None
            dev_handle.claimed.clear()
            dev_handle.closed = True
            self.cond.notify_all()

    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:
        with self.cond:
            p = self._live(dev_handle)
            if config_value not in (0, 1):
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
            if p.kernel_driver_bound or (p._claimed_by not in (None, dev_handle)):
                raise _usb_error(LIBUSB_ERROR_BUSY)

    def get_configuration(self, dev_handle: _Handle) -> int:
        with self.cond:
            self._live(dev_handle)
            return 1

    def set_interface_altsetting(self, dev_handle: _Handle, intf: int, altsetting: int) -> None:
        with self.cond:
            self._live(dev_handle)
            if intf != 0 or altsetting != 0:
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:
        with self.cond:
            p = self._live(dev_handle)
            if intf != 0:
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
            if p.kernel_driver_bound or p._claimed_by not in (None, dev_handle):
                raise _usb_error(LIBUSB_ERROR_BUSY)
            p._advance()  # what happened before the claim went to the kernel driver
            p._deliverable.clear()
            p._claimed_by = dev_handle
            dev_handle.claimed.add(intf)

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:
        with self.cond:
            p = self._live(dev_handle)
            if intf not in dev_handle.claimed:
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
            dev_handle.claimed.discard(intf)
            if p._claimed_by is dev_handle:
                p._claimed_by = None
            self.cond.notify_all()

    # -- kernel driver ------------------------------------------------------------------------
    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:
        with self.cond:
            p = self._live(dev_handle)
            self._check_interface(intf)
            return p.kernel_driver_bound

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        with self.cond:
            p = self._live(dev_handle)
            self._check_interface(intf)
            if not p.kernel_driver_bound:
                raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
            p.kernel_driver_bound = False

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        with self.cond:
            p = self._live(dev_handle)
            self._check_interface(intf)
            if p.kernel_driver_bound or p._claimed_by is not None:
                raise _usb_error(LIBUSB_ERROR_BUSY)
            p.kernel_driver_bound = True

    # -- transfers ----------------------------------------------------------------------------
    def intr_read(self, dev_handle: _Handle, ep: int, intf: int, buff: array.array[int],
                  timeout: int) -> int:
        deadline = None if timeout == 0 else time.monotonic() + timeout / 1000.0
        with self.cond:
            while True:
                p = self._claimed(dev_handle, intf)
                if ep != ENDPOINT_IN_ADDRESS:
                    raise _usb_error(LIBUSB_ERROR_PIPE)
                p._advance()
                if p._deliverable:
                    report = p._deliverable.popleft()
                    if len(report) > len(buff):
                        raise _usb_error(LIBUSB_ERROR_OVERFLOW)
                    buff[:len(report)] = array.array("B", report)
                    return len(report)
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    raise _usb_error(LIBUSB_ERROR_TIMEOUT)
                waits = [t - now for t in (deadline, p._next_due()) if t is not None]
                self.cond.wait(max(0.0, min(waits)) if waits else None)

    def intr_write(self, dev_handle: _Handle, ep: int, intf: int, data: array.array[int],
                   timeout: int) -> int:
        with self.cond:
            p = self._claimed(dev_handle, intf)
            if ep != ENDPOINT_OUT_ADDRESS or not p.has_out_endpoint:
                raise _usb_error(LIBUSB_ERROR_PIPE)
            if len(data) > p.led_report_length:
                raise _usb_error(LIBUSB_ERROR_OVERFLOW)
            p.out_reports.append(bytes(data))
            return len(data)

    def ctrl_transfer(self, dev_handle: _Handle, bmRequestType: int, bRequest: int,
                      wValue: int, wIndex: int, data: array.array[int], timeout: int) -> int:
        with self.cond:
            p = self._live(dev_handle)
            request = (bmRequestType, bRequest)
            if request == (0x80, REQ_GET_DESCRIPTOR):
                return self._fill(data, self._standard_descriptor(p, wValue >> 8, wValue & 0xFF))
            if request == (0x81, REQ_GET_DESCRIPTOR) and wValue >> 8 == DESC_HID_REPORT:
                self._check_interface(wIndex)
                return self._fill(data, hid_report_descriptor(p.report_length,
                                                              p.led_report_length,
                                                              p.timestamped))
            if request == (0xA1, HID_GET_REPORT) and wValue >> 8 == HID_REPORT_INPUT:
                self._claimed(dev_handle, wIndex)
                if not p.supports_get_report:
                    raise _usb_error(LIBUSB_ERROR_PIPE)
                p._advance()
                return self._fill(data, p._report())
            if request == (0x21, HID_SET_REPORT) and wValue >> 8 == HID_REPORT_OUTPUT:
                self._claimed(dev_handle, wIndex)
                if len(data) > p.led_report_length:
                    raise _usb_error(LIBUSB_ERROR_PIPE)
                p.out_reports.append(bytes(data))
                return len(data)
            if request == (0x21, HID_SET_IDLE):
                self._claimed(dev_handle, wIndex)
                return 0
            raise _usb_error(LIBUSB_ERROR_PIPE)  # the device stalls what it does not know

    def clear_halt(self, dev_handle: _Handle, ep: int) -> None:
        with self.cond:
            self._live(dev_handle)

    def reset_device(self, dev_handle: _Handle) -> None:
        with self.cond:
            p = self._live(dev_handle)
            p._claimed_by = None
            dev_handle.claimed.clear()

    # -- checks ------------------------------------------------------------------------------
    @staticmethod
    def _check_index(index: int, count: int, what: str) -> None:
        if not 0 <= index < count:
            raise IndexError(f"emulated panel has no {what} {index}")

    @staticmethod
    def _check_interface(intf: int) -> None:
        if intf != 0:
            raise _usb_error(LIBUSB_ERROR_NOT_FOUND)

    @staticmethod
    def _n_endpoints(p: EmulatedHidPanel) -> int:
        return 2 if p.has_out_endpoint else 1

    @staticmethod
    def _require_present(dev: _DeviceId) -> None:
        if not dev.panel.plugged or dev.panel.generation != dev.generation:
            raise _usb_error(LIBUSB_ERROR_NO_DEVICE)

    def _live(self, dev_handle: _Handle) -> EmulatedHidPanel:
        if dev_handle.closed:
            raise _usb_error(LIBUSB_ERROR_IO)
        self._require_present(dev_handle.device)
        return dev_handle.device.panel

    def _claimed(self, dev_handle: _Handle, intf: int) -> EmulatedHidPanel:
        p = self._live(dev_handle)
        if intf not in dev_handle.claimed or p._claimed_by is not dev_handle:
            raise _usb_error(LIBUSB_ERROR_NOT_FOUND)
        return p

    @staticmethod
    def _standard_descriptor(p: EmulatedHidPanel, kind: int, index: int) -> bytes:
        if kind == DESC_STRING:
            if index == 0:
                return bytes([4, DESC_STRING]) + LANGID_EN_US.to_bytes(2, "little")
            text = p._strings().get(index)
            if text is None:
                raise _usb_error(LIBUSB_ERROR_PIPE)
            encoded = text.encode("utf-16-le")[:252]
            return bytes([2 + len(encoded), DESC_STRING]) + encoded
        raise _usb_error(LIBUSB_ERROR_PIPE)

    @staticmethod
    def _fill(data: array.array[int], payload: bytes) -> int:
        n = min(len(data), len(payload))
        data[:n] = array.array("B", payload[:n])
        return n
