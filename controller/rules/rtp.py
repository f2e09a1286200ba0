"""Exact return to player of the Player N and Player N Pair bets, for a fresh N-deck shoe.

Enumerates the first four cards of a fresh shoe (Player hand, then Banker hand; by
exchangeability any Player position against the Banker has the same joint distribution)
using the project's own ``evaluate_hand`` and ``settle``. Nothing is typed in from a closed
formula.

To stay fast it enumerates over card *classes* with multiplicities instead of 416^4 deals:
- suits are symmetric, so the Player's first card is taken as a spade (weight x4) and the
  second as a spade or a heart (weight x1 or x3);
- given the Player's two cards, the Banker's hand only matters through its two ranks and
  whether it is suited; the number of ordered Banker deals of each such class is counted
  from the 13x4 table of remaining copies, once per pair of ranks the Player took;
- ``settle`` reads a hand's points, value, combination, flush and pair, never its cards, so
  the 338 classes fold into a few dozen kinds and every outcome comes from a table of
  ``settle`` over pairs of kinds; weights are summed per outcome and added to the tallies once.
All counts are exact integers; results are exact fractions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from operator import mul
from typing import Any

from controller.rules.cards import CARDS_PER_DECK, DEFAULT_DECKS, RANKS, SUITS, Card
from controller.rules.hands import PLAYER_BET_DEDUCTED, Hand, PositionResult, evaluate_hand, settle

SPADE, HEART = SUITS.index("S"), SUITS.index("H")


@cache
def _hand(rank_a: int, rank_b: int, suited: bool) -> Hand:
    """A representative hand of the class (ranks, suited or not)."""
    first = Card(RANKS[rank_a], SUITS[SPADE])
    second = Card(RANKS[rank_b], SUITS[SPADE if suited else HEART])
    return evaluate_hand((first, second))


def _rules_key(hand: Hand) -> tuple[Any, ...]:
    """Everything of a hand that ``settle`` reads: all of it but the cards themselves.

    Hands with the same key settle alike against any hand, so the 338 hand classes fold into a
    few dozen kinds and ``settle`` runs once per pair of kinds instead of once per pair of
    classes (tests/rules/test_rtp.py checks the fold against every pair of classes)."""
    return (hand.points, hand.tenths, hand.combo, hand.flush, hand.pair)


#: every hand class: (first rank, second rank, suited)
_CLASSES = tuple((a, b, suited) for a in range(len(RANKS)) for b in range(len(RANKS))
                 for suited in (True, False))


@cache
def _kinds() -> tuple[tuple[int, ...], list[Hand]]:
    """Each class's kind (an index), and a representative hand of each kind."""
    index: dict[tuple[Any, ...], int] = {}
    representatives: list[Hand] = []
    of_class = []
    for a, b, suited in _CLASSES:
        hand = _hand(a, b, suited)
        key = _rules_key(hand)
        if key not in index:
            index[key] = len(representatives)
            representatives.append(hand)
        of_class.append(index[key])
    return tuple(of_class), representatives


@cache
def _settled() -> list[list[PositionResult]]:
    """``settle`` of every Player kind against every Banker kind."""
    _, hands = _kinds()
    return [[settle(player, banker) for banker in hands] for player in hands]


def _banker_kind_deals(remaining: list[list[int]]) -> list[int]:
    """Ordered two-card Banker deals from ``remaining`` (13 ranks x 4 suits), per hand kind."""
    of_class, hands = _kinds()
    deals = [0] * len(hands)
    totals = [sum(row) for row in remaining]
    squares = [sum(map(mul, row, row)) for row in remaining]
    class_index = 0
    for a, row_a in enumerate(remaining):
        for b, row_b in enumerate(remaining):
            if a == b:  # the same card twice needs two copies of it: sum of n * (n - 1)
                suited = squares[a] - totals[a]
                offsuit = totals[a] * totals[a] - squares[a]
            else:
                suited = sum(map(mul, row_a, row_b))
                offsuit = totals[a] * totals[b] - suited
            deals[of_class[class_index]] += suited  # _CLASSES order: suited, then offsuit
            deals[of_class[class_index + 1]] += offsuit
            class_index += 2
    return deals


@dataclass
class BetTally:
    """Weighted counts of one bet's outcomes over all deals."""

    weight: int = 0
    returned: int = 0  # units returned, summed over deals
    by_outcome: dict[str, int] = field(default_factory=dict)
    by_return: dict[int, int] = field(default_factory=dict)

    def add(self, weight: int, outcome: str, units_returned: int) -> None:
        self.weight += weight
        self.returned += weight * units_returned
        self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + weight
        self.by_return[units_returned] = self.by_return.get(units_returned, 0) + weight


@dataclass(frozen=True)
class RtpReport:
    decks: int
    deals: int  # ordered four-card deals from the shoe
    player: BetTally
    pair: BetTally

    @property
    def player_rtp(self) -> Fraction:
        """Returned / deducted, where a Player bet deducts stake + held amount."""
        return Fraction(self.player.returned, PLAYER_BET_DEDUCTED * self.player.weight)

    @property
    def pair_rtp(self) -> Fraction:
        return Fraction(self.pair.returned, self.pair.weight)

    def to_json_data(self) -> dict[str, Any]:
        def fraction(value: Fraction) -> str:
            return f"{value.numerator}/{value.denominator}"

        def probabilities(counts: dict[Any, int], weight: int) -> dict[str, Any]:
            return {
                str(key): {"p": fraction(Fraction(n, weight)), "percent": 100 * n / weight}
                for key, n in sorted(counts.items(), key=lambda kv: str(kv[0]))
            }

        return {
            "decks": self.decks,
            "deals": self.deals,
            "player": {
                "rtp": fraction(self.player_rtp),
                "percent": float(self.player_rtp * 100),
                "deducted_per_unit": PLAYER_BET_DEDUCTED,
                "outcomes": probabilities(self.player.by_outcome, self.player.weight),
                "returns_per_unit": probabilities(self.player.by_return, self.player.weight),
            },
            "pair": {
                "rtp": fraction(self.pair_rtp),
                "percent": float(self.pair_rtp * 100),
                "outcomes": probabilities(self.pair.by_outcome, self.pair.weight),
                "returns_per_unit": probabilities(self.pair.by_return, self.pair.weight),
            },
        }


def compute_rtp(decks: int = DEFAULT_DECKS) -> RtpReport:
    """Enumerate every ordered (Player, Banker) deal of a fresh shoe of ``decks`` decks."""
    if decks < 1:
        raise ValueError(f"decks must be at least 1, got {decks}")
    of_class, _ = _kinds()
    settled = _settled()
    # The Banker's deals depend on which two cards the Player took, not on their order nor on
    # the suits' names: (r1 spade, r2 heart) leaves what (r2 spade, r1 heart) leaves, suits
    # swapped. One count per unordered pair of ranks and suitedness.
    banker_deals: dict[tuple[int, int, bool], list[int]] = {}
    # weight of each (outcome, Player bet return, Pair bet return), summed over all deals
    weights: dict[tuple[str, int, int], int] = {}
    for class_index, (r1, r2, player_suited) in enumerate(_CLASSES):
        remaining = [[decks] * len(SUITS) for _ in RANKS]
        suit2 = SPADE if player_suited else HEART
        remaining[r1][SPADE] -= 1
        if remaining[r2][suit2] == 0:
            continue  # a one-deck shoe has one copy of each card
        player_deals = decks * remaining[r2][suit2]
        remaining[r2][suit2] -= 1
        # suit symmetry: 4 suits for the first card, 1 (same) or 3 (other) for the second
        player_deals *= 4 * (1 if player_suited else 3)
        removed = (min(r1, r2), max(r1, r2), player_suited)
        if removed not in banker_deals:
            banker_deals[removed] = _banker_kind_deals(remaining)
        results = settled[of_class[class_index]]
        for banker_kind, deals in enumerate(banker_deals[removed]):
            if deals:
                result = results[banker_kind]
                key = (result.outcome, result.player_bet_return, result.pair_bet_return)
                weights[key] = weights.get(key, 0) + player_deals * deals
    player_tally, pair_tally = BetTally(), BetTally()
    for (outcome, player_return, pair_return), weight in weights.items():
        player_tally.add(weight, outcome, player_return)
        pair_tally.add(weight, "win" if pair_return else "lose", pair_return)
    size = decks * CARDS_PER_DECK
    deals = size * (size - 1) * (size - 2) * (size - 3)
    if player_tally.weight != deals:  # the enumeration must cover every deal exactly once
        raise AssertionError(f"enumerated {player_tally.weight} deals, expected {deals}")
    return RtpReport(decks, deals, player_tally, pair_tally)
