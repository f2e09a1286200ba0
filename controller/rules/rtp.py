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
  from the 13x4 table of remaining copies.
All counts are exact integers; results are exact fractions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
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


@cache
def _settle(player: Hand, banker: Hand) -> PositionResult:
    return settle(player, banker)


def _banker_class_counts(remaining: list[list[int]]) -> Iterator[tuple[int, int, bool, int]]:
    """Yield (rank_a, rank_b, suited, ordered_deals) for the Banker's two cards."""
    ranks = range(len(RANKS))
    totals = [sum(row) for row in remaining]
    for a in ranks:
        row_a = remaining[a]
        for b in ranks:
            row_b = remaining[b]
            if a == b:  # the same card twice needs two copies of it
                suited = sum(n * (n - 1) for n in row_a)
                offsuit = totals[a] * totals[a] - sum(n * n for n in row_a)
            else:
                suited = sum(x * y for x, y in zip(row_a, row_b))
                offsuit = totals[a] * totals[b] - suited
            if suited:
                yield a, b, True, suited
            if offsuit:
                yield a, b, False, offsuit


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
    player_tally, pair_tally = BetTally(), BetTally()
    rank_count = len(RANKS)
    for r1 in range(rank_count):
        for r2 in range(rank_count):
            for player_suited in (True, False):
                remaining = [[decks] * len(SUITS) for _ in range(rank_count)]
                suit2 = SPADE if player_suited else HEART
                remaining[r1][SPADE] -= 1
                if remaining[r2][suit2] == 0:
                    continue  # a one-deck shoe has one copy of each card
                player_deals = decks * remaining[r2][suit2]
                remaining[r2][suit2] -= 1
                # suit symmetry: 4 suits for the first card, 1 (same) or 3 (other) for the second
                player_deals *= 4 * (1 if player_suited else 3)
                player = _hand(r1, r2, player_suited)
                for a, b, banker_suited, banker_deals in _banker_class_counts(remaining):
                    result = _settle(player, _hand(a, b, banker_suited))
                    weight = player_deals * banker_deals
                    player_tally.add(weight, result.outcome, result.player_bet_return)
                    pair_outcome = "win" if result.pair_bet_return else "lose"
                    pair_tally.add(weight, pair_outcome, result.pair_bet_return)
    size = decks * CARDS_PER_DECK
    deals = size * (size - 1) * (size - 2) * (size - 3)
    if player_tally.weight != deals:  # the enumeration must cover every deal exactly once
        raise AssertionError(f"enumerated {player_tally.weight} deals, expected {deals}")
    return RtpReport(decks, deals, player_tally, pair_tally)
