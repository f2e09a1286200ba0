"""A simulated card-reading shoe on a real pty, for tests, the demo and the field bench.

``ShoeSimulator`` makes a pseudo-terminal, links its slave end at a path (the path a driver is
configured with), and writes what a real shoe would write, in the chosen protocol. The driver
under test opens the link with pyserial exactly as it would open ``/dev/pokdeng/shoe``.

Like a real shoe, the simulator only talks once the host has the port open (pyserial flushes
the input queue when it opens a port, so earlier bytes would be lost): it watches the pty
master for hang-up and waits. A PDT shoe says HELLO (and replays its recent frames) each time
the host opens the port, and sends a heartbeat every second while idle.

Faults (``faults=``): ``split`` frames in pieces, ``garbage`` line noise between frames,
``badsum`` a damaged copy of a frame before the real one, ``silence`` a pause with nothing
at all on the line, ``unplug`` the port vanishing mid-frame and coming back. The first three
are drawn per frame from a seeded RNG; silence and unplug happen once each when a script is
played. None of them change which cards arrive: a frame cut by the unplug is sent again after
the replug (PDT does that by protocol; for Bee-Tek and RFID the simulator plays a shoe that
keeps unsent reads, which real ones may not).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import pty
import random
import select
import struct
import termios
import threading
import time
import tty
from collections.abc import Iterable, Sequence
from pathlib import Path

from controller.rules.cards import ALL_CARDS, Card, new_shoe_cards, parse_card
from controller.table.inputs import CardScan, CutCard, Input, Misread
from drivers.protocols.beetek import BeeTekEncoder
from drivers.protocols.pdt import PdtEncoder, frame_seq
from drivers.protocols.rfid import (
    RfidEncoder,
    simulated_cut_uid,
    simulated_registry,
    simulated_uid,
    write_registry,
)

log = logging.getLogger("pokdeng.sim_shoe")

PROTOCOLS = ("beetek", "rfid", "pdt")
FAULTS = ("split", "garbage", "badsum", "silence", "unplug")
TIOCPKT_FLUSHREAD = 0x01  # linux/tty.h: the slave emptied its input queue (packet mode)


# -- a shoe's worth of cards ----------------------------------------------------------------

def shuffled_shoe(seed: int, decks: int = 8) -> list[Card]:
    """Every card of an N-deck shoe in a shuffled order fixed by ``seed``."""
    cards = new_shoe_cards(decks)
    random.Random(seed).shuffle(cards)
    return cards


def cut_card_position(seed: int, total: int) -> int:
    """Where the dealer puts the cut card: before card index ``n``, leaving one to one and a
    half decks behind it (fewer for small test shoes)."""
    rng = random.Random(f"cut:{seed}")
    low = max(1, total - 78) if total > 104 else max(1, total * 2 // 3)
    high = max(low, total - 52) if total > 104 else max(low, total - 1)
    return rng.randint(low, high)


def shoe_inputs(seed: int, decks: int = 8, card_interval: float = 1.0) -> list[Input]:
    """A freshly shuffled shoe as the shoe-side inputs of a table script, cut card included."""
    cards = shuffled_shoe(seed, decks)
    cut_at = cut_card_position(seed, len(cards))
    inputs: list[Input] = []
    t = 0.0
    for index, card in enumerate(cards):
        if index == cut_at:
            inputs.append(CutCard(t))
            t += card_interval
        inputs.append(CardScan(t, card))
        t += card_interval
    return inputs


def shoe_side(inputs: Iterable[Input]) -> list[Input]:
    """The inputs of a table script that come from the shoe: cards, cut card, misreads."""
    return [inp for inp in inputs if isinstance(inp, (CardScan, CutCard, Misread))]


# -- the simulator -------------------------------------------------------------------------

class SimulatorError(Exception):
    """The simulator cannot do what was asked (bad protocol, fault, link path in use…)."""


class ShoeSimulator:
    """A shoe on a pty linked at ``link_path``. Thread-safe: ``send_*`` from any thread."""

    def __init__(self, link_path: str | os.PathLike[str], protocol: str = "beetek", *,
                 faults: Iterable[str] = (), seed: int = 0, decks: int = 8,
                 registry_path: str | os.PathLike[str] | None = None,
                 heartbeat_seconds: float = 1.0, settle_seconds: float = 5.0,
                 fault_rate: float = 0.3, silence_seconds: float = 1.5,
                 unplug_seconds: float = 1.0, framing: str = "line"):
        if protocol not in PROTOCOLS:
            raise SimulatorError(f"unknown protocol {protocol!r}; expected one of: "
                                 f"{', '.join(PROTOCOLS)}")
        self.faults = frozenset(faults)
        unknown = self.faults - set(FAULTS)
        if unknown:
            raise SimulatorError(f"unknown fault(s) {', '.join(sorted(unknown))}; expected "
                                 f"some of: {', '.join(FAULTS)}")
        if framing not in ("line", "stx_etx") or (framing != "line" and protocol != "rfid"):
            raise SimulatorError(f"framing {framing!r}: an rfid shoe frames its reads as "
                                 f"line or stx_etx; the other protocols have their own")
        self.link_path = Path(link_path)
        self.protocol = protocol
        self.framing = framing
        self.decks = decks
        self.heartbeat_seconds = heartbeat_seconds
        self.settle_seconds = settle_seconds
        self.fault_rate = fault_rate
        self.silence_seconds = silence_seconds
        self.unplug_seconds = unplug_seconds
        self._rng = random.Random(f"faults:{seed}")
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._master: int | None = None
        self._slave_name: str | None = None
        self._host_open = False
        self._host_flushed = False
        self._pending: list[bytes] = []  # frames written while unplugged
        self._unsent_seq: int | None = None  # pdt: number of the frame being sent, if any
        self._quiet_until = 0.0
        self._last_sent = 0.0
        self._connections = 0  # how many times a reader has opened the port
        self._connected_at = 0.0  # when the latest one did (monotonic)
        self._heartbeat: threading.Thread | None = None
        self._copies_used: dict[Card, int] = {}
        self.registry_path: Path | None = None
        self.encoder: BeeTekEncoder | RfidEncoder | PdtEncoder  # one per protocol
        if protocol == "beetek":
            self.encoder = BeeTekEncoder()
        elif protocol == "rfid":
            self.encoder = RfidEncoder(framing)
            self.registry_path = Path(registry_path or f"{self.link_path}.cards.csv")
            write_registry(simulated_registry(decks, framing), self.registry_path)
        else:
            self.encoder = PdtEncoder(boot=f"{seed:x}{os.getpid():x}")

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> ShoeSimulator:
        with self._lock:
            self._plug_in()
        if self.protocol == "pdt" and self._heartbeat is None:
            self._heartbeat = threading.Thread(target=self._heartbeats, name="sim-shoe-hb",
                                               daemon=True)
            self._heartbeat.start()
        return self

    def close(self, drain_timeout: float = 5.0) -> None:
        """Let the host read what was sent (up to ``drain_timeout``), then remove the port."""
        if self._closed.is_set():
            return
        self._closed.set()  # first, so a sender waiting for a reader gives up
        with self._lock:
            if self._master is not None and self._host_open:
                self.drain(drain_timeout)
            self._pull_out()
        if self._heartbeat is not None:
            self._heartbeat.join(5)

    def __enter__(self) -> ShoeSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what a shoe sends --------------------------------------------------------------------
    # Frames are numbered (pdt) when encoded, so encoding and sending happen under one lock:
    # a heartbeat must not slip in between.
    def send_card(self, card: Card | str) -> None:
        with self._lock:
            self._send(self.card_frame(parse_card(card)))

    def send_cut_card(self) -> None:
        with self._lock:
            self._send(self._encode_cut())

    def send_misread(self) -> None:
        with self._lock:
            self._send(self.encoder.misread())

    def send_garbage(self, length: int = 12) -> None:
        with self._lock:
            self._write(self._noise(length))

    def send_raw(self, data: bytes) -> None:
        """Write bytes exactly as given (hand-made frames, a bench check of a parser)."""
        with self._lock:
            self._write(data)

    def send_input(self, inp: Input) -> None:
        """Send one shoe-side table-script input (card, cut_card or misread)."""
        with self._lock:
            self._send(self.frame_for(inp))

    def card_frame(self, card: Card) -> bytes:
        if isinstance(self.encoder, RfidEncoder):
            return self.encoder.tag(self._uid_for(card))
        return self.encoder.card(card.code)

    def frame_for(self, inp: Input) -> bytes:
        if isinstance(inp, CardScan):
            return self.card_frame(inp.card)
        if isinstance(inp, CutCard):
            return self._encode_cut()
        if isinstance(inp, Misread):
            return self.encoder.misread()
        raise SimulatorError(f"a shoe does not send {inp.kind!r} inputs")

    # -- faults -------------------------------------------------------------------------------
    def unplug(self, partial_frame: bytes | None = None) -> None:
        """Pull the cable: optionally after the first half of ``partial_frame``; the host reads
        what was sent, then the port vanishes."""
        with self._lock:
            if self._master is None:
                return
            if partial_frame:
                self._write(partial_frame[:max(1, len(partial_frame) // 2)])
            self.drain(5.0)
            self._pull_out()
            log.info("simulated shoe unplugged from %s", self.link_path)

    def replug(self) -> None:
        with self._lock:
            if self._master is not None:
                return
            self._plug_in()
            log.info("simulated shoe plugged back in at %s", self.link_path)
            pending, self._pending = self._pending, []
            for frame in pending:
                self._send(frame)

    def silence(self, seconds: float) -> None:
        """Nothing at all on the line (not even heartbeats) for ``seconds``."""
        self._quiet_until = time.monotonic() + seconds
        self._closed.wait(seconds)

    def drain(self, timeout: float = 5.0) -> bool:
        """Wait until the host has read everything written; False on timeout.

        The kernel moves bytes from the master to the slave's input queue a little later (a
        work queue), so an empty queue only counts once it has stayed empty for a while."""
        deadline = time.monotonic() + timeout
        empty_since: float | None = None
        while time.monotonic() < deadline:
            now = time.monotonic()
            if self._unread() == 0:
                empty_since = empty_since if empty_since is not None else now
                if now - empty_since >= 0.1:
                    return True
            else:
                empty_since = None
            time.sleep(0.01)
        return False

    # -- playing a script ---------------------------------------------------------------------
    def wait_for_reader(self) -> bool:
        """Block until a reader has the port open (False if the simulator closes first)."""
        with self._lock:
            return self._wait_for_host()

    def play(self, inputs: Sequence[Input], speed: float = 1.0) -> None:
        """Send the shoe side of a script with its timing (``at`` / ``speed``); the silence and
        unplug faults happen once each, a third and a half of the way through.

        The script's clock starts when a reader opens the port, not at launch, so a reader
        that comes late still gets the cards at their pace; when a reader opens it again (after
        an unplug, or a reader restarted) the clock carries on from the last input sent."""
        shoe = shoe_side(inputs)
        if not shoe:
            return
        silence_at = len(shoe) // 3 if "silence" in self.faults else -1
        unplug_at = len(shoe) // 2 if "unplug" in self.faults else -1
        start, first = 0.0, shoe[0].at
        clock_of: int | None = None  # the connection the script clock was started at
        last_sent_at: float | None = None
        for index, inp in enumerate(shoe):
            if not self.wait_for_reader():
                return
            if self._connections != clock_of:
                clock_of = self._connections
                start = self._connected_at
                first = inp.at if last_sent_at is None else last_sent_at
            due = start + (inp.at - first) / speed
            if self._closed.wait(max(0.0, due - time.monotonic())):
                return
            if index == silence_at:
                log.info("simulated shoe silent for %g s", self.silence_seconds)
                self.silence(self.silence_seconds)
                start += self.silence_seconds
            last_sent_at = inp.at
            if index != unplug_at:
                self.send_input(inp)
                continue
            with self._lock:
                frame = self.frame_for(inp)
                self.unplug(partial_frame=frame)
            self._closed.wait(self.unplug_seconds)
            self.replug()  # the reader opens the new port: the clock starts again from here
            if self.protocol != "pdt":  # pdt: the HELLO replay resends the cut frame
                with self._lock:
                    self._send(frame)

    # -- internals ----------------------------------------------------------------------------
    def _encode_cut(self) -> bytes:
        if isinstance(self.encoder, RfidEncoder):
            return self.encoder.tag(simulated_cut_uid(self.framing))
        return self.encoder.cut_card()

    def _uid_for(self, card: Card) -> str:
        """The tag of the next physical copy of ``card``; a copy beyond the decks reuses one
        (the reader then reports a duplicate, as it would for a card coming back)."""
        copy = self._copies_used.get(card, 0)
        self._copies_used[card] = copy + 1
        return simulated_uid((copy % self.decks) * len(ALL_CARDS) + ALL_CARDS.index(card),
                             self.framing)

    def _send(self, frame: bytes) -> None:
        with self._lock:
            if self._master is None:
                self._pending.append(frame)
                return
            try:
                self._unsent_seq = self._frame_seq(frame)
                self._send_with_faults(frame)
            finally:
                self._unsent_seq = None

    def _frame_seq(self, frame: bytes) -> int | None:
        if self.protocol != "pdt":
            return None
        return frame_seq(frame)

    def _send_with_faults(self, frame: bytes) -> None:
        if "garbage" in self.faults and self._rng.random() < self.fault_rate:
            self._write(self._noise(self._rng.randint(1, 24)))
        if "badsum" in self.faults and self._rng.random() < self.fault_rate:
            self._write(self.encoder.corrupt(frame))
        if "split" in self.faults and len(frame) > 2 and self._rng.random() < self.fault_rate:
            cut = self._rng.randint(1, len(frame) - 1)
            self._write(frame[:cut])
            time.sleep(0.01)  # let the host read the first piece on its own
            self._write(frame[cut:])
        else:
            self._write(frame)

    def _noise(self, length: int) -> bytes:
        """Line noise that contains no frame start of this protocol (so it cannot eat or fake
        a frame); the line protocols end it with a line break, as a noise burst would."""
        noise = bytes(self._rng.choice(b"\x80\x9f\xa5\xc3\xfe~#%&!?") for _ in range(length))
        if self.framing == "stx_etx":
            return noise + b" "  # between framed reads white space ends the noise
        return noise + (b"\r\n" if self.protocol in ("rfid", "pdt") else b" ")

    def _write(self, data: bytes) -> None:
        """Write to the master once the host has the port open (caller holds the lock); while
        unplugged, keep the bytes for the replug."""
        view = memoryview(data)
        while view:
            if self._master is None:
                self._pending.append(bytes(view))
                return
            if not self._wait_for_host():
                return  # closing with nobody reading: nothing more to deliver to
            try:
                view = view[os.write(self._master, view):]
            except (BlockingIOError, InterruptedError):
                time.sleep(0.005)  # the host's input queue is full: let it read
        self._last_sent = time.monotonic()

    def _wait_for_host(self) -> bool:
        """Block until a reader has the slave end open and ready (False if closing first); say
        HELLO when it has just opened. A reader gone again before it was ready (a probe that
        opens and closes) is not one: the bytes would wait in the pty for the next reader's
        flush, and be lost to it."""
        announced = False
        while True:
            while self._master is not None and not self._host_is_open():
                if self._closed.is_set():
                    return False
                if not announced:
                    log.info("simulated shoe waiting for a reader on %s", self.link_path)
                    announced = True
                time.sleep(0.02)
            if self._master is None:
                return False
            if self._host_open:
                return True
            self._wait_for_the_hosts_flush()
            if self._closed.is_set() or self._master is None:
                return False
            if self._host_is_open():
                break
        self._host_open = True
        self._connections += 1
        self._connected_at = time.monotonic()
        if isinstance(self.encoder, PdtEncoder):
            self._raw_write(self.encoder.hello(next_seq=self._unsent_seq))
        return True

    def _wait_for_the_hosts_flush(self) -> None:
        """pyserial empties its input queue just after it opened the port (tcflush): a card
        sent before that is lost. A fixed pause lost the flip card on a busy machine, so the
        pty's packet mode tells when the flush came; a reader that never flushes is sent to
        after ``settle_seconds``."""
        deadline = time.monotonic() + self.settle_seconds
        while not self._host_flushed and time.monotonic() < deadline:
            if self._closed.is_set() or self._master is None or not self._host_is_open():
                return
            time.sleep(0.005)

    def _host_is_open(self) -> bool:
        """Is the slave end open? (The master reports POLLHUP while nobody has it open.)"""
        assert self._master is not None
        poller = select.poll()
        poller.register(self._master, select.POLLIN | select.POLLHUP)
        events = dict(poller.poll(0)).get(self._master, 0)
        if events & select.POLLIN and not events & select.POLLHUP:
            try:
                packet = os.read(self._master, 4096)  # the host wrote to the shoe: ignored
            except OSError:
                packet = b""
            if packet[:1] and packet[0] & TIOCPKT_FLUSHREAD:  # a status packet: it flushed
                self._host_flushed = True
        open_now = not events & select.POLLHUP
        if not open_now:
            self._host_open = self._host_flushed = False
        return open_now

    def _raw_write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and self._master is not None and not self._closed.is_set():
            try:
                view = view[os.write(self._master, view):]
            except (BlockingIOError, InterruptedError):
                time.sleep(0.005)
        self._last_sent = time.monotonic()

    def _unread(self) -> int:
        """Bytes written to the pty that the host has not read yet."""
        if self._slave_name is None:
            return 0
        try:
            fd = os.open(self._slave_name, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError:
            return 0
        try:
            unread: int = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
            return unread
        finally:
            os.close(fd)

    def _plug_in(self) -> None:
        master, slave = pty.openpty()
        tty.setraw(slave)  # no echo, no line editing: bytes pass as they are
        # packet mode: what the host sends comes with a status byte first, and its flush of
        # its input queue comes as a status of its own (_wait_for_the_hosts_flush)
        fcntl.ioctl(master, termios.TIOCPKT, struct.pack("i", 1))
        self._slave_name = os.ttyname(slave)
        os.close(slave)  # so POLLHUP on the master tells whether the host has it open
        os.set_blocking(master, False)
        self._master = master
        self._host_open = self._host_flushed = False
        temp = self.link_path.with_name(self.link_path.name + ".new")
        try:
            temp.unlink(missing_ok=True)
            temp.symlink_to(self._slave_name)
            os.replace(temp, self.link_path)  # atomic: the link is never half made
        except OSError as exc:
            os.close(master)
            self._master = None
            raise SimulatorError(f"cannot link the simulated shoe at {self.link_path}: "
                                 f"{exc.strerror or exc}") from None
        log.info("simulated %s shoe: %s linked at %s", self.protocol, self._slave_name,
                 self.link_path)

    def _pull_out(self) -> None:
        if self._master is None:
            return
        try:
            if os.readlink(self.link_path) == self._slave_name:
                self.link_path.unlink()
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EINVAL):
                raise
        os.close(self._master)
        self._master = None
        self._slave_name = None
        self._host_open = False

    def _heartbeats(self) -> None:
        while not self._closed.wait(self.heartbeat_seconds / 4):
            now = time.monotonic()
            if now < self._quiet_until or now - self._last_sent < self.heartbeat_seconds:
                continue
            with self._lock:
                if self._master is not None and not self._closed.is_set() \
                        and self._host_is_open() and isinstance(self.encoder, PdtEncoder):
                    self._write(self.encoder.heartbeat())
