"""Framed RFID readers (125 kHz modules, ID-20LA / RDM630 style): STX data [checksum] [CR LF]
ETX, with the XOR checksum checked and a repeat window for readers that repeat a tag."""

from __future__ import annotations

import logging

import pytest

from controller.rules.cards import parse_card
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.base import DriverConfigError
from drivers.protocols.base import Problem, ProtocolConfigError
from drivers.protocols.rfid import (
    CUT,
    RfidEncoder,
    RfidParser,
    simulated_registry,
    write_registry,
    xor_checksum,
)
from drivers.shoe import SerialShoe

# A real ID-12/ID-20LA frame from its datasheet layout: tag 0415AF57C8, checksum 0x2F ...
ID20LA = b"\x020415AF57C8" + f"{xor_checksum('0415AF57C8'):02X}".encode() + b"\r\n\x03"
REGISTRY = {"0415AF57C8": parse_card("AS"), "1A2B3C4D5E": parse_card("TH"),
            "01020304050A": parse_card("9C"), "5ACC00C007": CUT}


def framed(checksum: str = "auto", window: float = 0.0) -> RfidParser:
    return RfidParser(REGISTRY, window, framing="stx_etx", checksum=checksum)


def kinds(out):
    return [o.code if isinstance(o, (Problem, Misread)) else o.kind for o in out]


def test_xor_checksum_is_the_xor_of_the_data_bytes():
    assert xor_checksum("0415AF57C8") == 0x04 ^ 0x15 ^ 0xAF ^ 0x57 ^ 0xC8
    assert xor_checksum("62E3086CED") == 0x08  # the worked example of the ID-12 datasheet


@pytest.mark.parametrize("frame", [
    ID20LA,                                                         # ID-20LA: CR LF before ETX
    ID20LA.replace(b"\r\n", b""),                                   # RDM630: no line end
    b"\x020415AF57C8\x03",                                          # no checksum at all
    b"\x020415af57c8" + ID20LA[11:],                                # lower-case hex
])
def test_every_framed_form_reads_the_card(frame):
    assert framed().feed(frame, 2.0) == [CardScan(2.0, parse_card("AS"))]


def test_a_twelve_digit_tag_with_its_checksum_and_the_cut_card():
    parser = framed()
    enc = RfidEncoder("stx_etx")
    out = parser.feed(enc.tag("01020304050A") + enc.tag("5ACC00C007"), 1.0)
    assert out == [CardScan(1.0, parse_card("9C")), CutCard(1.0)]


def test_a_bad_checksum_is_a_problem_never_a_card():
    bad = ID20LA[:11] + (b"00" if ID20LA[11:13] != b"00" else b"01") + ID20LA[13:]
    out = framed().feed(bad)
    assert kinds(out) == ["bad_checksum"]
    assert "0415AF57C8" not in out[0].message and out[0].level == "warning"
    corrupt = RfidEncoder("stx_etx").corrupt(ID20LA)
    assert kinds(framed().feed(corrupt)) == ["bad_checksum"]


@pytest.mark.parametrize("checksum, frame, expected", [
    ("xor", b"\x020415AF57C8\x03", ["bad_frame"]),       # xor: every frame must carry one
    ("none", b"\x0201020304050A\x03", ["card"]),         # none: 12 digits are all tag data
    ("none", ID20LA, ["rfid_unknown_uid"]),              # … so 0415AF57C8+sum is another tag
    ("auto", b"\x020415AF57\x03", ["bad_frame"]),        # 8 digits: no framed reader sends it
    ("auto", b"\x020415AF57C8ZZ\x03", ["bad_frame"]),
])
def test_checksum_modes(checksum, frame, expected):
    assert kinds(framed(checksum).feed(frame)) == expected


def test_garbage_between_frames_and_a_frame_cut_by_the_next_stx():
    parser = framed()
    out = parser.feed(b"\xfe\xfe \x020415A" + b"\x021A2B3C4D5E\x03\r\n\x03 ")
    assert kinds(out) == ["garbage", "garbage", "card", "garbage"]
    assert out[2] == CardScan(0.0, parse_card("TH"))


def test_an_over_long_frame_is_dropped_and_the_buffer_stays_capped():
    parser = framed()
    out = parser.feed(b"\x02" + b"A" * 5000 + b"\x03" + ID20LA)
    assert kinds(out) == ["frame_too_long", "card"]
    assert len(parser._lines._buffer) == 0
    out = parser.feed(b"Z" * 5000)
    assert set(kinds(out)) == {"garbage"} and len(parser._lines._garbage) < parser.max_frame


@pytest.mark.parametrize("cut", range(1, len(ID20LA)))
def test_a_frame_split_anywhere_is_joined(cut):
    parser = framed()
    assert kinds(parser.feed(ID20LA[:cut]) + parser.feed(ID20LA[cut:])) == ["card"]


def test_a_frame_cut_by_a_lost_link_is_discarded():
    parser = framed()
    parser.feed(ID20LA[:8])
    assert [p.code for p in parser.connection_lost()] == ["partial_frame"]
    assert kinds(parser.feed(ID20LA[8:])) == ["garbage"]  # the stump is no card


def test_a_reader_repeating_the_tag_is_one_read_until_the_tag_comes_back_after_the_window():
    parser = framed(window=1.5)
    reads = [parser.feed(ID20LA, at) for at in (10.0, 10.5, 11.0, 12.0, 13.4)]
    assert kinds(reads[0]) == ["card"]
    assert all(kinds(r) == ["repeat"] and r[0].level == "debug" for r in reads[1:])
    assert parser.counts["repeat"] == 4
    back = parser.feed(ID20LA, 15.0)  # 1.6 s after the last report: the card came back
    assert kinds(back) == ["rfid_duplicate_uid"]
    assert back[0].evidence == {"tag": "0415AF57C8", "card": "AS"}
    assert "0415AF57C8" not in back[0].reason


def test_another_tag_between_two_reports_is_not_a_repeat():
    parser = framed(window=1.5)
    enc = RfidEncoder("stx_etx")
    out = parser.feed(ID20LA, 1.0) + parser.feed(enc.tag("1A2B3C4D5E"), 1.2) + \
        parser.feed(ID20LA, 1.4)
    assert kinds(out) == ["card", "card", "rfid_duplicate_uid"]


def test_the_line_framing_still_reads_lines_and_now_125khz_uids():
    parser = RfidParser(REGISTRY)
    assert kinds(parser.feed(b"0415AF57C8\r\n")) == ["card"]
    # a framed reader on a line driver: its checksum reads as part of an unknown tag, so the
    # table pauses instead of taking a card (the fix is framing: stx_etx)
    assert kinds(parser.feed(ID20LA)) == ["rfid_unknown_uid"]


@pytest.mark.parametrize("kwargs, fragment", [
    ({"framing": "stx"}, "framing"),
    ({"checksum": "crc"}, "checksum"),
    ({"framing": "line", "checksum": "xor"}, "only framed readers"),
])
def test_bad_framing_options_are_refused(kwargs, fragment):
    with pytest.raises(ProtocolConfigError, match=fragment):
        RfidParser(REGISTRY, **kwargs)


def driver_options(tmp_path, **extra):
    path = tmp_path / "cards.csv"
    write_registry(simulated_registry(1, "stx_etx"), path)
    return {"url": "loop://", "registry": str(path), **extra}


@pytest.mark.parametrize("extra, fragment", [
    ({"framing": "stx"}, '"framing": expected one of line, stx_etx'),
    ({"checksum": "sum"}, '"checksum": expected one of auto, xor, none'),
    ({"checksum": "xor"}, '"checksum": only framed readers'),
])
def test_the_driver_names_a_bad_framing_option(tmp_path, extra, fragment):
    with pytest.raises(DriverConfigError) as err:
        SerialShoe(lambda inp: None, {"protocol": "rfid", **driver_options(tmp_path, **extra)})
    assert fragment in str(err.value)


def test_through_the_driver_repeats_are_logged_at_debug_only(tmp_path, caplog):
    got = []
    times = iter([1.0, 1.6, 2.2, 2.8])
    shoe = SerialShoe(got.append, {"protocol": "rfid", **driver_options(
        tmp_path, framing="stx_etx", repeat_window_seconds=1.5)}, clock=lambda: next(times))
    enc = RfidEncoder("stx_etx")
    caplog.set_level(logging.DEBUG, logger="pokdeng.drivers")
    frame = enc.tag("5A00000000")  # AS, copy 0 in the simulated registry
    for _ in range(4):
        shoe.receive(frame)
    assert got == [CardScan(1.0, parse_card("AS"))]
    assert shoe.counts["repeat"] == 3
    assert all(r.levelno == logging.DEBUG for r in caplog.records)
