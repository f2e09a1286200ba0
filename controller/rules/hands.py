"""The Pok Deng rules (docs/rules.md §5-§9): hand value, comparison, settlement, roadmap bead.

Pure functions: no I/O, no clock. Values are compared as exact integers (tenths of a point),
so 7.4 vs 7.4 is a tie with no float arithmetic involved; ``Hand.value`` is the float the
events carry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.rules.cards import Card, parse_card

POSITIONS = ("P1", "P2", "P3", "P4", "P5")
HAND_ORDER = POSITIONS + ("banker",)

# Special combinations, high to low, scored between 7 and 8 (value in tenths of a point).
AK_FLUSH = "ak_flush"
SPECIAL_PAIR = "special_pair"
FACE_CARD_COMBO = "face_card_combo"
SINGLE_FACE_CARD_NO_POINT = "single_face_card_no_point"
FLUSH_NO_POINT = "flush_no_point"
COMBO_TENTHS = {
    AK_FLUSH: 75,
    SPECIAL_PAIR: 74,
    FACE_CARD_COMBO: 73,
    SINGLE_FACE_CARD_NO_POINT: 72,
    FLUSH_NO_POINT: 71,
}
SPECIAL_PAIR_RANKS = frozenset("A56T")

# Per unit of stake: a Player bet deducts 2 units (stake + held amount).
PLAYER_BET_DEDUCTED = 2
RETURN_WIN_PATTERN = 4  # 2:1 win: stake + held + 2
RETURN_WIN = 3  # 1:1 win: stake + held + 1
RETURN_TIE = 2  # push: stake + held
RETURN_LOSE = 1  # 1:1 loss: the held amount comes back
RETURN_LOSE_PATTERN = 0  # 2:1 loss: nothing comes back
PAIR_BET_WIN_RETURN = 12  # 11:1 plus the stake
PLAYER_BET_RETURNS = frozenset({0, 1, 2, 3, 4})
PAIR_BET_RETURNS = frozenset({0, 12})


class HandError(ValueError):
    """A hand that is not exactly two cards."""


@dataclass(frozen=True, slots=True)
class Hand:
    cards: tuple[Card, Card]
    points: int  # plain points, (sum of card points) mod 10
    tenths: int  # comparison key: points * 10, or 71..75 for a special combination
    combo: str | None
    flush: bool
    pair: bool

    @property
    def value(self) -> float | int:
        """0-9, or 7.1-7.5 for a special combination (as the events carry it)."""
        return self.points if self.combo is None else self.tenths / 10

    @property
    def has_pattern(self) -> bool:
        """A flush, a pair or any special combination: changes the odds, never the comparison."""
        return self.flush or self.pair or self.combo is not None

    def to_event_data(self) -> dict[str, Any]:
        return {
            "cards": [card.code for card in self.cards],
            "value": self.value,
            "combo": self.combo,
            "flush": self.flush,
            "pair": self.pair,
        }


def _special_combo(first: Card, second: Card, points: int, flush: bool, pair: bool) -> str | None:
    if points in (8, 9):  # 8 and 9 are never re-valued
        return None
    ranks = {first.rank, second.rank}
    if flush and ranks == {"A", "K"}:
        return AK_FLUSH
    if pair and first.rank in SPECIAL_PAIR_RANKS:
        return SPECIAL_PAIR
    if first.is_face and second.is_face:
        return FACE_CARD_COMBO
    if "T" in ranks and (first.is_face or second.is_face):
        return SINGLE_FACE_CARD_NO_POINT
    if flush and points == 0 and not first.is_face and not second.is_face:
        return FLUSH_NO_POINT
    return None


def evaluate_hand(cards: Iterable[Card | str]) -> Hand:
    """Evaluate a two-card hand given as Cards or card codes (any accepted spelling)."""
    parsed = tuple(parse_card(card) for card in cards)
    if len(parsed) != 2:
        raise HandError(f"a Pok Deng hand has exactly 2 cards, got {len(parsed)}")
    first, second = parsed
    points = (first.points + second.points) % 10
    flush = first.suit == second.suit
    pair = first.rank == second.rank
    combo = _special_combo(first, second, points, flush, pair)
    tenths = COMBO_TENTHS[combo] if combo else points * 10
    return Hand((first, second), points, tenths, combo, flush, pair)


def compare(player: Hand, banker: Hand) -> int:
    """1 when the Player hand wins, 0 on a tie, -1 when the Banker wins. Patterns don't count."""
    return (player.tenths > banker.tenths) - (player.tenths < banker.tenths)


@dataclass(frozen=True, slots=True)
class PositionResult:
    outcome: str  # "win" | "lose" | "tie", from the Player's view
    odds: str | None  # "1:1" | "2:1" | None on a tie
    player_bet_return: int  # per unit stake, of the 2 units deducted
    pair: bool  # the Player hand is a pair (yellow dot on the bead)
    pair_bet_return: int  # per unit stake of the Player Pair bet
    flush: bool  # the Player hand is a flush (outer ring on the bead)

    @property
    def bead(self) -> dict[str, Any]:
        """The roadmap bead: blue win / grey lose / green tie, flush ring, pair dot."""
        return {"result": self.outcome, "flush": self.flush, "pair": self.pair}

    def to_event_data(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "odds": self.odds,
            "player_bet_return": self.player_bet_return,
            "pair": self.pair,
            "pair_bet_return": self.pair_bet_return,
            "bead": self.bead,
        }


def player_win_pays_double(player: Hand, banker: Hand) -> bool:
    """Whether a winning Player hand is paid 2:1.

    A pattern pays 2:1, except against a Banker of exactly 0 or 6 points (after re-valuing),
    where it pays 1:1 — unless the Player has 8 or 9 points with a flush or a pair.
    """
    if not player.has_pattern:
        return False
    banker_zero_or_six = banker.combo is None and banker.points in (0, 6)
    if not banker_zero_or_six:
        return True
    return player.combo is None and player.points in (8, 9) and (player.flush or player.pair)


def settle(player: Hand, banker: Hand) -> PositionResult:
    """Settle Player N and Player N Pair for one position against the Banker."""
    pair_return = PAIR_BET_WIN_RETURN if player.pair else 0
    verdict = compare(player, banker)
    if verdict > 0:
        double = player_win_pays_double(player, banker)
        outcome, odds = "win", "2:1" if double else "1:1"
        returned = RETURN_WIN_PATTERN if double else RETURN_WIN
    elif verdict == 0:
        outcome, odds, returned = "tie", None, RETURN_TIE
    else:
        double = banker.has_pattern
        outcome, odds = "lose", "2:1" if double else "1:1"
        returned = RETURN_LOSE_PATTERN if double else RETURN_LOSE
    return PositionResult(outcome, odds, returned, player.pair, pair_return, player.flush)


def bead(player: Hand, banker: Hand) -> dict[str, Any]:
    """The roadmap bead of one position: result colour, flush ring, pair dot."""
    return settle(player, banker).bead


def round_result_data(hands: Mapping[str, Hand]) -> dict[str, Any]:
    """``hands`` and ``positions`` of a ``round_result`` event, from the six hands."""
    missing = [position for position in HAND_ORDER if position not in hands]
    if missing:
        raise HandError(f"round result needs every hand; missing {', '.join(missing)}")
    banker = hands["banker"]
    return {
        "hands": {position: hands[position].to_event_data() for position in HAND_ORDER},
        "positions": {
            position: settle(hands[position], banker).to_event_data() for position in POSITIONS
        },
    }
