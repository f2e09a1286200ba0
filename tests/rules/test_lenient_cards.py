"""The lenient card spellings of vendors' tag tables (controller.rules.cards.parse_lenient_card)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.rules.cards import (
    ALL_CARDS,
    LENIENT_FORMS,
    CardCodeError,
    parse_card,
    parse_lenient_card,
)


@pytest.mark.parametrize("text, code", [
    ("AS", "AS"), ("as", "AS"), ("1s", "AS"), ("1S", "AS"), ("s1", "AS"), ("♠A", "AS"),
    ("♤1", "AS"), ("ace of spades", "AS"), ("Ace Of Spades", "AS"), ("ACE-OF-SPADES", "AS"),
    ("10h", "TH"), ("10 of hearts", "TH"), ("ten of hearts", "TH"), ("h10", "TH"),
    ("10♡", "TH"), ("T♥", "TH"), ("queen hearts", "QH"), ("Q of ♥", "QH"), ("2 of clubs", "2C"),
    ("two of club", "2C"), ("king_of_diamonds", "KD"), ("  kd ", "KD"), ("Jack of Spades", "JS"),
    ("9 diamonds", "9D"), ("acespades", "AS"),
])
def test_vendor_spellings(text, code):
    assert parse_lenient_card(text).code == code


@pytest.mark.parametrize("text", ["joker", "Joker", "JOKER 1", "big joker", "red-joker",
                                  "JK", "BJ", "11s", "1", "spades", "ace", "ace of", "of",
                                  "", "   ", "AS AS", "0S", "1♠♠", "queen of jacks"])
def test_anything_else_is_refused_saying_what_is_accepted(text):
    with pytest.raises(CardCodeError) as err:
        parse_lenient_card(text)
    message = str(err.value)
    assert repr(text) in message and LENIENT_FORMS in message
    if "joker" in text.lower():
        assert "a joker is not a card" in message


def test_not_a_string_is_refused():
    with pytest.raises(CardCodeError, match="expected a string"):
        parse_lenient_card(7)


@given(st.sampled_from(ALL_CARDS), st.sampled_from(["{r}{s}", "{s}{r}", "{r} of {s}",
                                                   "{r} {s}", "{R}{S}"]))
def test_every_card_in_every_form_comes_back_as_itself(card, form):
    rank = {"A": "ace", "T": "10"}.get(card.rank, card.rank)
    suit = {"S": "spades", "H": "hearts", "D": "diamonds", "C": "clubs"}[card.suit]
    text = form.format(r=rank if " " in form else card.rank.lower(),
                       s=suit if " " in form else card.suit.lower(),
                       R=card.rank, S=card.suit)
    assert parse_lenient_card(text) == card


def test_the_strict_parser_is_unchanged():
    """Shoe frames and scripts stay strict: an ace is never spelled 1 on the wire."""
    for text in ("1s", "ace of spades"):
        with pytest.raises(CardCodeError):
            parse_card(text)
