"""A dealer panel on a serial line: one button name a line, for simple microcontroller panels.

The line protocol (docs/panel.md has the firmware side), ASCII, case-insensitive, each line
ending in ``\\n`` (``\\r\\n`` accepted), at most ``MAX_LINE`` bytes:

panel -> host::

    start_round              a button press: new_shoe, start_round, reveal, cancel_round, end_shoe
    switch pause on          the key switch is at PAUSE (a level; "off" = RUN)
    start_round @48213       optionally with the panel's millisecond counter when it happened
    # booting v1.2           a comment: ignored, as are blank lines

host -> panel::

    status?                  sent on every connect: answer with the "switch pause …" line
    led start_round on       light (or "off") an LED, where the panel has one

The panel debounces its own contacts; the host still ignores a repeat of the same button
within ``debounce_ms``: of the panel's time when the lines carry its ``@ms`` stamp (lines read
together after the process stalled are still as far apart as the panel sent them), else of the
time the line was read. Options::

    url: /dev/pokdeng/panel      # anything serial.serial_for_url opens: socket://, loop://, spy://
    baudrate: 9600
    debounce_ms: 20
    reconnect_seconds: 2.0
    leds: [start_round, reveal]  # LED names the panel understands (default: none)

The port is opened, read and reopened after a loss by ``drivers.serial_link.SerialLink``, the
loop the shoe uses too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import serial

from controller.rate_limited_log import RateLimitedLog
from controller.table.inputs import BUTTONS, SWITCHES, Button, Switch
from drivers.base import Clock, Driver, InputSink
from drivers.debounce import STAMP_MODULUS, DeviceClock, RepeatGuard
from drivers.options import OptionReader
from drivers.serial_link import SerialLink

log = logging.getLogger("pokdeng.drivers.line_panel")

MAX_LINE = 64
STATUS_QUERY = b"status?\n"
STATUS_ANSWER_SECONDS = 2.0  # warn when the panel has not said where its key switch is by then
# An idle panel wakes the process once a second; a stop or an LED change cuts the read short
# (pyserial's cancel_read), so neither waits for the timeout.
READ_TIMEOUT_S = 1.0
LED_RETRY_S = 1.0  # LEDs a panel did not take are sent again after this, not at every read


class PanelLineError(ValueError):
    """A line that is not part of the panel protocol."""


@dataclass(frozen=True)
class ButtonLine:
    name: str
    stamp_ms: int | None = None  # the panel's millisecond counter, when the line carries it


@dataclass(frozen=True)
class SwitchLine:
    name: str
    on: bool
    stamp_ms: int | None = None


PanelLine = ButtonLine | SwitchLine


def parse_panel_line(raw: bytes) -> PanelLine | None:
    """One line (without its newline) -> a press, a switch level, or None (blank/comment)."""
    try:
        text = raw.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        raise PanelLineError("not ASCII text") from None
    if not text or text.startswith("#"):
        return None
    words = text.split()
    stamp = None
    if len(words) > 1 and words[-1].startswith("@"):
        digits = words.pop()[1:]
        if not digits.isdigit() or int(digits) >= STAMP_MODULUS:
            raise PanelLineError(f"bad time stamp {'@' + digits!r}: expected @ and the "
                                 "panel's millisecond counter (0 to 4294967295)")
        stamp = int(digits)
    if len(words) == 1 and words[0] in BUTTONS:
        return ButtonLine(words[0], stamp)
    if len(words) == 3 and words[0] == "switch":
        if words[1] not in SWITCHES:
            raise PanelLineError(
                f"unknown switch {words[1]!r}; expected one of: {', '.join(SWITCHES)}")
        if words[2] not in ("on", "off"):
            raise PanelLineError(f"switch position must be on or off, got {words[2]!r}")
        return SwitchLine(words[1], words[2] == "on", stamp)
    raise PanelLineError(f"unknown line {text[:MAX_LINE]!r}; expected a button name "
                         f"({', '.join(BUTTONS)}) or 'switch pause on|off'")


class LineSplitter:
    """Bytes in, complete lines out; a line longer than ``limit`` is dropped whole (counted)."""

    def __init__(self, limit: int = MAX_LINE, on_too_long: Callable[[], None] | None = None):
        self.limit = limit
        self._on_too_long = on_too_long
        self._buffer = bytearray()
        self._discarding = False
        self.too_long = 0

    def reset(self) -> None:
        self._buffer.clear()
        self._discarding = False

    def feed(self, data: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if not self._discarding:
                self._buffer += piece
                if len(self._buffer) > self.limit:
                    self.too_long += 1
                    if self._on_too_long is not None:
                        self._on_too_long()
                    self._buffer.clear()
                    self._discarding = True
            if end < 0:
                return lines
            if not self._discarding:
                lines.append(bytes(self._buffer).rstrip(b"\r"))
            self._buffer.clear()
            self._discarding = False
            start = end + 1


@dataclass(frozen=True)
class LinePanelConfig:
    url: str
    baudrate: int
    debounce_s: float
    reconnect_seconds: float
    leds: tuple[str, ...]

    @classmethod
    def from_options(
        cls, options: Mapping[str, Any], driver: str = "line_panel"
    ) -> LinePanelConfig:
        opts = OptionReader(options, driver)
        leds = opts.raw("leds", [])
        if not isinstance(leds, (list, tuple)) or not all(
                isinstance(n, str) and n.isidentifier() for n in leds):
            opts.problem("leds", f"expected a list of LED names, got {leds!r}")
            leds = []
        url = opts.text("url")
        baudrate = opts.integer("baudrate", 9600, 50, 4_000_000)
        debounce_ms = opts.number("debounce_ms", 20, 0, 1000)
        reconnect_seconds = opts.number("reconnect_seconds", 2.0, 0.01, 3600)
        opts.finish()
        config = cls(url=url, baudrate=baudrate, debounce_s=debounce_ms / 1000.0,
                     reconnect_seconds=reconnect_seconds, leds=tuple(leds))
        return config


class LinePanel(Driver):
    """The serial line panel driver (protocol and options in the module docstring)."""

    device = "panel"

    def __init__(self, sink: InputSink, options: Mapping[str, Any] | None = None,
                 clock: Clock = time.time, name: str | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic):
        super().__init__(sink, options, clock, name)
        self.config = LinePanelConfig.from_options(self.options)
        self._monotonic = monotonic
        self._repeats = RepeatGuard(self.config.debounce_s)  # lines without a stamp
        self._stamped_repeats = RepeatGuard(self.config.debounce_s)  # on the panel's time
        self._device_clock = DeviceClock()
        self._problems = RateLimitedLog(log)
        self._splitter = LineSplitter(MAX_LINE, self._line_too_long)
        self._switch_levels: dict[str, bool] = {}
        self._status_deadline: float | None = None
        self._led_lock = threading.Lock()
        self._led_states: dict[str, bool] = {}
        self._led_retry_at = 0.0
        self._led_pending: dict[str, bool] = {}
        # the shared serial open/read/reconnect loop: it posts connected true/false (false once)
        self._link = SerialLink(
            self.config.url, device=self.device, sink=self.post, clock=self.clock,
            on_bytes=self._on_bytes, on_open=self._on_open, on_lost=self._on_lost,
            on_idle=self._on_idle, baudrate=self.config.baudrate,
            on_problem=lambda: self._set_access_problem(self._link.problem),
            read_timeout=READ_TIMEOUT_S, reconnect_seconds=self.config.reconnect_seconds, log=log)
        self.connected = threading.Event()
        self.counters = {"lines": 0, "bad_lines": 0, "too_long": 0, "presses": 0,
                         "ignored_repeats": 0}

    def set_leds(self, states: Mapping[str, bool]) -> None:
        """As ``HidPanel.set_leds``: named LEDs change, others keep their state; a button
        name with no LED on this panel is ignored; sent again after every reconnect. The
        driver thread writes them, so the caller never blocks on the serial port."""
        unknown = [n for n in states if n not in self.config.leds and n not in BUTTONS]
        if unknown:
            raise ValueError(f"unknown LED(s) {', '.join(map(repr, unknown))}; this panel has: "
                             f"{', '.join(self.config.leds) or 'no LEDs'}")
        with self._led_lock:
            for name, on in states.items():
                if name in self.config.leds:
                    self._led_states[name] = bool(on)
                    self._led_pending[name] = bool(on)
        self._link.wake()  # the driver thread writes them as soon as its read returns

    # -- the driver thread (callbacks of the serial link) -------------------------------------
    def _run(self, stop: threading.Event) -> None:
        self._link.run(stop)
        self.connected.clear()

    def _wake(self) -> None:
        self._link.wake()

    def _on_open(self, port: serial.SerialBase) -> None:
        self._splitter.reset()
        # the panel may have restarted (its counter with it): time starts again
        self._device_clock = DeviceClock()
        self._stamped_repeats = RepeatGuard(self.config.debounce_s)
        self._switch_levels = {}  # unknown until the panel answers the query
        self._link.write(STATUS_QUERY)  # the switch is a level: ask for it on every connect
        self._status_deadline = self._monotonic() + STATUS_ANSWER_SECONDS
        with self._led_lock:
            self._led_pending = dict(self._led_states)
        self._led_retry_at = 0.0
        self.connected.set()

    def _on_lost(self) -> None:
        self.connected.clear()

    def _on_bytes(self, data: bytes) -> None:
        for line in self._splitter.feed(data):
            self._handle_line(line)
        self._on_idle()

    def _on_idle(self) -> None:
        self._flush_leds()
        deadline = self._status_deadline
        if deadline is not None and not self._switch_levels and self._monotonic() > deadline:
            self._status_deadline = None  # once per connection
            log.warning("serial panel %s has not reported its key switch position (no answer "
                        "to status? within %g s): check the panel firmware", self.config.url,
                        STATUS_ANSWER_SECONDS)

    def _line_too_long(self) -> None:
        self.counters["too_long"] += 1
        self._problems.warning("too_long", "serial panel %s: dropped a line longer than %d bytes",
                               self.config.url, MAX_LINE)

    def _handle_line(self, line: bytes) -> None:
        self.counters["lines"] += 1
        try:
            message = parse_panel_line(line)
        except PanelLineError as exc:
            self.counters["bad_lines"] += 1
            self._problems.warning("bad_line", "serial panel %s: ignored a line: %s",
                                   self.config.url, exc)
            log.debug("bad line bytes: %s", line.hex(" "))
            return
        at = None
        if message is not None and message.stamp_ms is not None:
            # every stamp moves the panel's time on, so a wrap of its counter is seen
            at = self._device_clock.seconds(message.stamp_ms)
        if isinstance(message, ButtonLine):
            if at is not None:
                accepted = self._stamped_repeats.accept(message.name, at)
            else:
                accepted = self._repeats.accept(message.name, self._monotonic())
            if accepted:
                self.counters["presses"] += 1
                self.post(Button(self.clock(), message.name))
            else:
                self.counters["ignored_repeats"] += 1
                log.info("ignored a repeated %s press within %g ms", message.name,
                         self.config.debounce_s * 1000)
        elif isinstance(message, SwitchLine):
            # the first report after a connect is always posted; later ones only on a change
            if self._switch_levels.get(message.name) != message.on:
                self._switch_levels[message.name] = message.on
                self.post(Switch(self.clock(), message.name, message.on))

    def _flush_leds(self) -> None:
        if self._monotonic() < self._led_retry_at:
            return
        with self._led_lock:
            pending, self._led_pending = self._led_pending, {}
        if not pending:
            return
        if not self._link.write(b"".join(f"led {n} {'on' if on else 'off'}\n".encode()
                                         for n, on in sorted(pending.items()))):
            # the panel takes nothing (the link said why): the LEDs wait, and the buttons are
            # read meanwhile; a newer state of an LED wins over the one kept
            with self._led_lock:
                self._led_pending = {**pending, **self._led_pending}
            self._led_retry_at = self._monotonic() + LED_RETRY_S
