"""The RFID parser and card registry on their own."""

from __future__ import annotations

import io

import pytest

from controller.rules.cards import parse_card
from controller.table.inputs import CardScan, CutCard, Misread
from drivers.protocols.base import Problem, ProtocolConfigError
from drivers.protocols.rfid import (
    CUT,
    RfidEncoder,
    RfidParser,
    load_registry,
    normalize_uid,
    parse_registry,
    simulated_registry,
    write_registry,
)

REGISTRY = {"04A1B2C3D4E5F6": parse_card("AS"), "0011AABB": parse_card("TH"),
            "04FFFFFFFFFF01": CUT}


def test_maps_uids_to_cards_and_the_cut_card_with_any_separator_and_case():
    parser = RfidParser(REGISTRY)
    out = parser.feed(b"04:a1:b2:c3:d4:e5:f6\r\n\x020011aabb\n04-FF-FF-FF-FF-FF-01\r", 3.0)
    assert out == [CardScan(3.0, parse_card("AS")), CardScan(3.0, parse_card("TH")),
                   CutCard(3.0)]


def test_unknown_uid_is_a_misread_naming_the_uid():
    out = RfidParser(REGISTRY).feed(b"DEADBEEF\r\n")
    assert len(out) == 1 and isinstance(out[0], Misread)
    assert out[0].code == "rfid_unknown_uid" and out[0].evidence == {"tag": "DEADBEEF"}
    assert "DEADBEEF" not in out[0].reason  # a tag id is as sealed as its card


def test_a_uid_twice_in_a_shoe_is_a_duplicate_until_a_new_shoe():
    parser = RfidParser(REGISTRY)
    assert parser.feed(b"0011AABB\r\n")[0] == CardScan(0.0, parse_card("TH"))
    again = parser.feed(b"0011AABB\r\n")
    assert again[0].code == "rfid_duplicate_uid"
    assert again[0].evidence == {"tag": "0011AABB", "card": "TH"}
    assert "0011AABB" not in again[0].reason and "TH" not in again[0].reason
    parser.new_shoe()
    assert parser.feed(b"0011AABB\r\n")[0] == CardScan(0.0, parse_card("TH"))


def test_lines_that_are_not_uids_are_problems_not_inputs():
    parser = RfidParser(REGISTRY)
    out = parser.feed(b"hello\r\n0011AAB\r\n\x80\x81\r\n")
    assert [o.code for o in out] == ["bad_line", "bad_line", "bad_line"]


def test_over_long_line_is_dropped_and_the_next_is_read():
    parser = RfidParser(REGISTRY)
    out = parser.feed(b"A" * 5000 + b"\r\n0011AABB\r\n")
    assert [o.code if isinstance(o, Problem) else o.kind for o in out] == \
        ["frame_too_long", "card"]
    assert len(parser._lines._buffer) == 0


@pytest.mark.parametrize("cut", range(1, 16))
def test_split_lines_are_joined(cut):
    data = b"0011AABB\r\n04A1B2C3D4E5F6\r\n"
    parser = RfidParser(REGISTRY)
    out = parser.feed(data[:cut]) + parser.feed(data[cut:])
    assert [o.card.code for o in out] == ["TH", "AS"]


def test_partial_line_at_link_loss_is_discarded():
    parser = RfidParser(REGISTRY)
    parser.feed(b"0011AA")
    assert [p.code for p in parser.connection_lost()] == ["partial_frame"]
    assert parser.feed(b"BB\r\n")[0].code == "bad_line"  # the stump cannot become a card


def test_registry_file_round_trip(tmp_path):
    path = tmp_path / "cards.csv"
    registry = simulated_registry(decks=2)
    write_registry(registry, path)
    assert load_registry(path) == registry
    assert sum(1 for v in registry.values() if v == CUT) == 1
    assert len(registry) == 2 * 52 + 1


@pytest.mark.parametrize("text, fragment", [
    ("uid,card\n0011AABB,AS\n0011AABB,KD\n", "cards.csv:3: UID 0011AABB is listed twice"),
    ("0011AABB,XX\n", "cards.csv:1: 'XX' is not a card"),
    ("00ZZ,AS\n", "cards.csv:1: '00ZZ' is not a UID"),
    ("0011AABB\n", "cards.csv:1: expected 'uid,card'"),
    ("0011AABB,CUT\n0011AABC,cut\n", "cards.csv:2: a second CUT entry"),
    ("# nothing\n", "no cards"),
])
def test_registry_errors_name_file_and_line(text, fragment):
    with pytest.raises(ProtocolConfigError) as err:
        parse_registry(io.StringIO(text), "cards.csv")
    assert fragment in str(err.value)


def test_missing_registry_file_is_a_clear_error(tmp_path):
    with pytest.raises(ProtocolConfigError, match="nope.csv"):
        load_registry(tmp_path / "nope.csv")


def test_normalize_uid():
    assert normalize_uid(" 04:a1:b2:c3 ") == "04A1B2C3"
    assert normalize_uid("04A1B2C") is None and normalize_uid("") is None


def test_encoder_misread_and_corrupt_lines():
    enc = RfidEncoder()
    parser = RfidParser(REGISTRY)
    assert parser.feed(enc.misread())[0].code == "rfid_unknown_uid"
    assert parser.feed(enc.corrupt(enc.tag("0011AABB")))[0].code == "bad_line"


def test_the_example_registry_in_config_loads():
    from pathlib import Path
    registry = load_registry(Path(__file__).parents[2] / "config" / "cards.example.csv")
    assert registry["0450000000000D"] == parse_card("AH")
    assert list(registry.values()).count(CUT) == 1


def test_repeat_window_merges_a_reader_repeating_one_tag_but_not_a_card_coming_back():
    parser = RfidParser(REGISTRY, repeat_window_seconds=0.5)
    first = parser.feed(b"0011AABB\r\n", 10.0)
    repeat = parser.feed(b"0011AABB\r\n", 10.3)
    later = parser.feed(b"0011AABB\r\n", 12.0)  # out of the window: the card came back
    assert first[0].kind == "card"
    assert isinstance(repeat[0], Problem) and repeat[0].code == "repeat"
    assert later[0].code == "rfid_duplicate_uid"
    strict = RfidParser(REGISTRY)  # default: no window, every repeat is a duplicate
    strict.feed(b"0011AABB\r\n", 10.0)
    assert strict.feed(b"0011AABB\r\n", 10.01)[0].code == "rfid_duplicate_uid"


@pytest.mark.parametrize("bad", [-1, 6, "1", True])
def test_bad_repeat_window_is_refused(bad):
    with pytest.raises(ProtocolConfigError, match="repeat_window_seconds"):
        RfidParser(REGISTRY, repeat_window_seconds=bad)
