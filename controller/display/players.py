"""What the players' pages (the scoreboard and the stream overlay) are told of the table.

The players' status is built from the dealer screen's view by keeping only what a player may
see: the round's progress, the countdown, the revealed hands (once betting closed), and
what a pause or a cancel means for their bets, as words' keys (``notice``). It never carries
a fault code, a person, a device or the dealer's next step: those stay on the dealer's feed,
and the journal keeps who did what.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

#: the dealer view's fields a player may see, as they are
PLAYER_FIELDS = ("table", "state", "shoe", "round", "rounds_played", "cards_left",
                 "last_round", "betting", "hands")
#: the words the players' pages use (keys and prefixes): never a fault's code, the dealer's
#: steps or the devices
PLAYER_WORDS = ("language", "seat.", "combo.", "flush", "pair", "points", "outcome.", "odds",
                "pair_won", "bead.", "legend.", "table", "shoe", "no_shoe", "round",
                "round_settled", "round_cancelled", "last_round", "last_results", "roadmap",
                "state.", "link.",
                "notice.", "call.", "result.", "shuffling", "shuffling.", "points.", "stats.",
                "limits.", "paytable.",
                "pay.", "game_id", "winner.")
#: the faults where the card is being checked and the round goes on once it is entered
CARD_CHECKS = frozenset({"misread", "ninth_copy", "unknown_shoe_frame"})
#: the states where a round is under way and its betting has closed: "no more bets"
BETTING_CLOSED = frozenset({"dealing", "revealing"})
#: the states where a round is open: a pause then holds it and its bets
ROUND_OPEN = BETTING_CLOSED | {"betting"}
#: the states between shoes: the stage shows the shuffle
BETWEEN_SHOES = frozenset({"no_shoe", "awaiting_flip", "burning"})
#: table seconds the shoe's last result stays on the stage before the shuffle (its result and
#: the shoe's end come in one batch; any other result stays until the next call)
LAST_RESULT_HOLD_S = 10.0


class RoundMemory(Protocol):
    """What the screen remembers of published events that the players' status needs."""

    cancelled_round: int | None
    opened_since: bool
    settled_at: float | None  # the table clock at the newest result, if a settled round's

    def game_id(self, shoe: object, round_: object) -> str | None: ...


def notice(view: Mapping[str, Any], memory: RoundMemory) -> dict[str, Any] | None:
    """What happened and what it means for the bets, as words' key and arguments: a cancel
    (all bets refunded) until the next round's result, a pause (the round continues, or
    between rounds the table waits); a pause in the round after a cancel is the news of the
    moment."""
    cancelled = None
    if memory.cancelled_round is not None:
        cancelled = {"kind": "cancelled", "key": "notice.cancelled",
                     "args": {"n": memory.cancelled_round}}
    banner = view.get("banner")
    if cancelled and not (banner and memory.opened_since):
        return cancelled
    if not banner:
        return None
    if view.get("state") not in ROUND_OPEN:  # between rounds: no round goes on, no bet stands
        key = "notice.table_paused"
    elif banner.get("fault") in CARD_CHECKS:
        key = "notice.misread"
    else:
        key = "notice.paused"
    return {"kind": "paused", "key": key, "args": {}}


def last_result_hold(view: Mapping[str, Any], memory: RoundMemory, now: object) -> float:
    """Table seconds the shoe's last result still stays on the stage (0: none): between
    shoes, the newest result a settled round's, until ``LAST_RESULT_HOLD_S`` after it or the
    next shoe's start (which clears the results)."""
    if (view.get("state") not in BETWEEN_SHOES or memory.settled_at is None
            or not isinstance(now, (int, float)) or isinstance(now, bool)):
        return 0.0
    return max(0.0, memory.settled_at + LAST_RESULT_HOLD_S - float(now))


def call(view: Mapping[str, Any]) -> str | None:
    """The dealer's call to the players: place your bets, no more bets, or nothing."""
    if view.get("banner"):
        return None
    if (view.get("betting") or {}).get("open"):
        return "call.place_bets"
    if view.get("state") in BETTING_CLOSED:
        return "call.no_more_bets"
    return None


def players_words(catalogue: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """Each language's words that the players' pages show (``PLAYER_WORDS``)."""
    return {lang: {key: text for key, text in words.items()
                   if key in PLAYER_WORDS or key.startswith(tuple(
                       p for p in PLAYER_WORDS if p.endswith(".")))}
            for lang, words in catalogue.items()}


def players_view(view: Mapping[str, Any], memory: RoundMemory,
                 now: object = None) -> dict[str, Any]:
    """The players' status from the dealer screen's view (``Screen.view``); ``now``: the
    table clock."""
    shown = {name: view.get(name) for name in PLAYER_FIELDS}
    shown["result_held"] = last_result_hold(view, memory, now) > 0
    shown["paused"] = bool(view.get("banner"))
    shown["notice"] = notice(view, memory)
    shown["call"] = call(view)
    shown["game"] = memory.game_id(view.get("shoe"), view.get("round"))
    return shown
