"""The Bee-Tek style parser on its own: frames, splits, garbage, length caps."""

from __future__ import annotations

import pytest

from controller.rules.cards import parse_card
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.protocols.base import Problem, ProtocolConfigError
from drivers.protocols.beetek import BeeTekEncoder, BeeTekParser

STREAM = (b" [Game]<Card:4S>  [Manual Burn Cards]<Card:H3> [Game]<Card:10d>"
          b" [Game]<Game> <Alarm:E3 Card Not Read> <W0x01> [Game]<Card:CUT> ")


def test_decodes_cards_both_orders_misreads_alarms_warnings_and_cut_card():
    out = BeeTekParser().feed(STREAM, 2.0)
    assert out[:3] == [CardScan(2.0, parse_card("4S")), CardScan(2.0, parse_card("3H")),
                       CardScan(2.0, parse_card("TD"))]
    assert isinstance(out[3], Misread) and out[3].code == "beetek_card_not_read"
    assert isinstance(out[4], Misread) and out[4].code == "beetek_alarm_e3"
    assert out[4].evidence == {"frame": "<Alarm:E3 Card Not Read>"}
    assert "Card Not Read" not in out[4].reason  # the shoe's words are evidence, not reason
    assert isinstance(out[5], Problem) and out[5].code == "warning"
    assert out[6] == CutCard(2.0)
    assert len(out) == 7


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_a_split_anywhere_gives_the_same_outputs(cut):
    whole = BeeTekParser().feed(STREAM)
    parser = BeeTekParser()
    assert parser.feed(STREAM[:cut]) + parser.feed(STREAM[cut:]) == whole


def test_byte_by_byte_gives_the_same_outputs():
    whole = BeeTekParser().feed(STREAM)
    parser = BeeTekParser()
    assert [o for b in STREAM for o in parser.feed(bytes([b]))] == whole


def test_garbage_is_counted_and_the_next_frame_survives():
    parser = BeeTekParser()
    out = parser.feed(b"\x80\xff~~ <Car\x00 [Game]<Card:KC> zz<Card:2H>")
    cards = [o for o in out if isinstance(o, CardScan)]
    assert [c.card.code for c in cards] == ["KC", "2H"]
    assert parser.counts["garbage"] >= 2
    assert parser.counts["card"] == 2


def test_an_unreadable_card_code_is_a_misread_not_noise():
    out = BeeTekParser().feed(b"<Card:ZZ>")
    assert len(out) == 1 and isinstance(out[0], Misread) and out[0].code == "beetek_bad_card"
    assert out[0].evidence == {"frame": "<Card:ZZ>"}
    assert "ZZ" not in out[0].reason  # the frame may name a sealed card: evidence only


@pytest.mark.parametrize("alarm_id", ["QH", "S3", "10H", "1S", "S1", "1s"])
def test_an_alarm_id_that_reads_as_a_card_is_not_in_the_fault_code(alarm_id):
    out = BeeTekParser().feed(f"<Alarm:{alarm_id}>".encode())
    assert len(out) == 1 and out[0].code == "beetek_alarm_unknown"
    assert alarm_id.lower() not in out[0].reason.lower()
    assert out[0].evidence == {"frame": f"<Alarm:{alarm_id}>"}


def test_unknown_frames_are_logged_problems():
    out = BeeTekParser().feed(b"<Hello world>")
    assert [o.code for o in out] == ["unknown_frame"]


def test_over_long_frame_is_dropped_and_memory_stays_bounded():
    parser = BeeTekParser()
    out = parser.feed(b"<Card:" + b"x" * 10_000)
    assert [o.code for o in out] == ["frame_too_long"]
    assert len(parser._buffer) <= parser.max_frame and len(parser._garbage) <= parser.max_frame
    assert parser.feed(b"<Card:AS>") == [CardScan(0.0, parse_card("AS"))]


def test_the_cut_card_frame_is_configuration():
    parser = BeeTekParser(cut_card_frames=["<Cut>", "<Card:XX>"])
    out = parser.feed(b"<Cut> <card:xx> <Card:CUT>")
    assert out[:2] == [CutCard(0.0), CutCard(0.0)]
    assert isinstance(out[2], Misread)  # "CUT" is no longer the cut card here: not a card code


@pytest.mark.parametrize("bad", ["Card:CUT", "<a><b>", "<>", 5])
def test_bad_cut_card_frame_option_is_refused(bad):
    with pytest.raises(ProtocolConfigError):
        BeeTekParser(cut_card_frames=[bad])


def test_connection_lost_discards_a_partial_frame_and_counts_it():
    parser = BeeTekParser()
    assert parser.feed(b"[Game]<Card:4") == []
    problems = parser.connection_lost()
    assert [p.code for p in problems] == ["partial_frame"]
    assert parser.counts["partial_frame"] == 1
    # the rest of the old frame after a reconnect cannot complete a card
    out = parser.feed(b"S> <Card:5S>")
    assert [o.card.code for o in out if isinstance(o, CardScan)] == ["5S"]


def test_encoder_frames_round_trip_and_corrupted_copies_never_parse_as_cards():
    enc = BeeTekEncoder()
    parser = BeeTekParser()
    frames = [enc.card("QH"), enc.cut_card(), enc.misread()]
    for frame in frames:
        assert not [o for o in parser.feed(enc.corrupt(frame)) if not isinstance(o, Problem)]
    out = parser.feed(b"".join(frames))
    assert [o.kind for o in out] == ["card", "cut_card", "misread"]


def test_a_frame_with_bytes_no_shoe_sends_is_damaged_not_unknown():
    out = BeeTekParser().feed(b"<C\xa7rd:6H>")
    assert [o.code for o in out] == ["damaged_frame"]
