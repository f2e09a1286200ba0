"""Serial card-reading shoe: bytes from the port -> protocol parser -> table inputs.

Registry names (``drivers/registry.py``): ``beetek``, ``rfid``, ``pdt`` (the protocol fixed),
or ``shoe`` with a ``protocol`` option. Options (unknown ones are rejected)::

    url: /dev/pokdeng/shoe       # anything serial.serial_for_url takes (socket://, spy://, …)
    protocol: beetek             # only for the "shoe" name: beetek | rfid | pdt
    baudrate: 9600               # default per protocol: beetek/rfid 9600, pdt 115200
    reconnect_seconds: 2.0       # retry period while the shoe is away
    read_timeout: 0.2            # longest blocking read; bounds how fast stop() and the
                                 # silence check react
    serial: {parity: N, …}       # extra pyserial settings (bytesize parity stopbits …)
    cut_card_frames: ["<Card:CUT>"]   # beetek: the frame(s) that mean the cut card
    registry: /etc/pokdeng/cards.csv  # rfid: the UID -> card registry (required)
    repeat_window_seconds: 0     # rfid: a tag repeated within this time is one read (0 = off)
    framing: line                # rfid: line | stx_etx (125 kHz modules: STX data [sum] ETX)
    checksum: auto               # rfid stx_etx: auto | xor | none (XOR of the data bytes)
    silence_seconds: 5.0         # pdt: no frame (not even a heartbeat) this long = shoe lost
    unknown_frames: pause        # beetek, pdt: a well-formed frame of unknown meaning is a
                                 # Misread(code="unknown_shoe_frame") that pauses an open shoe
                                 # (it may be a cut card the config does not know) | log

Posts ``CardScan``, ``CutCard``, ``Misread`` and ``DeviceStatus(name="shoe")`` stamped with
``clock()``. Everything the parser throws away is counted (``counts``) and logged, rate
limited per kind, in words that never quote the bytes (they may name a card of a round whose
betting is open); the hex dump goes out at DEBUG only. The daemon calls ``new_shoe()`` when the
table starts a shoe, so the RFID parser forgets which tags it has seen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from controller.rate_limited_log import RateLimitedLog
from controller.table.faults import UNKNOWN_SHOE_FRAME
from controller.table.inputs import Misread
from drivers.base import Clock, Driver, DriverConfigError, InputSink
from drivers.options import OptionReader
from drivers.protocols.base import Problem, ProtocolError, ShoeParser, hex_dump, printable
from drivers.serial_link import SerialLink, check_serial_settings

if TYPE_CHECKING:
    import serial

PROTOCOLS = ("beetek", "rfid", "pdt")
_COMMON_OPTIONS = {"url", "baudrate", "reconnect_seconds", "serial", "read_timeout"}
_PROTOCOL_OPTIONS = {
    "beetek": {"cut_card_frames", "unknown_frames"},
    "rfid": {"registry", "repeat_window_seconds", "framing", "checksum"},
    "pdt": {"silence_seconds", "unknown_frames"},
}
#: the problem codes that are a well-formed frame the parser does not know
UNKNOWN_FRAME_CODES = frozenset({"unknown_frame", "unknown_type"})
UNKNOWN_FRAME_POLICIES = ("pause", "log")
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
PROBLEM_LOG_S = 10.0  # a babbling shoe: one line per problem code per this, counted

ProblemSink = Callable[[Problem], None]


def log_problem(problems: RateLimitedLog, prefix: str, problem: Problem) -> None:
    """A problem the parser threw away, in the driver's log: its words rate-limited per
    problem code, its bytes hex-dumped at DEBUG only (they may name a card of a round whose
    betting is open)."""
    logger = problems.logger
    if problem.raw and logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s: %s [%s]", prefix, problem.code, hex_dump(problem.raw))
    level = _LEVELS.get(problem.level, logging.WARNING)
    if level > logging.DEBUG:
        problems.log(level, problem.code, "%s: %s", prefix, problem.message)


def make_parser(protocol: str, options: OptionReader) -> ShoeParser | None:
    """The parser for ``protocol`` configured from the driver options (None, with the problem
    recorded on ``options``, when they do not configure one)."""
    if protocol == "beetek":
        from drivers.protocols.beetek import DEFAULT_CUT_CARD_FRAMES, BeeTekParser
        frames = options.raw("cut_card_frames", DEFAULT_CUT_CARD_FRAMES)
        with _naming(options, "cut_card_frames"):
            return BeeTekParser(frames)
        return None
    if protocol == "rfid":
        from drivers.protocols.rfid import CHECKSUMS, FRAMINGS, RfidParser, load_registry
        registry_path = options.text("registry", required="required: the UID -> card CSV file")
        window = options.raw("repeat_window_seconds", 0.0)
        framing = options.text("framing", "line", choices=FRAMINGS)
        checksum = options.text("checksum", "auto", choices=CHECKSUMS)
        if framing == "line" and checksum != "auto":
            options.problem("checksum", "only framed readers (framing: stx_etx) send one")
            return None
        if registry_path is None:
            return None
        with _naming(options, "registry"):
            registry = load_registry(registry_path)
            with _naming(options, "repeat_window_seconds"):
                return RfidParser(registry, window, framing, checksum)
        return None
    if protocol == "pdt":
        from drivers.protocols.pdt import PdtParser
        return PdtParser()
    raise DriverConfigError(f"shoe: unknown protocol {protocol!r}; expected one of: "
                            f"{', '.join(PROTOCOLS)}")


@contextmanager
def _naming(options: OptionReader, option: str) -> Iterator[None]:
    """A protocol's complaint about its option, recorded as a problem naming that option."""
    try:
        yield
    except (ProtocolError, ValueError) as exc:
        options.problem(option, str(exc))


class SerialShoe(Driver):
    """A card-reading shoe on a serial port, speaking one of ``PROTOCOLS``."""

    device = "shoe"
    #: set by the per-protocol subclasses; None means the ``protocol`` option chooses
    protocol: str | None = None

    def __init__(self, sink: InputSink, options: Mapping[str, Any] | None = None,
                 clock: Clock = time.time, name: str | None = None,
                 problem_sink: ProblemSink | None = None):
        super().__init__(sink, options, clock, name)
        opts = self.options
        protocol = self.protocol or opts.get("protocol")
        if protocol not in PROTOCOLS:
            expected = f"expected one of {', '.join(PROTOCOLS)}, got {protocol!r}"
            raise DriverConfigError(f"shoe option 'protocol': {expected}", "protocol", expected)
        self.protocol_name: str = protocol
        reader = OptionReader(opts, f"{protocol} shoe")
        reader.allow(*_COMMON_OPTIONS, *_PROTOCOL_OPTIONS[protocol])
        if self.protocol is None:
            reader.allow("protocol")
        url = reader.text("url", required="required: the serial port, e.g. /dev/pokdeng/shoe "
                                          "or socket://host:port")
        parser = make_parser(protocol, reader)
        serial_settings: dict[str, Any] = {}
        with _naming(reader, "serial"):
            serial_settings = check_serial_settings(opts.get("serial"), "shoe option 'serial'")
        baudrate = reader.integer("baudrate", getattr(parser, "default_baudrate", 9600),
                                  minimum=1)
        self.silence_seconds = reader.number("silence_seconds",
                                             5.0 if protocol == "pdt" else 0.0,
                                             minimum=0.5, allow_zero=True)
        self.unknown_frames: str = "log"
        if protocol in ("beetek", "pdt"):
            self.unknown_frames = reader.text("unknown_frames", "pause",
                                              choices=UNKNOWN_FRAME_POLICIES)
        read_timeout = reader.number("read_timeout", 0.2, minimum=0.01)
        reconnect_seconds = reader.number("reconnect_seconds", 2.0, minimum=0.01)
        reader.finish()
        assert parser is not None  # finish() raised otherwise
        self.parser = parser
        self.log = logging.getLogger(f"pokdeng.drivers.{self.name}")
        self._problems = RateLimitedLog(self.log, PROBLEM_LOG_S)
        self._problem_sink = problem_sink
        self._parser_lock = threading.Lock()
        self._link_up = False
        self._silent = False
        self._reported: bool | None = None
        self._last_frame_at = time.monotonic()
        self._frames_seen = 0
        self.link = SerialLink(
            url, device=self.device, on_bytes=self.receive, on_lost=self._on_lost,
            on_open=self._on_open, on_idle=self._on_idle, report_status=self._on_link_status,
            on_problem=lambda: self._set_access_problem(self.link.problem),
            baudrate=baudrate,
            read_timeout=read_timeout, reconnect_seconds=reconnect_seconds,
            serial_settings=serial_settings, log=self.log)

    # -- public -------------------------------------------------------------------------------
    def new_shoe(self) -> None:
        """The table started a new shoe (call from any thread): RFID forgets the tags seen."""
        with self._parser_lock:
            self.parser.new_shoe()

    def restore_shoe_tags(self, tags: Iterable[str]) -> None:
        """The tags the open shoe gave before the daemon restarted (RFID remembers them)."""
        with self._parser_lock:
            self.parser.restore_seen(tags)

    @property
    def counts(self) -> Counter[str]:
        """Inputs and problems so far, by kind/code (a copy)."""
        with self._parser_lock:
            return Counter(self.parser.counts)

    # -- thread -------------------------------------------------------------------------------
    def _run(self, stop: threading.Event) -> None:
        self.link.run(stop)

    def _wake(self) -> None:
        self.link.wake()

    def _on_open(self, port: serial.SerialBase) -> None:
        self._last_frame_at = time.monotonic()

    def receive(self, data: bytes) -> None:
        """Bytes from the port, as the serial link reads them (from the reader thread; the
        sealing tests call it directly to push damaged frames through the whole driver)."""
        at = self.clock()
        with self._parser_lock:
            try:
                outputs = self.parser.feed(data, at)
            except Exception as exc:  # a parser bug must not kill the reader: drop and say so
                # the bytes and the exception's text may name a sealed card: DEBUG only
                self.log.error("%s shoe: parser failed (%s); %d bytes dropped",
                               self.protocol_name, type(exc).__name__, len(data))
                self.log.debug("parser failure on %s", hex_dump(data), exc_info=exc)
                self.parser.connection_lost()
                outputs = [Problem("parser_error", f"parser error ({type(exc).__name__}); "
                                   f"{len(data)} bytes dropped", data, level="debug")]
            frames = getattr(self.parser, "frames_ok", None)
        if frames is not None and frames != self._frames_seen:
            self._frames_seen = frames
            self._last_frame_at = time.monotonic()
            if self._silent:
                self._silent = False
                self.log.info("%s shoe: frames again after a silence", self.protocol_name)
                self._update_status()
        else:
            self._on_idle()  # bytes, but no valid frame: noise does not count as a heartbeat
        for out in outputs:
            if isinstance(out, Problem):
                self._problem(out)
                if out.code in UNKNOWN_FRAME_CODES and self.unknown_frames == "pause":
                    self.post(unknown_frame_misread(out, at))
            else:
                self.post(out)

    def _on_lost(self) -> None:
        with self._parser_lock:
            problems = self.parser.connection_lost()
        for problem in problems:
            self._problem(problem)

    def _on_idle(self) -> None:
        if (self.silence_seconds and not self._silent and self._link_up
                and time.monotonic() - self._last_frame_at > self.silence_seconds):
            self._silent = True
            self.log.warning("%s shoe: no valid frame for %g s (not even a heartbeat); "
                             "reporting the shoe lost", self.protocol_name, self.silence_seconds)
            self._update_status()

    def _on_link_status(self, connected: bool) -> None:
        self._link_up = connected
        if connected:
            self._silent = False
            self._last_frame_at = time.monotonic()
        self._update_status()

    def _update_status(self) -> None:
        """Post a DeviceStatus when the shoe's usable state changes (port open and talking)."""
        from controller.table.inputs import DeviceStatus
        usable = self._link_up and not self._silent
        if usable is not self._reported:
            self._reported = usable
            self.post(DeviceStatus(self.clock(), self.device, usable))

    def _problem(self, problem: Problem) -> None:
        if self._problem_sink is not None:  # e.g. read-shoe prints every one itself
            self._problem_sink(problem)
        else:
            log_problem(self._problems, f"{self.protocol_name} shoe", problem)


def unknown_frame_misread(problem: Problem, at: float) -> Misread:
    """The table's input for a frame the parser does not know: the table pauses an open shoe
    (the frame may be a cut card the config does not know). The frame goes in the evidence,
    which the table keeps sealed until the open round's betting has closed."""
    return Misread(at, UNKNOWN_SHOE_FRAME, "the shoe sent a frame of unknown meaning",
                   {"frame": printable(problem.raw)})


class BeeTekShoe(SerialShoe):
    protocol = "beetek"


class RfidShoe(SerialShoe):
    protocol = "rfid"


class PdtShoe(SerialShoe):
    protocol = "pdt"
