"""Card codes (docs/contracts.md "Card codes") and the composition of a shoe.

Canonical form: rank ``A 2 3 4 5 6 7 8 9 T J Q K`` then suit ``S H D C``, e.g. ``AS``, ``TH``.
Parsers also accept ``10`` for ``T``, lower case, suit-first (``H3``) and the suit symbols
``♠♥♦♣``. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

RANKS = "A23456789TJQK"
SUITS = "SHDC"
FACE_RANKS = frozenset("JQK")
SUIT_SYMBOLS = {"♠": "S", "♥": "H", "♦": "D", "♣": "C"}
DISPLAY_SUIT = {"S": "♠", "H": "♥", "D": "♦", "C": "♣"}
CARDS_PER_DECK = 52
DEFAULT_DECKS = 8
#: the most decks a table shoe holds (config, machine and `rtp --decks` share this bound)
MAX_DECKS = 8

ACCEPTED_FORMS = (
    "rank then suit (AS, TH, 10h, 7♣) or suit then rank (H3, ♠Q); "
    "ranks A 2-9 T/10 J Q K, suits S H D C or ♠ ♥ ♦ ♣, any case"
)


class CardCodeError(ValueError):
    """A card code that is not one of the accepted spellings."""

    def __init__(self, text: object, why: str):
        self.text = text
        super().__init__(f"bad card code {text!r}: {why}; accepted: {ACCEPTED_FORMS}")


@dataclass(frozen=True, order=True, slots=True)
class Card:
    rank: str  # one of RANKS
    suit: str  # one of SUITS

    def __post_init__(self) -> None:
        if self.rank not in RANKS or len(self.rank) != 1:
            raise CardCodeError(self.rank + self.suit, f"unknown rank {self.rank!r}")
        if self.suit not in SUITS or len(self.suit) != 1:
            raise CardCodeError(self.rank + self.suit, f"unknown suit {self.suit!r}")

    @property
    def code(self) -> str:
        return self.rank + self.suit

    @property
    def points(self) -> int:
        """Hand points: A = 1, 2-9 face value, 10/J/Q/K = 0."""
        index = RANKS.index(self.rank)
        return index + 1 if index < 9 else 0

    @property
    def burn_value(self) -> int:
        """How many cards the flip card orders burned: A = 1, 2-9 face value, 10/J/Q/K = 10."""
        index = RANKS.index(self.rank)
        return index + 1 if index < 9 else 10

    @property
    def is_face(self) -> bool:
        return self.rank in FACE_RANKS

    def display(self) -> str:
        """For people: ``10♥``, ``A♠``."""
        rank = "10" if self.rank == "T" else self.rank
        return rank + DISPLAY_SUIT[self.suit]

    def __str__(self) -> str:
        return self.code


def _split(text: str) -> tuple[str, str] | None:
    """Return (rank, suit) in canonical letters, or None when the shape is wrong."""
    cleaned = "".join(SUIT_SYMBOLS.get(ch, ch) for ch in text.strip()).upper()
    cleaned = cleaned.replace("10", "T")
    if len(cleaned) != 2:
        return None
    first, second = cleaned[0], cleaned[1]
    if first in RANKS and second in SUITS:
        return first, second
    if first in SUITS and second in RANKS:
        return second, first
    return None


def parse_card(text: object) -> Card:
    """Parse any accepted spelling of a card; raise CardCodeError quoting the bad text."""
    if isinstance(text, Card):
        return text
    if not isinstance(text, str):
        raise CardCodeError(text, f"expected a string, got {type(text).__name__}")
    if not text.strip():
        raise CardCodeError(text, "empty")
    split = _split(text)
    if split is None:
        raise CardCodeError(text, "not a rank and a suit")
    return Card(*split)


def format_card(card: Card | str) -> str:
    """The canonical code of a card given as a Card or any accepted spelling."""
    return parse_card(card).code


ALL_CARDS: tuple[Card, ...] = tuple(Card(rank, suit) for suit in SUITS for rank in RANKS)


class ShoeCompositionError(ValueError):
    """More copies of a card, or more cards, than the shoe can hold."""


class ShoeComposition:
    """Counts the cards drawn from an N-deck shoe and refuses impossible counts.

    An 8-deck shoe holds 416 cards, 8 of each of the 52 cards.
    """

    def __init__(self, decks: int = DEFAULT_DECKS):
        if decks < 1:
            raise ValueError(f"decks must be at least 1, got {decks}")
        self.decks = decks
        self.drawn: Counter[Card] = Counter()
        # read for every card: kept rather than recomputed (``_cards_drawn`` is drawn's sum)
        self._size = decks * CARDS_PER_DECK
        self._cards_drawn = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def cards_drawn(self) -> int:
        return self._cards_drawn

    @property
    def cards_left(self) -> int:
        return self.size - self.cards_drawn

    def remaining(self, card: Card) -> int:
        return self.decks - self.drawn[card]

    def check_draw(self, card: Card) -> None:
        """Raise ShoeCompositionError if drawing ``card`` is impossible in this shoe."""
        if self._cards_drawn >= self._size:
            raise ShoeCompositionError(
                f"{card.code} would be card {self.cards_drawn + 1} of a {self.size}-card shoe"
            )
        if self.drawn[card] >= self.decks:
            raise ShoeCompositionError(
                f"{card.code} would be copy {self.drawn[card] + 1} of {card.code} "
                f"in a {self.decks}-deck shoe"
            )

    def draw(self, card: Card) -> None:
        self.check_draw(card)
        self.drawn[card] += 1
        self._cards_drawn += 1


def new_shoe_cards(decks: int = DEFAULT_DECKS) -> list[Card]:
    """Every card of an unshuffled N-deck shoe, in a fixed order."""
    return [card for _ in range(decks) for card in ALL_CARDS]



# --- the spellings of vendors' tag tables ------------------------------------------------------

LENIENT_FORMS = (
    f"{ACCEPTED_FORMS}; also 1 for an ace (1s), words (ace of spades, 10 of hearts, "
    "queen hearts) and the white suit symbols ♤ ♡ ♢ ♧"
)
_RANK_WORDS = {
    "1": "A", "a": "A", "ace": "A", "t": "T", "10": "T", "ten": "T",
    "j": "J", "jack": "J", "q": "Q", "queen": "Q", "k": "K", "king": "K",
    **{str(n): str(n) for n in range(2, 10)},
    **{word: str(n) for n, word in enumerate(
        ("two", "three", "four", "five", "six", "seven", "eight", "nine"), start=2)},
}
_SUIT_WORDS = {
    **{word: letter for letter, words in (
        ("S", ("s", "spade", "spades", "♠", "♤")), ("H", ("h", "heart", "hearts", "♥", "♡")),
        ("D", ("d", "diamond", "diamonds", "♦", "♢")), ("C", ("c", "club", "clubs", "♣", "♧")))
        for word in words},
}
_LONGEST_WORD = 8


def _rank_and_suit(first: str, second: str) -> tuple[str, str] | None:
    """(rank, suit) when the two words are a rank and a suit in either order."""
    if first in _RANK_WORDS and second in _SUIT_WORDS:
        return _RANK_WORDS[first], _SUIT_WORDS[second]
    if first in _SUIT_WORDS and second in _RANK_WORDS:
        return _RANK_WORDS[second], _SUIT_WORDS[first]
    return None


def parse_lenient_card(text: object) -> Card:
    """A card as vendors write it in their tag tables: every ``parse_card`` spelling, plus
    ``1s`` for an ace, words (``ace of spades``, ``10 of hearts``, ``Queen Hearts``) and the
    white suit symbols. Anything else — a joker above all — raises CardCodeError saying what is
    accepted. For files a person wrote; shoe frames keep the strict ``parse_card``."""
    if isinstance(text, Card):
        return text
    if not isinstance(text, str):
        raise CardCodeError(text, f"expected a string, got {type(text).__name__}")
    words = text.strip().lower().replace("-", " ").replace("_", " ").split()
    if any("joker" in word for word in words):
        raise LenientCardError(text, "a joker is not a card of a Pok Deng shoe")
    try:
        return parse_card(text)
    except CardCodeError:
        pass
    if len(words) == 3 and words[1] == "of":
        words = [words[0], words[2]]
    found = None
    if len(words) == 2:
        found = _rank_and_suit(*words)
    elif len(words) == 1 and len(words[0]) <= 2 * _LONGEST_WORD:
        word = words[0]  # rank and suit run together: 1s, 10h, s1, acespades
        splits = {_rank_and_suit(word[:cut], word[cut:]) for cut in range(1, len(word))}
        splits.discard(None)
        found = splits.pop() if len(splits) == 1 else None
    if found is None:
        raise LenientCardError(text, "not a rank and a suit")
    return Card(*found)


class LenientCardError(CardCodeError):
    """A tag table's card that no accepted spelling matches; names the lenient forms."""

    def __init__(self, text: object, why: str):
        ValueError.__init__(self, f"{text!r} is not a card: {why}; accepted: {LENIENT_FORMS}")
        self.text = text
