"""What a driver says when its device will not open: the path, the node behind it, the errno
and the way out (drivers/device_access.py), for the cases a table meets."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import serial

from drivers.device_access import open_failure


def serial_error(code: int, path: str) -> serial.SerialException:
    """What pyserial raises for a failed open: the OSError's errno carried over."""
    return serial.SerialException(code, f"could not open port {path}: [Errno {code}] "
                                        f"{os.strerror(code)}: '{path}'")


def test_a_missing_node_says_it_is_unplugged_or_unmatched(tmp_path: Path) -> None:
    path = str(tmp_path / "shoe")
    text = open_failure(path, serial_error(errno.ENOENT, path))
    assert text == f"{path} does not exist (the device is unplugged, or no udev rule matches it)"


def test_a_link_to_nothing_names_its_target(tmp_path: Path) -> None:
    link = tmp_path / "shoe"
    link.symlink_to(tmp_path / "ttyUSB0")
    text = open_failure(str(link), serial_error(errno.ENOENT, str(link)))
    assert text == f"{link} points at {tmp_path / 'ttyUSB0'}, which does not exist " \
                   "(the device is unplugged)"


def test_an_existing_char_node_is_named_with_major_minor_owner_mode_and_errno(
        tmp_path: Path) -> None:
    link = tmp_path / "shoe"
    link.symlink_to("/dev/null")  # a real character device: char 1:3
    for code, name, way_out in ((errno.EPERM, "EPERM", "DeviceAllow="),
                                (errno.EACCES, "EACCES", "GROUP=pokdeng"),
                                (errno.ENXIO, "ENXIO", "kernel driver is not loaded")):
        text = open_failure(str(link), serial_error(code, str(link)))
        assert text.startswith(f"{link} (-> /dev/null, char 1:3, root:")
        assert f"exists but cannot be opened: {name} ({os.strerror(code)})" in text
        assert way_out in text


def test_a_url_that_is_no_path_gives_the_reason_only() -> None:
    exc = serial.SerialException("Could not open port: connection refused")
    assert open_failure("socket://127.0.0.1:9", exc) == \
        "cannot open socket://127.0.0.1:9: Could not open port: connection refused"


def test_a_node_that_opens_but_is_no_serial_port_says_so(tmp_path: Path) -> None:
    node = tmp_path / "shoe"
    node.write_text("")
    exc = serial.SerialException("Could not configure port: (25, 'Inappropriate ioctl')")
    text = open_failure(str(node), exc)
    assert text.startswith(f"{node} (")
    assert text.endswith("exists but cannot be used as a serial port: Could not configure "
                         "port: (25, 'Inappropriate ioctl')")


def test_a_link_udev_removes_between_two_looks_still_gives_a_line(
        tmp_path: Path, monkeypatch) -> None:
    """At unplug udev removes /dev/serial/by-id/… just after its target went: the link can be
    there for the first look and gone for the next. The driver's retry loop needs its line."""
    link = tmp_path / "shoe"
    link.symlink_to(tmp_path / "ttyUSB0")
    real_exists = os.path.exists

    def exists_then_udev_removes_the_link(path):
        answer = real_exists(path)
        link.unlink(missing_ok=True)
        return answer

    monkeypatch.setattr(os.path, "exists", exists_then_udev_removes_the_link)
    text = open_failure(str(link), serial_error(errno.ENOENT, str(link)))
    assert text.startswith(f"{link} changed while it was being looked at (the device is being "
                           "plugged or unplugged)")


def test_a_node_flapping_under_the_description_never_raises(tmp_path: Path) -> None:
    """A connector that makes and breaks contact: the link appears, dangles and vanishes
    thousands of times while failures are described; every call gives its line."""
    link = tmp_path / "shoe"
    stop = threading.Event()

    def flap() -> None:
        spare = tmp_path / "shoe.new"
        while not stop.is_set():
            spare.unlink(missing_ok=True)
            spare.symlink_to(tmp_path / "ttyUSB0")  # dangling: the node went first
            os.replace(spare, link)
            link.unlink(missing_ok=True)
            spare.symlink_to("/dev/null")
            os.replace(spare, link)

    flapper = threading.Thread(target=flap, daemon=True)
    flapper.start()
    lines: set[str] = set()
    try:
        for _ in range(20000):
            lines.add(open_failure(str(link), serial_error(errno.ENOENT, str(link))))
    finally:
        stop.set()
        flapper.join(5)
    assert all(line.startswith(str(link)) for line in lines)


def test_a_loop_of_links_is_named_a_loop(tmp_path: Path) -> None:
    link, other = tmp_path / "shoe", tmp_path / "shoe.b"
    link.symlink_to(other)
    other.symlink_to(link)
    try:
        serial.serial_for_url(str(link))
    except serial.SerialException as exc:
        text = open_failure(str(link), exc)
    assert text == (f"{link} is a loop of symbolic links, which leads to no device (a udev "
                    "rule or a link made by hand points back at itself)")
