"""The serial shoe driver over real ptys (made by the simulator) and a real TCP socket."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from controller.rules.cards import parse_card
from controller.table.inputs import CardScan, DeviceStatus
from drivers import registry
from drivers.base import DriverConfigError
from drivers.protocols.pdt import encode_frame
from drivers.shoe import BeeTekShoe, PdtShoe, RfidShoe, SerialShoe
from drivers.sim.shoe import ShoeSimulator, shuffled_shoe
from support.shoe_helpers import Collector, summary

PROTOCOLS = ("beetek", "rfid", "pdt")


@pytest.fixture(autouse=True)
def no_leaked_threads():
    before = set(threading.enumerate())
    yield
    leaked = [t for t in set(threading.enumerate()) - before
              if t.is_alive() and t.name.startswith(("driver-", "sim-shoe"))]
    for thread in leaked:
        thread.join(2)
    assert not [t for t in leaked if t.is_alive()], f"threads left running: {leaked}"


def make_shoe(protocol, link, sink, sim=None, **extra):
    options = {"url": str(link), "protocol": protocol, "reconnect_seconds": 0.1, **extra}
    if protocol == "rfid":
        options["registry"] = str(sim.registry_path)
    return SerialShoe(sink, options, problem_sink=sink.problem)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_split_garbage_and_damaged_frames_lose_nothing(tmp_path, protocol):
    link = tmp_path / "shoe"
    cards = shuffled_shoe(seed=11, decks=1)[:20]
    sink = Collector()
    with ShoeSimulator(link, protocol, faults=["split", "garbage", "badsum"], seed=4,
                       fault_rate=1.0, decks=1) as sim:
        with make_shoe(protocol, link, sink, sim):
            for card in cards:
                sim.send_card(card)
            sim.send_cut_card()
            sink.wait_for(lambda s: len(s.shoe_inputs) >= 21)
            assert sim.drain()
    assert summary(sink.shoe_inputs) == [("card", c.code) for c in cards] + [("cut_card", None)]
    codes = sink.problem_codes()
    assert codes.count("garbage" if protocol != "rfid" else "bad_line") >= 20
    assert {"pdt": "bad_checksum", "beetek": "damaged_frame", "rfid": "bad_line"}[protocol] \
        in codes
    assert sink.statuses == [True]  # found at start, never lost


@pytest.mark.slow
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unplug_mid_frame_and_replug_loses_and_doubles_nothing(tmp_path, protocol):
    link = tmp_path / "shoe"
    cards = shuffled_shoe(seed=12, decks=1)[:10]
    sink = Collector()
    with ShoeSimulator(link, protocol, seed=5, decks=1) as sim:
        with make_shoe(protocol, link, sink, sim):
            for card in cards[:5]:
                sim.send_card(card)
            sink.wait_for(lambda s: len(s.shoe_inputs) == 5)
            with sim._lock:  # cut the cable half way through the sixth card's frame
                frame = sim.card_frame(cards[5])
                sim.unplug(partial_frame=frame)
            sink.wait_for(lambda s: s.statuses == [True, False])
            assert not link.exists()
            sim.replug()
            if protocol != "pdt":  # pdt: the HELLO replay resends it; others: send it again
                sim.send_raw(frame)
            for card in cards[6:]:
                sim.send_card(card)
            sink.wait_for(lambda s: len(s.shoe_inputs) >= 10)
            sink.wait_for(lambda s: s.statuses == [True, False, True])
            assert sim.drain()
    assert summary(sink.shoe_inputs) == [("card", c.code) for c in cards]
    assert "partial_frame" in sink.problem_codes()


def test_shoe_missing_at_start_is_reported_retried_with_a_log_line_and_found(tmp_path,
                                                                            caplog):
    link = tmp_path / "shoe"
    sink = Collector()
    caplog.set_level(logging.WARNING, logger="pokdeng.drivers")
    with BeeTekShoe(sink, {"url": str(link), "reconnect_seconds": 0.05}):
        sink.wait_for(lambda s: s.statuses == [False])
        sink.wait_for(lambda s: len([r for r in caplog.records
                                     if "retrying in 0.05 s" in r.getMessage()]) >= 3)
        with ShoeSimulator(link, "beetek") as sim:
            sim.send_card("QS")
            sink.wait_for(lambda s: len(s.shoe_inputs) == 1)
        assert sink.statuses[:2] == [False, True]
        sink.wait_for(lambda s: s.statuses == [False, True, False])  # the simulator went away
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert str(link) in retries[0] and "attempt 1" in retries[0]


def test_pdt_sequence_gap_and_bad_checksum_over_a_pty(tmp_path):
    link = tmp_path / "shoe"
    sink = Collector()
    with ShoeSimulator(link, "pdt", heartbeat_seconds=60) as sim:
        with make_shoe("pdt", link, sink):
            sim.send_raw(b"junk\r\n")  # first write: the simulator says HELLO (next frame 0)
            sim.send_raw(encode_frame(0, "CARD", "AS"))
            damaged = encode_frame(1, "CARD", "KS").replace(b"KS", b"KD")  # crc now wrong
            sim.send_raw(damaged)
            sim.send_raw(encode_frame(3, "CARD", "2S"))  # frame 2 never sent at all
            sink.wait_for(lambda s: len(s.shoe_inputs) == 3)
    got = sink.shoe_inputs
    assert got[0] == CardScan(got[0].at, got[0].card) and got[0].card.code == "AS"
    assert got[1].kind == "misread" and got[1].code == "pdt_sequence_gap"
    assert "frames 1 to 2" in got[1].reason
    assert got[2].card.code == "2S"
    assert {"garbage", "bad_checksum"} <= set(sink.problem_codes())


@pytest.mark.slow
def test_pdt_silence_reports_the_shoe_lost_and_back(tmp_path):
    link = tmp_path / "shoe"
    sink = Collector()
    with ShoeSimulator(link, "pdt", heartbeat_seconds=0.2) as sim:
        with make_shoe("pdt", link, sink, silence_seconds=0.8):
            sim.send_card("9H")
            sink.wait_for(lambda s: len(s.shoe_inputs) == 1)
            sim.silence(1.6)  # no frames at all, heartbeats included
            sink.wait_for(lambda s: s.statuses[:2] == [True, False])
            sink.wait_for(lambda s: s.statuses[:3] == [True, False, True])  # heartbeats again
            sim.send_card("8H")
            sink.wait_for(lambda s: len(s.shoe_inputs) == 2)


def test_rfid_new_shoe_forgets_the_tags_seen(tmp_path):
    link = tmp_path / "shoe"
    sink = Collector()
    with ShoeSimulator(link, "rfid", decks=1) as sim:
        with make_shoe("rfid", link, sink, sim) as shoe:
            uid_frame = sim.card_frame(parse_card("5C"))
            sim.send_raw(uid_frame)
            sim.send_raw(uid_frame)  # the same physical card again: it came back
            sink.wait_for(lambda s: len(s.shoe_inputs) == 2)
            shoe.new_shoe()
            sim.send_raw(uid_frame)
            sink.wait_for(lambda s: len(s.shoe_inputs) == 3)
    got = sink.shoe_inputs
    assert got[0].kind == "card" and got[0].card.code == "5C"
    assert got[1].kind == "misread" and got[1].code == "rfid_duplicate_uid"
    assert got[2].kind == "card"


def test_socket_url_works_and_a_dropped_connection_is_reconnected():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    sink = Collector()

    def serve():
        for number, frames in enumerate((b" [Game]<Card:4S> ", b" [Game]<Card:5S> ")):
            conn, _ = server.accept()
            # pyserial empties a socket's input while opening it: send once the driver is up
            sink.wait_for(lambda s, n=number: s.statuses.count(True) == n + 1)
            conn.sendall(frames)
            sink.wait_for(lambda s, f=frames: len(s.shoe_inputs) >= (1 if b"4S" in f else 2))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with BeeTekShoe(sink, {"url": f"socket://127.0.0.1:{port}",
                               "reconnect_seconds": 0.05}):
            sink.wait_for(lambda s: len(s.shoe_inputs) == 2)
            sink.wait_for(lambda s: s.statuses[:3] == [True, False, True])
    finally:
        thread.join(5)
        server.close()
    assert summary(sink.shoe_inputs) == [("card", "4S"), ("card", "5S")]


def test_stop_is_idempotent_and_ends_the_thread(tmp_path):
    shoe = PdtShoe(Collector(), {"url": str(tmp_path / "none"), "reconnect_seconds": 5})
    shoe.start()
    assert shoe.running
    shoe.stop()
    shoe.stop()
    assert not shoe.running


def test_registry_names_create_the_shoe_drivers(tmp_path):
    for name, cls in (("beetek", BeeTekShoe), ("pdt", PdtShoe)):
        shoe = registry.create(name, Collector(), {"url": "loop://"})
        assert type(shoe) is cls and shoe.device == "shoe"
    assert isinstance(registry.create("shoe", Collector(),
                                      {"url": "loop://", "protocol": "pdt"}), PdtShoe.__mro__[1])


@pytest.mark.parametrize("cls, options, fragment", [
    (BeeTekShoe, {}, '"url"'),
    (BeeTekShoe, {"url": "loop://", "registry": "x"}, '"registry": unknown option'),
    (BeeTekShoe, {"url": "loop://", "baudrat": 9600}, '"baudrat": unknown option'),
    (BeeTekShoe, {"url": "loop://", "baudrate": "fast"}, '"baudrate"'),
    (BeeTekShoe, {"url": "loop://", "reconnect_seconds": -1}, '"reconnect_seconds"'),
    (BeeTekShoe, {"url": "loop://", "cut_card_frames": ["CUT"]}, "cut_card_frames"),
    (BeeTekShoe, {"url": "loop://", "serial": {"parity": "N", "speed": 1}}, "'speed'"),
    (RfidShoe, {"url": "loop://"}, '"registry"'),
    (RfidShoe, {"url": "loop://", "registry": "/nonexistent/cards.csv"}, "cards.csv"),
    (SerialShoe, {"url": "loop://", "protocol": "morse"}, "'protocol'"),
    (PdtShoe, {"url": "loop://", "silence_seconds": 0.1}, '"silence_seconds"'),
])
def test_bad_options_are_refused_with_a_message_naming_them(cls, options, fragment):
    with pytest.raises(DriverConfigError) as err:
        cls(Collector(), options)
    assert fragment in str(err.value)


def test_every_bad_option_is_named_at_once():
    with pytest.raises(DriverConfigError) as err:
        BeeTekShoe(Collector(), {"baudrate": "fast", "reconnect_seconds": -1, "baudrat": 1})
    assert [option for option, _ in err.value.problems] == [
        "url", "baudrate", "reconnect_seconds", "baudrat"]


def test_device_status_is_stamped_with_the_driver_clock(tmp_path):
    sink = Collector()
    with BeeTekShoe(sink, {"url": str(tmp_path / "none"), "reconnect_seconds": 5},
                    clock=lambda: 123.0):
        sink.wait_for(lambda s: s.statuses == [False])
    assert sink.inputs[0] == DeviceStatus(123.0, "shoe", False)


def test_problem_log_is_rate_limited_per_kind_and_says_how_many_were_held(caplog):
    from controller.rate_limited_log import RateLimitedLog
    from drivers.protocols.base import Problem
    from drivers.shoe import log_problem

    now = [0.0]
    log = logging.getLogger("pokdeng.test.ratelimit")
    limiter = RateLimitedLog(log, 10.0, monotonic=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="pokdeng.test.ratelimit")
    for _ in range(5):
        log_problem(limiter, "beetek shoe", Problem("garbage", "noise", b"\x80\x81"))
    log_problem(limiter, "beetek shoe", Problem("bad_checksum", "crc", b"$"))
    now[0] = 11.0
    log_problem(limiter, "beetek shoe", Problem("garbage", "noise again", b"\x82"))
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert lines == ["beetek shoe: noise", "beetek shoe: crc",
                     "beetek shoe: noise again (+4 more like this since the last line)"]
    dumps = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(dumps) == 7 and "80 81" in dumps[0]  # every one hex-dumped at DEBUG


def test_pdt_line_noise_without_valid_frames_counts_as_silence(tmp_path):
    link = tmp_path / "shoe"
    sink = Collector()
    stop = threading.Event()
    with ShoeSimulator(link, "pdt", heartbeat_seconds=60) as sim:
        with make_shoe("pdt", link, sink, silence_seconds=0.6):
            sim.send_card("9H")
            sink.wait_for(lambda s: len(s.shoe_inputs) == 1)

            def babble():
                while not stop.wait(0.05):
                    sim.send_garbage(8)

            noise = threading.Thread(target=babble, daemon=True)
            noise.start()
            try:
                sink.wait_for(lambda s: s.statuses == [True, False])
            finally:
                stop.set()
                noise.join(5)
            sim.send_card("8H")  # a valid frame: the shoe is back
            sink.wait_for(lambda s: s.statuses == [True, False, True])
            sink.wait_for(lambda s: len(s.shoe_inputs) == 2)


def test_loop_url_is_opened_through_serial_for_url():
    sink = Collector()
    with BeeTekShoe(sink, {"url": "loop://", "reconnect_seconds": 0.05}) as shoe:
        sink.wait_for(lambda s: s.statuses == [True])
        assert shoe.link.write(b" [Game]<Card:4S> ")  # loop:// hands it straight back
        sink.wait_for(lambda s: len(s.shoe_inputs) == 1)
    assert summary(sink.shoe_inputs) == [("card", "4S")]


def test_an_unexpected_read_error_reopens_the_port_and_the_thread_lives(tmp_path,
                                                                      monkeypatch, caplog):
    """A URL scheme of our own (pyserial protocol handler) whose first port blows up."""
    import serial

    package = tmp_path / "flaky_handlers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "protocol_flaky.py").write_text(
        "from serial.urlhandler.protocol_loop import Serial as Loop\n"
        "OPENED = []\n"
        "class Serial(Loop):\n"
        "    def from_url(self, url):\n"
        "        return super().from_url('loop://')\n"
        "    def open(self):\n"
        "        super().open()\n"
        "        OPENED.append(self)\n"
        "        self.write(b' [Game]<Card:%dS> ' % (len(OPENED) + 1))\n"
        "    def read(self, size=1):\n"
        "        if len(OPENED) == 1 and not self.in_waiting:\n"
        "            raise TypeError('simulated library bug')\n"
        "        return super().read(size)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(serial, "protocol_handler_packages",
                        serial.protocol_handler_packages + ["flaky_handlers"])
    caplog.set_level(logging.ERROR, logger="pokdeng.drivers")
    sink = Collector()
    with BeeTekShoe(sink, {"url": "flaky://", "reconnect_seconds": 0.05}) as shoe:
        sink.wait_for(lambda s: len(s.shoe_inputs) == 2)
        assert shoe.running
    assert summary(sink.shoe_inputs) == [("card", "2S"), ("card", "3S")]
    assert sink.statuses[:3] == [True, False, True]
    assert any("simulated library bug" in (r.exc_text or "") or r.exc_info
               for r in caplog.records)


def read_after_a_late_flush(link, sender: threading.Thread, flush_after_s: float) -> bytes:
    """A reader that opens the port, empties its input queue ``flush_after_s`` later (as
    pyserial's open does), then reads what the shoe's ``sender`` sent."""
    import os
    import select
    import termios
    import time

    fd = os.open(link, os.O_RDWR | os.O_NOCTTY)
    try:
        time.sleep(flush_after_s)
        termios.tcflush(fd, termios.TCIFLUSH)
        sender.join(10)
        received = b""
        while select.select([fd], [], [], 1.0)[0]:
            received += os.read(fd, 1024)
        return received
    finally:
        os.close(fd)


def test_a_reader_slow_to_flush_after_it_opened_still_gets_the_first_card(tmp_path):
    """pyserial empties the port's input queue just after it opened it. On a busy machine
    that can come a second after the open: the simulated shoe must send its first card after
    the flush, not after a fixed pause (the demo's flip card was lost so, and the table waited
    for it for ever)."""
    link = tmp_path / "shoe"
    card = shuffled_shoe(seed=3, decks=1)[0]
    with ShoeSimulator(link, "beetek", decks=1, heartbeat_seconds=3600) as sim:
        sender = threading.Thread(target=sim.send_card, args=(card,))
        sender.start()
        received = read_after_a_late_flush(link, sender, 1.0)  # descheduled between the two
    assert sim.card_frame(parse_card(card)) in received


def test_a_reader_that_opens_and_closes_again_is_not_sent_the_first_card(tmp_path):
    """A probe opens the port and closes it again before any flush: bytes written then would
    wait in the pty and be emptied by the next reader's flush. The card goes to the reader
    that stays."""
    import os
    import time

    link = tmp_path / "shoe"
    card = shuffled_shoe(seed=5, decks=1)[0]
    with ShoeSimulator(link, "beetek", decks=1, heartbeat_seconds=3600,
                       settle_seconds=0.5) as sim:
        sender = threading.Thread(target=sim.send_card, args=(card,))
        sender.start()
        probe = os.open(link, os.O_RDWR | os.O_NOCTTY)
        time.sleep(0.1)  # a probe: gone before the simulator stops waiting for its flush
        os.close(probe)
        time.sleep(0.3)
        received = read_after_a_late_flush(link, sender, 0.2)
    assert sim.card_frame(parse_card(card)) in received
