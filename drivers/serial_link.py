"""A serial port that stays open: open by URL, read in a loop, reopen after a loss.

Used by every serial device driver (the shoe, the serial line panel). The port is opened with
``serial.serial_for_url`` so configuration alone chooses ``/dev/…``, ``socket://host:port``,
``loop://`` or ``spy://…``. Bytes go to ``on_bytes`` in the reading thread. When the port cannot
be opened or goes away, the link reports ``connected: false`` once, logs one plain line per
retry every ``reconnect_seconds``, and reports ``connected: true`` when it is back. The first
report says how the device was found at start (either way), so the daemon never has to assume.
While the port cannot be opened, ``problem`` says why (drivers/device_access.py: the path, the
node and the errno, e.g. a node the service's sandbox refuses) and ``on_problem`` hears of each
change, so the status can show it; it is None once the port is open.
"""

from __future__ import annotations

import logging
import termios
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import serial

from controller.table.inputs import DeviceStatus
from drivers.base import Clock, InputSink
from drivers.device_access import open_failure

#: extra keyword arguments of ``serial_for_url`` a config may set, with their types
SERIAL_SETTINGS: dict[str, type | tuple[type, ...]] = {
    "bytesize": int, "parity": str, "stopbits": (int, float), "xonxoff": bool,
    "rtscts": bool, "dsrdtr": bool, "exclusive": bool,
}

class _ReadablePort(Protocol):
    """What the read loop uses of an open port: every class ``serial_for_url`` gives has it,
    though pyserial's ``SerialBase`` does not declare it."""

    @property
    def in_waiting(self) -> int: ...

    def read(self, size: int = 1) -> bytes: ...


#: the longest a write may wait for the device to take it: a panel that stops reading (its
#: firmware hung, flow control held) must not stop the thread that reads its buttons
WRITE_TIMEOUT_S = 0.2

# termios.error is no OSError: pyserial lets it out of open() and flush() when the device
# vanishes half-way (EIO from tcflush on a port unplugged while it was being opened)
_OPEN_ERRORS = (serial.SerialException, OSError, ValueError, termios.error)
_READ_ERRORS = (serial.SerialException, OSError, termios.error)


class SerialLink:
    """Keeps one serial URL open for a driver thread; ``run(stop)`` is the thread body."""

    def __init__(self, url: str, *, device: str, sink: InputSink | None = None,
                 clock: Clock | None = None,
                 on_bytes: Callable[[bytes], None],
                 on_lost: Callable[[], None] = lambda: None,
                 on_open: Callable[[serial.SerialBase], None] = lambda port: None,
                 on_idle: Callable[[], None] = lambda: None,
                 on_problem: Callable[[], None] = lambda: None,
                 report_status: Callable[[bool], None] | None = None,
                 baudrate: int = 9600, read_timeout: float = 0.2,
                 reconnect_seconds: float = 2.0,
                 serial_settings: Mapping[str, Any] | None = None,
                 log: logging.Logger | None = None):
        if report_status is None and (sink is None or clock is None):
            raise ValueError("SerialLink needs report_status, or sink and clock to post to")
        self.url = url
        self.device = device
        self.baudrate = baudrate
        self.read_timeout = read_timeout
        self.reconnect_seconds = reconnect_seconds
        self.serial_settings = dict(serial_settings or {})
        self.log = log or logging.getLogger(f"pokdeng.drivers.{device}")
        self._sink = sink
        self._clock = clock
        self._on_bytes = on_bytes
        self._on_lost = on_lost
        self._on_open = on_open
        self._on_idle = on_idle
        self._on_problem = on_problem
        self._report_status = report_status or self._post_status
        self._port: serial.SerialBase | None = None
        self._write_lock = threading.Lock()
        #: True/False once known; None before the first open attempt
        self.connected: bool | None = None
        #: why the port cannot be opened (open_failure's line); None while it is open
        self.problem: str | None = None

    # -- thread body --------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        attempt = 0
        while not stop.is_set():
            try:
                port = serial.serial_for_url(self.url, baudrate=self.baudrate,
                                             timeout=self.read_timeout,
                                             write_timeout=WRITE_TIMEOUT_S,
                                             **self.serial_settings)
            except _OPEN_ERRORS as exc:
                attempt += 1
                self._set_problem(open_failure(self.url, exc))
                self._set_connected(False)
                self.log.warning("%s: cannot open %s (%s); retrying in %g s (attempt %d)",
                                 self.device, self.url, self.problem, self.reconnect_seconds,
                                 attempt)
                stop.wait(self.reconnect_seconds)
                continue
            attempt = 0
            self._set_problem(None)
            self._port = port
            self.log.info("%s: connected on %s", self.device, self.url)
            self._set_connected(True)
            try:
                self._on_open(port)
                self._read_until_lost(port, stop)
            finally:
                with self._write_lock:
                    self._port = None
                try:
                    port.close()
                except _READ_ERRORS:
                    pass
                self._on_lost()
            if not stop.is_set():
                self._set_connected(False)

    def _read_until_lost(self, port: _ReadablePort, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                waiting = port.in_waiting
                data = port.read(waiting if waiting > 0 else 1)
            except _READ_ERRORS as exc:
                if not stop.is_set():
                    self.log.warning("%s: lost %s (%s)", self.device, self.url, _reason(exc))
                return
            except Exception:  # e.g. a pyserial bug while the port vanishes: reopen, loudly
                self.log.exception("%s: unexpected error reading %s; reopening it",
                                   self.device, self.url)
                return
            if data:
                self._on_bytes(data)
            else:
                self._on_idle()

    # -- for the driver -----------------------------------------------------------------------
    def write(self, data: bytes) -> bool:
        """Send bytes if the port is open; return False (and drop them) when it is not."""
        with self._write_lock:
            port = self._port
            if port is None:
                return False
            try:
                port.write(data)
                return True
            except _READ_ERRORS as exc:
                self.log.warning("%s: write to %s failed (%s)", self.device, self.url,
                                 _reason(exc))
                return False

    def wake(self) -> None:
        """Cut a blocking read short so the thread notices a stop (or new work) at once; a wake
        with no read in progress makes the next read return at once."""
        port = self._port
        cancel = getattr(port, "cancel_read", None)
        if cancel is not None:
            try:
                cancel()
            except Exception:  # the port may be closing under us; the read timeout still ends it
                pass

    def _set_problem(self, problem: str | None) -> None:
        if problem != self.problem:
            self.problem = problem
            self._on_problem()

    def _set_connected(self, connected: bool) -> None:
        if self.connected is connected:
            return
        self.connected = connected
        self._report_status(connected)

    def _post_status(self, connected: bool) -> None:
        assert self._sink is not None and self._clock is not None
        self._sink(DeviceStatus(self._clock(), self.device, connected))


def _reason(exc: BaseException) -> str:
    cause = exc.__context__
    if isinstance(cause, OSError) and cause.strerror:  # pyserial wraps the OS error
        return cause.strerror
    if isinstance(exc, OSError) and exc.strerror and not isinstance(exc, serial.SerialException):
        return exc.strerror
    if isinstance(exc, termios.error) and len(exc.args) == 2:
        return str(exc.args[1])
    return str(exc) or type(exc).__name__


def check_serial_settings(settings: Any, where: str) -> dict[str, Any]:
    """Validate the ``serial:`` option block; raise ValueError naming the bad key."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise ValueError(f"{where}: expected a mapping of serial settings, got {settings!r}")
    checked: dict[str, Any] = {}
    for key, value in settings.items():
        if key not in SERIAL_SETTINGS:
            raise ValueError(f"{where}: unknown serial setting {key!r}; known: "
                             f"{', '.join(SERIAL_SETTINGS)}")
        expected = SERIAL_SETTINGS[key]
        if isinstance(value, bool) and expected is not bool or not isinstance(value, expected):
            raise ValueError(f"{where}.{key}: bad value {value!r}")
        checked[key] = value
    return checked
