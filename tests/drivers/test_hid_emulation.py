"""The emulated HID panel backend, driven through pyusb's own core exactly as the driver uses it."""

from __future__ import annotations

import errno
import threading
import time

import pytest
import usb.core
import usb.util

from drivers.sim.usb_emulation import EmulatedBackend, EmulatedHidPanel, hid_report_descriptor

VID, PID = 0x16C0, 0x05DF


@pytest.fixture
def bus():
    panel = EmulatedHidPanel(vendor_id=VID, product_id=PID, serial="P-1", report_length=2)
    return EmulatedBackend([panel]), panel


def find(backend, **kw):
    return usb.core.find(idVendor=VID, idProduct=PID, backend=backend, **kw)


def claimed(backend):
    dev = find(backend)
    dev.detach_kernel_driver(0)
    usb.util.claim_interface(dev, 0)
    return dev


def test_find_enumerates_the_panel_with_its_descriptors(bus):
    backend, panel = bus
    dev = find(backend)
    assert dev is not None
    assert (dev.idVendor, dev.idProduct, dev.bus) == (VID, PID, 1)
    assert dev.serial_number == "P-1"
    assert dev.product == panel.product and dev.manufacturer == panel.manufacturer
    cfg = dev[0]
    intf = cfg[(0, 0)]
    assert intf.bInterfaceClass == 3  # HID
    eps = {e.bEndpointAddress: e for e in intf}
    assert usb.util.endpoint_type(eps[0x81].bmAttributes) == usb.util.ENDPOINT_TYPE_INTR
    assert usb.util.endpoint_direction(eps[0x81].bEndpointAddress) == usb.util.ENDPOINT_IN
    assert eps[0x81].wMaxPacketSize == 2 and 0x01 in eps
    assert cfg.wTotalLength == 9 + 9 + 9 + 7 * 2
    assert "Human Interface Device" in str(dev)  # pyusb's full descriptor dump runs too
    assert usb.core.find(idVendor=VID, idProduct=PID + 1, backend=backend) is None


def test_kernel_driver_blocks_the_claim_until_detached(bus):
    backend, panel = bus
    dev = find(backend)
    assert dev.is_kernel_driver_active(0)
    with pytest.raises(usb.core.USBError) as busy:
        dev.read(0x81, 2, 10)  # pyusb claims the interface implicitly: usbhid holds it
    assert busy.value.errno == errno.EBUSY
    dev.detach_kernel_driver(0)
    assert not dev.is_kernel_driver_active(0)
    with pytest.raises(usb.core.USBError) as not_found:
        dev.detach_kernel_driver(0)
    assert not_found.value.errno == errno.ENOENT
    usb.util.claim_interface(dev, 0)
    with pytest.raises(usb.core.USBError):
        dev.attach_kernel_driver(0)  # still claimed by us
    usb.util.release_interface(dev, 0)
    dev.attach_kernel_driver(0)
    assert panel.kernel_driver_bound


def test_interrupt_read_times_out_like_libusb(bus):
    backend, _ = bus
    dev = claimed(backend)
    started = time.monotonic()
    with pytest.raises(usb.core.USBTimeoutError) as timeout:
        dev.read(0x81, 2, 30)
    assert time.monotonic() - started >= 0.025
    assert timeout.value.errno == errno.ETIMEDOUT and timeout.value.backend_error_code == -7


def test_reports_carry_input_changes_only(bus):
    backend, panel = bus
    dev = claimed(backend)
    panel.set_input(0x0102)
    panel.set_input(0x0102)  # no change: a HID device sends nothing
    panel.queue_inputs([(0.02, 0)])
    assert list(dev.read(0x81, 2, 500)) == [0x02, 0x01]
    assert list(dev.read(0x81, 2, 500)) == [0, 0]
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 2, 20)


def test_reports_while_the_kernel_owns_the_interface_are_lost_but_get_report_sees_the_level(bus):
    backend, panel = bus
    panel.set_input(0x80)
    dev = claimed(backend)
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 2, 20)
    assert list(dev.ctrl_transfer(0xA1, 0x01, 0x0100, 0, 2)) == [0x80, 0]


def test_led_reports_by_out_endpoint_and_set_report(bus):
    backend, panel = bus
    dev = claimed(backend)
    assert dev.write(0x01, b"\x05", 100) == 1
    assert dev.ctrl_transfer(0x21, 0x09, 0x0200, 0, b"\x06") == 1
    assert panel.out_reports == [b"\x05", b"\x06"] and panel.leds == 6


def test_report_descriptor_over_control_transfer(bus):
    backend, panel = bus
    dev = claimed(backend)
    got = bytes(dev.ctrl_transfer(0x81, 0x06, 0x2200, 0, 256))
    assert got == hid_report_descriptor(2, 1)
    assert got[0] == 0x06 and got[-1] == 0xC0
    with pytest.raises(usb.core.USBError) as stall:
        dev.ctrl_transfer(0xC0, 0x42, 0, 0, 4)  # an unknown vendor request stalls
    assert stall.value.errno == errno.EPIPE


def test_unplug_wakes_a_blocked_read_with_enodev_and_replug_is_a_new_device(bus):
    backend, panel = bus
    dev = claimed(backend)
    old_address = dev.address
    errors: list[BaseException] = []

    def blocked_read() -> None:
        try:
            dev.read(0x81, 2, 0)  # 0 = wait for ever, as in libusb
        except usb.core.USBError as exc:
            errors.append(exc)

    reader = threading.Thread(target=blocked_read)
    reader.start()
    time.sleep(0.05)
    panel.unplug()
    reader.join(5)
    assert not reader.is_alive()
    assert errors and errors[0].errno == errno.ENODEV
    assert find(backend) is None
    panel.replug()
    again = find(backend)
    assert again is not None and again.address != old_address
    assert again.is_kernel_driver_active(0)  # usbhid binds the replugged panel
    with pytest.raises(usb.core.USBError) as stale:
        dev.read(0x81, 2, 10)  # the old handle stays dead
    assert stale.value.errno == errno.ENODEV
    usb.util.dispose_resources(dev)  # disposing a dead device must not raise


def test_inputs_change_while_unplugged(bus):
    backend, panel = bus
    panel.unplug()
    panel.set_input(0x80)
    panel.replug()
    dev = claimed(backend)
    assert list(dev.ctrl_transfer(0xA1, 0x01, 0x0100, 0, 2)) == [0x80, 0]


def test_bits_must_fit_the_report():
    panel = EmulatedHidPanel(report_length=1)
    EmulatedBackend([panel])
    with pytest.raises(ValueError, match="do not fit"):
        panel.set_input(0x100)
