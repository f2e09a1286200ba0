"""RFID tag tables as vendors ship them: card spellings, a BOM, the cut card, jokers refused."""

from __future__ import annotations

import io

import pytest

from controller.rules.cards import LENIENT_FORMS, parse_card
from drivers.base import DriverConfigError
from drivers.protocols.base import ProtocolConfigError
from drivers.protocols.rfid import CUT, load_registry, parse_registry
from drivers.shoe import SerialShoe

VENDOR_TABLE = """\
uid,card
0415AF57C8,1s
0415AF57C9,10h
0415AF57CA,As
0415AF57CB,ace of spades
0415AF57CC,10 of Hearts
0415AF57CD,Q♥
0415AF57CE,♣k
0415AF57CF,Cut Card
"""


def test_a_vendor_tag_table_loads_with_its_spellings(tmp_path):
    path = tmp_path / "vendor.csv"
    path.write_bytes(b"\xef\xbb\xbf" + VENDOR_TABLE.encode())  # as a spreadsheet saves it
    registry = load_registry(path)
    assert [v if v == CUT else v.code for v in registry.values()] == \
        ["AS", "TH", "AS", "AS", "TH", "QH", "KC", CUT]
    assert registry["0415AF57C8"] == parse_card("AS")


@pytest.mark.parametrize("row, found", [
    ("0415AF57D0,Joker", "'Joker' is not a card: a joker is not a card of a Pok Deng shoe"),
    ("0415AF57D0,big joker", "'big joker' is not a card: a joker"),
    ("0415AF57D0,11s", "'11s' is not a card: not a rank and a suit"),
    ("0415AF57D0,", "'' is not a card"),
])
def test_a_row_that_is_no_card_names_file_line_what_and_what_is_accepted(row, found):
    text = VENDOR_TABLE + row + "\n"
    with pytest.raises(ProtocolConfigError) as err:
        parse_registry(io.StringIO(text), "/etc/pokdeng-table/cards.csv")
    message = str(err.value)
    assert message.startswith("/etc/pokdeng-table/cards.csv:10: ")
    assert found in message and LENIENT_FORMS in message


def test_the_driver_refuses_a_joker_naming_the_registry_option(tmp_path):
    path = tmp_path / "cards.csv"
    path.write_text("uid,card\n0415AF57C8,AS\n0415AF57C9,JOKER\n", encoding="utf-8")
    with pytest.raises(DriverConfigError) as err:
        SerialShoe(lambda inp: None, {"protocol": "rfid", "url": "loop://",
                                      "registry": str(path)})
    assert f'"registry": {path}:3: \'JOKER\' is not a card' in str(err.value)
