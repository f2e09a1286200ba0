"""Card codes: every accepted spelling, and rejected input with its message."""

import pytest

from controller.rules.cards import (
    ALL_CARDS,
    Card,
    CardCodeError,
    ShoeComposition,
    ShoeCompositionError,
    format_card,
    new_shoe_cards,
    parse_card,
)


@pytest.mark.parametrize("text, code", [
    ("AS", "AS"), ("as", "AS"), ("TH", "TH"), ("10H", "TH"), ("10h", "TH"), ("th", "TH"),
    ("H3", "3H"), ("h3", "3H"), ("S10", "TS"), ("7♣", "7C"), ("♣7", "7C"), ("10♥", "TH"),
    ("Q♠", "QS"), ("♦K", "KD"), (" 9d ", "9D"), ("JC", "JC"), ("cj", "JC"),
])
def test_accepted_spellings(text, code):
    assert format_card(text) == code
    assert parse_card(text) == parse_card(code)


def test_every_canonical_code_round_trips():
    assert len(ALL_CARDS) == 52 and len(set(ALL_CARDS)) == 52
    for card in ALL_CARDS:
        assert parse_card(card.code) == card
        assert parse_card(card.display()) == card


@pytest.mark.parametrize("text, why", [
    ("", "empty"), ("   ", "empty"), ("1S", "not a rank and a suit"), ("11H", "not a rank"),
    ("ZZ", "not a rank"), ("AX", "not a rank"), ("A", "not a rank"), ("ASS", "not a rank"),
    ("SH", "not a rank"), (7, "expected a string"), (None, "expected a string"),
])
def test_rejected_input_quotes_the_text_and_says_what_is_accepted(text, why):
    with pytest.raises(CardCodeError) as info:
        parse_card(text)
    message = str(info.value)
    assert repr(text) in message
    assert why in message
    assert "accepted:" in message and "S H D C" in message


def test_points_and_burn_values():
    assert [Card(r, "S").points for r in "A23456789TJQK"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0, 0]
    assert [Card(r, "S").burn_value for r in "A23456789TJQK"] == [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10, 10]


def test_eight_deck_shoe_composition():
    shoe = ShoeComposition(8)
    cards = new_shoe_cards(8)
    assert len(cards) == 416 == shoe.size
    for card in cards:
        shoe.draw(card)
    assert shoe.cards_left == 0
    with pytest.raises(ShoeCompositionError, match="card 417 of a 416-card shoe"):
        shoe.check_draw(Card("A", "S"))


def test_ninth_copy_is_impossible():
    shoe = ShoeComposition(8)
    for _ in range(8):
        shoe.draw(Card("7", "H"))
    assert shoe.remaining(Card("7", "H")) == 0
    with pytest.raises(ShoeCompositionError, match="copy 9 of 7H in a 8-deck shoe"):
        shoe.draw(Card("7", "H"))
    assert shoe.cards_drawn == 8  # the refused card was not counted
