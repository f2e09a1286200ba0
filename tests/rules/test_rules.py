"""The rules layer against docs/rules.md and the rule sheets' worked examples."""

from itertools import product

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.rules.cards import ALL_CARDS
from controller.rules.hands import (
    PAIR_BET_RETURNS,
    PLAYER_BET_RETURNS,
    compare,
    evaluate_hand,
    round_result_data,
    settle,
)

STAKE = 100

# The nine worked examples of the sheets: (bet, banker, player 1, returned on a stake of 100).
WORKED_EXAMPLES = [
    (1, "player", "4H 8C", "6C 7S", 300),
    (2, "player", "2C 3D", "9C 2D", 100),
    (3, "player", "QC 10C", "QC JC", 400),
    (4, "player", "8C JC", "9D 6C", 0),
    (5, "player", "6C 5C", "JD AC", 200),
    (6, "player", "JC KD", "5S 9H", 0),
    (7, "pair", "6S 8S", "10C 10H", 1200),
    (8, "player", "2H 4H", "5C 5C", 300),
    (9, "player", "9D 7C", "KH 9H", 400),
]


@pytest.mark.parametrize("number, bet, banker, player, returned", WORKED_EXAMPLES)
def test_worked_examples_of_the_sheets(number, bet, banker, player, returned):
    result = settle(evaluate_hand(player.split()), evaluate_hand(banker.split()))
    units = result.player_bet_return if bet == "player" else result.pair_bet_return
    assert units * STAKE == returned, f"example {number}"


def test_worked_examples_values_and_odds():
    # the values the sheets print beside each hand
    assert evaluate_hand(["QC", "TC"]).value == 7.2
    assert evaluate_hand(["QC", "JC"]).value == 7.3
    assert evaluate_hand(["8C", "JC"]).value == 8 and evaluate_hand(["8C", "JC"]).flush
    assert evaluate_hand(["6C", "5C"]).value == 1
    assert evaluate_hand(["2H", "4H"]).value == 6
    assert evaluate_hand(["KH", "9H"]).value == 9
    r = settle(evaluate_hand(["5C", "5C"]), evaluate_hand(["2H", "4H"]))
    assert (r.outcome, r.odds) == ("win", "1:1")  # example 8: banker 6 keeps it 1:1
    r = settle(evaluate_hand(["KH", "9H"]), evaluate_hand(["9D", "7C"]))
    assert (r.outcome, r.odds) == ("win", "2:1")  # example 9: 9 with a flush overrides


@pytest.mark.parametrize("cards, value, combo", [
    ("AS KS", 7.5, "ak_flush"), ("KD AD", 7.5, "ak_flush"),
    ("AS AC", 7.4, "special_pair"), ("5H 5D", 7.4, "special_pair"), ("6S 6H", 7.4, "special_pair"),
    ("TC TD", 7.4, "special_pair"),
    ("5C 5C", 7.4, "special_pair"),  # not a Flush with No Point: the highest row wins
    ("TD TD", 7.4, "special_pair"),  # not a Flush with No Point either
    ("AH AH", 7.4, "special_pair"),
    ("JS JH", 7.3, "face_card_combo"), ("QS QS", 7.3, "face_card_combo"),
    ("QD KH", 7.3, "face_card_combo"), ("KS KS", 7.3, "face_card_combo"),
    ("TH JH", 7.2, "single_face_card_no_point"), ("QH TC", 7.2, "single_face_card_no_point"),
    ("AD 9D", 7.1, "flush_no_point"), ("2H 8H", 7.1, "flush_no_point"),
    ("3C 7C", 7.1, "flush_no_point"), ("6D 4D", 7.1, "flush_no_point"),
])
def test_special_combinations_and_precedence(cards, value, combo):
    hand = evaluate_hand(cards.split())
    assert (hand.value, hand.combo) == (value, combo)
    assert hand.has_pattern


@pytest.mark.parametrize("cards, points, flush, pair", [
    ("AS QS", 1, True, False),  # an A and a face card of one suit: a plain 1-point flush
    ("AS KH", 1, False, False),  # AK of two suits is plain
    ("3H 3S", 6, False, True), ("2H 2S", 4, False, True), ("4C 4D", 8, False, True),
    ("7S 7H", 4, False, True), ("8C 8D", 6, False, True),
    ("9H 9C", 8, False, True), ("9H 9H", 8, True, True),  # 8 points is never re-valued
    ("AD 9C", 0, False, False),  # zero points, two suits: plain 0
    ("4S 5S", 9, True, False), ("8H TH", 8, True, False),
    ("2D 5D", 7, True, False),
])
def test_hands_that_stay_plain(cards, points, flush, pair):
    hand = evaluate_hand(cards.split())
    assert hand.combo is None
    assert (hand.value, hand.points, hand.flush, hand.pair) == (points, points, flush, pair)


def test_ties():
    def tie(a: str, b: str) -> bool:
        return compare(evaluate_hand(a.split()), evaluate_hand(b.split())) == 0

    assert tie("AS AC", "TD TH")  # two Special Pairs
    assert tie("JS QS", "KD KH")  # two Face-card Combos
    assert tie("6C 5C", "JD AC")  # a 1-point flush ties a plain 1
    assert tie("4H 4D", "3S 5S")  # a pair of 4s (8) ties a flush 8
    r = settle(evaluate_hand(["JD", "AC"]), evaluate_hand(["6C", "5C"]))
    assert (r.outcome, r.odds, r.player_bet_return) == ("tie", None, 2)


def test_full_ranking_order():
    # 9 > 8 > 7.5 > 7.4 > 7.3 > 7.2 > 7.1 > 7 > 6 > 5 > 4 > 3 > 2 > 1 > 0
    ladder = ["4S 5H", "3S 5H", "AS KS", "AS AC", "JS QH", "TS KH", "AD 9D", "3S 4H", "2S 4H",
              "2S 3H", "AS 3H", "AS 2H", "2S TH", "AS TH", "4S 6H"]
    hands = [evaluate_hand(h.split()) for h in ladder]
    assert [h.value for h in hands] == [9, 8, 7.5, 7.4, 7.3, 7.2, 7.1, 7, 6, 5, 4, 3, 2, 1, 0]
    for higher, lower in zip(hands, hands[1:]):
        assert compare(higher, lower) == 1, (higher, lower)


def test_evaluation_does_not_depend_on_card_order():
    for first, second in product(ALL_CARDS, repeat=2):
        a, b = evaluate_hand((first, second)), evaluate_hand((second, first))
        assert ((a.value, a.combo, a.flush, a.pair, a.points)
                == (b.value, b.combo, b.flush, b.pair, b.points))


def test_loss_odds_follow_the_banker_pattern():
    lose_plain = settle(evaluate_hand(["9C", "2D"]), evaluate_hand(["2C", "3D"]))
    assert (lose_plain.outcome, lose_plain.odds, lose_plain.player_bet_return) == ("lose", "1:1", 1)
    lose_pattern = settle(evaluate_hand(["9D", "6C"]), evaluate_hand(["8C", "JC"]))
    assert (lose_pattern.odds, lose_pattern.player_bet_return) == ("2:1", 0)


def test_banker_zero_or_six_rule_uses_the_revalued_banker():
    # Banker 10♦J♦ would be 0 points but is re-valued to 7.2: the 0-or-6 rule does not apply.
    r = settle(evaluate_hand(["8S", "8H"]), evaluate_hand(["AS", "2S"]))  # pair of 8s (6) vs 3
    assert r.player_bet_return == 4
    r = settle(evaluate_hand(["AS", "KS"]), evaluate_hand(["TD", "AD"]))  # 7.5 vs plain 1
    assert r.player_bet_return == 4
    r = settle(evaluate_hand(["AS", "KS"]), evaluate_hand(["TD", "KC"]))  # 7.5 vs 7.2 (not 0)
    assert r.player_bet_return == 4
    r = settle(evaluate_hand(["AS", "KS"]), evaluate_hand(["TD", "JH"]))  # banker 7.2
    assert r.player_bet_return == 4
    r = settle(evaluate_hand(["AS", "KS"]), evaluate_hand(["TD", "9H"]))  # banker plain 9 wins
    assert r.outcome == "lose"
    r = settle(evaluate_hand(["AS", "KS"]), evaluate_hand(["4D", "6H"]))  # banker plain 0
    assert (r.odds, r.player_bet_return) == ("1:1", 3)
    r = settle(evaluate_hand(["4S", "4S"]), evaluate_hand(["3D", "3H"]))  # 8 pair vs banker 6 pair
    assert (r.odds, r.player_bet_return) == ("2:1", 4)
    r = settle(evaluate_hand(["4S", "5S"]), evaluate_hand(["TD", "6H"]))  # 9 flush vs 6
    assert (r.odds, r.player_bet_return) == ("2:1", 4)
    r = settle(evaluate_hand(["2S", "5S"]), evaluate_hand(["TD", "6H"]))  # 7 flush vs 6
    assert (r.odds, r.player_bet_return) == ("1:1", 3)


def test_round_result_data_has_every_position_and_bead():
    hands = {p: evaluate_hand(c.split()) for p, c in zip(
        ("P1", "P2", "P3", "P4", "P5", "banker"),
        ("6C 7S", "9C 2D", "QC JC", "TC TH", "JD AC", "6C 5C"))}
    data = round_result_data(hands)
    assert list(data["hands"]) == ["P1", "P2", "P3", "P4", "P5", "banker"]
    assert data["positions"]["P4"]["pair"] is True
    assert data["positions"]["P4"]["pair_bet_return"] == 12
    assert data["positions"]["P5"]["bead"] == {"result": "tie", "flush": False, "pair": False}
    assert data["positions"]["P3"]["bead"] == {"result": "win", "flush": True, "pair": False}


cards = st.sampled_from(ALL_CARDS)
hands = st.tuples(cards, cards).map(evaluate_hand)


@given(hands, hands, hands)
def test_comparison_is_a_total_preorder(a, b, c):
    assert compare(a, b) == -compare(b, a)  # antisymmetric verdicts, totality
    if compare(a, b) >= 0 and compare(b, c) >= 0:
        assert compare(a, c) >= 0  # transitive
    assert compare(a, a) == 0


@given(hands, hands)
def test_returns_are_within_their_sets(player, banker):
    r = settle(player, banker)
    assert r.player_bet_return in PLAYER_BET_RETURNS
    assert r.pair_bet_return in PAIR_BET_RETURNS
    assert (r.pair_bet_return == 12) == player.pair
    assert r.outcome in ("win", "lose", "tie")
    assert (r.odds is None) == (r.outcome == "tie")
    expected = {("win", "1:1"): 3, ("win", "2:1"): 4, ("tie", None): 2,
                ("lose", "1:1"): 1, ("lose", "2:1"): 0}
    assert r.player_bet_return == expected[(r.outcome, r.odds)]
