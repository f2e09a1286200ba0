"""The PDT parser on its own: checksum, sequence gaps and wrap, replays, HELLO, restarts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.rules.cards import parse_card
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.protocols.base import Problem
from drivers.protocols.pdt import PdtEncoder, PdtParser, crc16_ccitt_false, encode_frame, frame_seq


def kinds(outputs):
    return [o.code if isinstance(o, (Problem, Misread)) else o.kind for o in outputs]


def test_crc_check_value_and_the_documented_worked_example():
    assert crc16_ccitt_false(b"123456789") == 0x29B1
    # docs/pdt-protocol.md works this frame through by hand
    assert encode_frame(7, "CARD", "QH") == b"$PDT,7,CARD,QH*" + \
        f"{crc16_ccitt_false(b'PDT,7,CARD,QH'):04X}".encode() + b"\r\n"
    assert crc16_ccitt_false(b"PDT,7,CARD,QH") == 0xDDB1


def test_cards_cut_misread_and_heartbeats():
    enc = PdtEncoder()
    parser = PdtParser()
    data = enc.hello() + enc.card("7H") + enc.heartbeat() + enc.cut_card() + enc.misread("E2")
    out = parser.feed(data, 4.0)
    assert out[1:3] == [CardScan(4.0, parse_card("7H")), CutCard(4.0)]
    assert kinds(out) == ["hello", "card", "cut_card", "pdt_misread"]
    assert "E2" in out[3].evidence["frame"] and "E2" not in out[3].reason
    assert parser.frames_ok == 5


def test_bad_checksum_is_dropped_and_a_retransmission_fills_the_hole():
    enc = PdtEncoder()
    parser = PdtParser()
    hello = enc.hello()
    card = enc.card("AS")
    out = parser.feed(hello + enc.corrupt(card) + card)
    assert kinds(out) == ["hello", "bad_checksum", "card"]


def test_a_lost_frame_is_a_sequence_gap_misread_not_a_guess():
    enc = PdtEncoder()
    parser = PdtParser()
    parser.feed(enc.hello() + enc.card("2C"))
    enc.card("3C")  # never sent
    out = parser.feed(enc.card("4C"))
    assert kinds(out) == ["pdt_sequence_gap", "card"]
    assert "frame 1 " in out[0].reason
    assert out[1].card.code == "4C"


def test_sequence_wraps_at_65536_without_a_gap():
    enc = PdtEncoder(seq=65534)
    parser = PdtParser()
    out = parser.feed(enc.hello() + enc.card("2C") + enc.card("3C") + enc.card("4C"))
    assert kinds(out) == ["hello", "card", "card", "card"]
    assert frame_seq(enc.recent[-1]) == 0


def test_gap_across_the_wrap_is_counted_forward():
    parser = PdtParser()
    parser.feed(encode_frame(65535, "HB"))
    out = parser.feed(encode_frame(2, "HB"))
    assert kinds(out) == ["pdt_sequence_gap"]
    assert "frames 0 to 1" in out[0].reason


def test_hello_replay_after_reconnect_is_deduplicated_and_fills_a_cut_frame():
    enc = PdtEncoder()
    parser = PdtParser()
    parser.feed(enc.hello() + enc.card("2C") + enc.card("3C"))
    cut = enc.card("4C")
    parser.feed(cut[:7])
    assert kinds(parser.connection_lost()) == ["partial_frame"]
    out = parser.feed(enc.hello())  # hello + replay of 2C 3C 4C
    assert kinds(out) == ["hello", "duplicate", "duplicate", "card"]
    assert out[-1].card.code == "4C"


def test_first_hello_makes_older_frames_stale_not_new_cards():
    enc = PdtEncoder()
    for code in ("2C", "3C"):
        enc.card(code)  # sent before this host listened
    out = PdtParser().feed(enc.hello() + enc.card("5D"))
    assert kinds(out) == ["hello", "stale", "stale", "card"]


def test_same_sequence_with_different_content_is_a_conflict():
    parser = PdtParser()
    parser.feed(encode_frame(0, "CARD", "AS") + encode_frame(1, "HB"))
    out = parser.feed(encode_frame(0, "CARD", "KS"))
    assert kinds(out) == ["pdt_sequence_conflict"]


def test_firmware_restart_is_reported():
    parser = PdtParser()
    parser.feed(PdtEncoder(boot="a1").hello() + encode_frame(0, "CARD", "AS"))
    out = parser.feed(PdtEncoder(boot="b2").hello() + encode_frame(0, "CARD", "KS"))
    assert kinds(out) == ["pdt_restart", "hello", "card"]


def test_card_frame_with_a_bad_code_is_a_misread():
    out = PdtParser().feed(encode_frame(0, "CARD", "ZZ") + encode_frame(1, "CARD"))
    assert kinds(out) == ["pdt_bad_card", "pdt_bad_card"]


def test_unknown_type_is_a_problem_and_still_counts_in_the_sequence():
    parser = PdtParser()
    out = parser.feed(encode_frame(0, "FUTURE", "x") + encode_frame(1, "CARD", "AS"))
    assert kinds(out) == ["unknown_type", "card"]


@pytest.mark.parametrize("line", [
    b"$PDT,1,CARD,AS*ZZZZ\r\n", b"$PDT,x,CARD,AS*0000\r\n", b"$PDT,99999,HB*0000\r\n",
    b"PDT,1,HB*0000\r\n", b"$XYZ,1,HB*0000\r\n",
])
def test_malformed_frames_are_problems(line):
    out = PdtParser().feed(line)
    assert len(out) == 1 and isinstance(out[0], Problem)


def test_garbage_before_a_frame_start_does_not_eat_the_frame():
    out = PdtParser().feed(b"\x80\x81junk" + encode_frame(0, "CARD", "9S"))
    assert kinds(out) == ["garbage", "card"]


def test_over_long_frame_is_dropped():
    parser = PdtParser()
    out = parser.feed(b"$PDT," + b"9" * 5000 + b"\r\n" + encode_frame(0, "CARD", "9S"))
    assert kinds(out) == ["frame_too_long", "card"]


def test_every_split_point_gives_the_same_result():
    enc = PdtEncoder()
    data = enc.hello() + enc.card("7H") + enc.cut_card() + enc.heartbeat() + enc.card("KD")
    whole = PdtParser().feed(data)
    for cut in range(1, len(data)):
        parser = PdtParser()
        assert parser.feed(data[:cut]) + parser.feed(data[cut:]) == whole


def test_every_example_frame_in_the_protocol_document_is_valid():
    from pathlib import Path
    doc = (Path(__file__).parents[2] / "docs" / "pdt-protocol.md").read_text()
    frames = [line.strip().split("\\r\\n")[0] for line in doc.splitlines()
              if line.strip().startswith("$PDT,") and "*" in line and "<" not in line]
    assert len(frames) >= 7
    for frame in frames:
        body, crc = frame[1:].split("*")
        assert crc16_ccitt_false(body.encode()) == int(crc, 16), frame


def _bitwise_crc16_ccitt_false(data: bytes) -> int:
    """The textbook definition, bit by bit (docs/pdt-protocol.md), to check the fast one."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


@given(st.binary(max_size=200))
def test_the_checksum_is_crc16_ccitt_false_bit_for_bit(data):
    assert crc16_ccitt_false(data) == _bitwise_crc16_ccitt_false(data)
