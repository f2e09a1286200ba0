"""What the sealing tests look for: a card, a tag id or a raw frame named in text that left the
table while betting was open.

A card may be spelled many ways by whoever reads a screen or a log: ``QH``, ``HQ``, ``qh``,
``Q H``, ``Q♥``, ``10H`` or ``TH``, ``1S`` or ``AS``, ``Q of hearts``, ``queen of hearts``, and in
JSON text with its symbol escaped (``Q\\u2665``). ``Leaks`` knows them all and searches text
for them as whole tokens (not inside a longer word or number such as ``W0x2C``).

The suits' names in the screens' other languages count too (``Q ng puso``, ``hati Q``,
``ハートのQ``, ``Q دل``).

Two spellings are left out on purpose, because prose and units use them: the all-lower-case
two-letter words ``as``, ``ad``, ``ah`` (English) and ``sa`` (Filipino), and a digit rank, a
space and a lower-case suit letter (``5 s`` is five seconds). ``AS``, ``As``, ``SA``, ``A♠`` and
``5 S`` still count.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.rules.cards import Card, parse_card

_RANK_WORDS = {"A": ["A", "1", "ace"], "T": ["T", "10", "ten"], "J": ["J", "jack"],
               "Q": ["Q", "queen"], "K": ["K", "king"]}
_SUIT_LETTERS = {"S": "S", "H": "H", "D": "D", "C": "C"}
_SUIT_SYMBOLS = {"S": "♠♤", "H": "♥♡", "D": "♦♢", "C": "♣♧"}
_SUIT_WORDS = {"S": "spades?", "H": "hearts?", "D": "diamonds?", "C": "clubs?"}
#: the suits as the screens' other languages name them (Filipino, Malay, Persian, Japanese):
#: "Q ng puso", "hati Q", "Q دل", "ハートのQ" name a card as surely as "Q of hearts"
_SUIT_WORDS_ABROAD = {"S": "espada|ispada|sped|sekop|پیک|スペード",
                      "H": "puso|hati|lekuk|دل|ハート",
                      "D": "diyamante|diamante|wajik|berlian|خشت|ダイヤモンド|ダイヤ",
                      "C": "trebol|krus|kelawar|keriting|گشنیز|خاج|クラブ"}
_ENGLISH = {"as", "ad", "ah", "sa"}  # "sa": the Filipino preposition (the screens' words)
_EDGE_BEFORE = r"(?<![A-Za-z0-9])"
_EDGE_AFTER = r"(?![A-Za-z0-9])"


def _escaped(symbol: str) -> str:
    return re.escape(json.dumps(symbol)[1:-1])  # "\u2665" as JSON writes it


def card_pattern(card: Card | str) -> re.Pattern[str]:
    """Every spelling of one card, as whole tokens."""
    code = card if isinstance(card, str) else card.code
    rank, suit = code[0], code[1]
    ranks = _RANK_WORDS.get(rank, [rank])
    letter = _SUIT_LETTERS[suit]
    symbols = "|".join([re.escape(s) for s in _SUIT_SYMBOLS[suit]]
                       + [_escaped(s) for s in _SUIT_SYMBOLS[suit]])
    short = [r for r in ranks if len(r) <= 2]
    words = [r for r in ranks if len(r) > 2]
    rank_alt = "|".join(re.escape(r) for r in short)
    spellings = [
        rf"(?i:(?:{rank_alt}){letter})",                  # QH, qh, 10H
        rf"(?i:{letter}(?:{rank_alt}))",                  # HQ, h10
        rf"(?:{rank_alt})\s?(?:{symbols})",               # Q♥, Q ♥, Q\u2665
        rf"(?:{symbols})\s?(?:{rank_alt})",               # ♥Q
        rf"(?i:(?:{'|'.join(r for r in short if not r.isdigit()) or '(?!)'}) {letter})",
        rf"(?:{'|'.join(r for r in short if r.isdigit()) or '(?!)'}) {letter}",  # 5 S
        rf"(?i:(?:{'|'.join(map(re.escape, ranks + words))}) of {_SUIT_WORDS[suit]})",
    ]
    abroad = _SUIT_WORDS_ABROAD[suit]
    spellings += [  # Q ng puso, Q هاتی, ハートのQ, Qのハート
        rf"(?i:(?:{rank_alt})\s?(?:ng\s|の\s?)?(?:{abroad})(?!\w))",
        rf"(?i:(?<!\w)(?:{abroad})\s?(?:の\s?)?(?:{rank_alt}))",
    ]
    return re.compile(_EDGE_BEFORE + "(?:" + "|".join(spellings) + ")" + _EDGE_AFTER)


def _is_english(match: re.Match[str]) -> bool:
    return match.group(0) in _ENGLISH


@dataclass
class Leaks:
    """The secrets of one betting window, and a search for them in text."""

    cards: set[str] = field(default_factory=set)
    tags: set[str] = field(default_factory=set)
    frames: set[str] = field(default_factory=set)
    #: chain hashes a sealed record could have (plain chain: brute-forcing one names the card)
    hashes: set[str] = field(default_factory=set)
    #: texts that are no leak wherever they appear, read as "<known>" before a search: a
    #: test's random directory name (seal-24ju6_8d) in the paths a daemon logs can spell a card
    known: set[str] = field(default_factory=set)

    def add_card(self, card: Card | str) -> None:
        self.cards.add(card if isinstance(card, str) else parse_card(card.code).code)

    def add_tag(self, uid: str) -> None:
        self.tags.add(uid.upper())

    def add_frame(self, text: str) -> None:
        """A frame's text is a secret when it is long enough to be told apart from words."""
        if len(text.strip()) >= 6:
            self.frames.add(text.strip())

    def add_hashes(self, hashes: Iterable[str]) -> None:
        self.hashes.update(h.lower() for h in hashes)

    def add_known(self, text: str) -> None:
        self.known.add(text)

    def find(self, text: str) -> list[str]:
        """What of the secrets ``text`` names (empty when nothing)."""
        for known in sorted(self.known, key=len, reverse=True):
            text = text.replace(known, "<known>")
        found = []
        for code in sorted(self.cards):
            hits = [m.group(0) for m in card_pattern(code).finditer(text) if not _is_english(m)]
            if hits:
                found.append(f"card {code} as {hits[0]!r}")
        upper = text.upper()
        squeezed = re.sub(r"[:\- ]", "", upper)
        for tag in sorted(self.tags):
            if tag in upper or tag in squeezed:
                found.append(f"tag {tag}")
        for frame in sorted(self.frames):
            if frame in text or json.dumps(frame)[1:-1] in text:
                found.append(f"frame {frame!r}")
        if self.hashes:
            lower = text.lower()
            hits = [h for h in self.hashes if h in lower]
            if hits:
                found.append(f"the chain hash {hits[0][:12]}… of a record over a sealed card")
        return found

    def found_in(self, channel: str, payload: Any) -> list[str]:
        """What ``payload`` (text or JSON-able) names, each finding saying the channel and
        quoting the text (empty when nothing): a test that looks at many channels can list
        every leaking one before it fails."""
        texts = [payload] if isinstance(payload, str) else [
            json.dumps(payload, ensure_ascii=False), json.dumps(payload)]
        for text in texts:
            found = self.find(text)
            if found:
                return [f"{channel} names {found} while betting is open: {text[:600]}"]
        return []

    def check(self, channel: str, payload: Any) -> None:
        """Fail naming the channel when ``payload`` (text or JSON-able) names a secret."""
        found = self.found_in(channel, payload)
        assert not found, found[0]


def spellings_found(text: str, cards: Iterable[str]) -> list[str]:
    """Shorthand for a one-off search."""
    leaks = Leaks()
    for card in cards:
        leaks.add_card(card)
    return leaks.find(text)


def sealed_chain_hashes(journal_path: Path) -> set[str]:
    """Every plain chain hash that a record of the last round's betting window could have,
    whichever of the 52 cards each sealed card input held: the hash of each card input with each
    card in it, and of every later record of the window chained on top of it. The window runs
    from the round's ``round_opened`` to its ``betting_closed``/``round_cancelled`` (or the end).
    Anything a sealed record's plain hash can be compared with is in here, the true one too."""
    from controller.durability.journal import canonical_json, record_hash
    from controller.rules.cards import ALL_CARDS

    conn = sqlite3.connect(f"file:{journal_path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT n, kind, event_seq, written, body, prev_hash, hash "
                            "FROM records ORDER BY n").fetchall()
    finally:
        conn.close()
    opened = max(i for i, r in enumerate(rows)
                 if r[1] == "event" and json.loads(r[4])["type"] == "round_opened")
    end = next((i for i in range(opened + 1, len(rows)) if rows[i][1] == "event" and
                json.loads(rows[i][4])["type"] in ("betting_closed", "round_cancelled")),
               len(rows))
    window = rows[opened + 1:end]
    found: set[str] = set()
    for i, (n, kind, _seq, written, body, prev, _digest) in enumerate(window):
        data = json.loads(body)
        if kind != "input" or data.get("kind") != "card":
            continue
        for card in ALL_CARDS:
            digest = record_hash(n, kind, None, written, prev, canonical_json(
                dict(data, card=card.code)))
            found.add(digest)
            for later in window[i + 1:]:
                digest = record_hash(later[0], later[1], later[2], later[3], digest, later[4])
                found.add(digest)
    assert found, "no card input in the betting window: nothing to search for"
    return found
