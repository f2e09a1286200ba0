"""Every word the dealer display, the scoreboard and ``pokdeng-table watch`` show, in the
table's languages: English, Filipino, Malay, Persian, Japanese, and any other a catalogue file
adds (controller/display/catalogues.py reads them: ``controller/display/locales/<code>.po``).

The game's terms are the rule sheets' (docs/rules.md §5 for the English names; the Filipino,
Malay, Persian and Japanese sheets for theirs): Player/Manlalaro/Pemain/بازیکن/プレイヤー, the
five combinations, win/lose/tie, the odds. The catalogue is the one source: the pages get it
in the feed's ``state`` message and translate in the browser (so a page can ask for another
language with ``?lang=``); ``watch`` and the feed's English ``step`` use ``say`` here.

A key missing from a shipped language is an error (tests/display/test_words.py), never an
English word on a Japanese screen; an added catalogue that lacks keys English has (an upgrade
added them) shows those words in English, and ``BEHIND_ENGLISH`` names them.
Placeholders are ``{name}``, the same in every language.

``step(status)`` is the one source of the dealer's next step: the key and its arguments,
built from the sealed status only (never a card of a round whose betting is open).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.display import catalogues
from controller.display.catalogues import PLACEHOLDER, placeholders  # noqa: F401  (API)
from controller.rules.hands import HAND_ORDER
from controller.table.faults import FAULTS
from controller.table.procedure import CARDS_PER_ROUND

_LOADED = catalogues.load()
#: each language's words, by key: the catalogue files (controller/display/locales/*.po)
CATALOGUE: dict[str, dict[str, str]] = {
    code: c.words for code, c in _LOADED.catalogues.items()}
#: the table's languages: English first, then by code
LANGUAGES = tuple(CATALOGUE)
#: each language's name in English (its catalogue's Language-Team)
LANGUAGE_NAMES = {code: c.name for code, c in _LOADED.catalogues.items()}
RTL = frozenset(code for code, c in _LOADED.catalogues.items() if c.rtl)
#: a catalogue file that is not offered, and why (file and line): the config names it
PROBLEMS: dict[str, list[str]] = _LOADED.problems
#: an offered language's keys it lacks, shown in English: config check, the daemon and
#: watch warn of them
BEHIND_ENGLISH: dict[str, list[str]] = _LOADED.behind
EN = CATALOGUE[catalogues.SOURCE]
DEALT_PER_ROUND = CARDS_PER_ROUND - 1  # the burn is not "dealt": 12 cards to the hands

#: the fault codes the table's screens explain (controller/table/faults.py); others: "fault"
FAULT_CODES = (*FAULTS, "fault")


def language(code: object) -> str:
    """A known language code (``fil``, ``ms``…), or ``en`` for anything else."""
    return code if isinstance(code, str) and code in CATALOGUE else "en"


def behind_english(code: str) -> str | None:
    """The warning for a language whose catalogue lacks words English has, naming each
    (None: it has them all)."""
    lacks = BEHIND_ENGLISH.get(code)
    if not lacks:
        return None
    path = _LOADED.catalogues[code].path
    return (f"the {code} catalogue ({path}) lacks {len(lacks)} of English's words, shown in "
            f"English: {', '.join(lacks)}")


def fault_key(status: Mapping[str, Any]) -> str:
    """The words' key for what stops the table (``fault.<key>``): its fault's code when the
    screens explain it, ``journal_unwritable`` for a storage fault, else ``fault``."""
    fault = status.get("fault")
    code = (fault.get("code") if isinstance(fault, Mapping) else None) or (
        "journal_unwritable" if status.get("storage_fault") else "fault")
    return code if code in FAULT_CODES else "fault"


def say(lang: str, key: str, **args: object) -> str:
    """The words for ``key`` in ``lang`` with its placeholders filled (an added catalogue's
    missing words are English's, filled in at load). A key English lacks raises KeyError:
    the tests find it."""
    text = CATALOGUE[language(lang)][key]
    return PLACEHOLDER.sub(lambda m: str(args.get(m.group(1), m.group(0))), text)


def seat_words(lang: str, seat: str) -> str:
    """``P3`` -> "Player 3" (Manlalaro 3, …); ``banker``, ``burn``, ``flip``."""
    if seat.startswith("P") and seat[1:].isdigit():
        return say(lang, "seat.P", n=seat[1:])
    return say(lang, f"seat.{seat}")


def step(status: Mapping[str, Any]) -> dict[str, Any]:
    """The dealer's next step as ``{"key": …, "args": {…}}`` (a seat as ``{"seat": "P2"}``,
    "which" as ``first``/``second``): the one source the pages and ``watch`` translate."""
    state = status.get("state")
    if status.get("storage_fault"):
        return {"key": "step.storage", "args": {}}
    if state in ("starting", "stopped"):
        return {"key": f"step.{state}", "args": {}}
    if status.get("paused"):
        return {"key": "step.paused", "args": {}}
    target = status.get("next_target")
    index = status.get("cards_dealt")
    if state in ("betting", "dealing") and isinstance(target, str):
        if target == "burn":
            return {"key": "step.burn_one", "args": {}}
        if isinstance(index, int) and not isinstance(index, bool) and index >= 1:
            which = "first" if index <= len(HAND_ORDER) else "second"
            return {"key": "step.deal", "args": {"n": index, "of": DEALT_PER_ROUND,
                                                 "seat": target, "which": which}}
        return {"key": "step.deal_to", "args": {"seat": target}}
    if status.get("betting_open") and target is None:
        return {"key": "step.all_dealt", "args": {}}
    if state in ("no_shoe", "ready") and status.get("drained"):
        return {"key": "step.draining", "args": {}}
    shoe_up = (status.get("devices") or {}).get("shoe", True) is not False
    if state == "no_shoe":
        return {"key": "step.new_shoe" if shoe_up else "step.new_shoe_reconnect", "args": {}}
    if state == "awaiting_flip":
        return {"key": "step.flip", "args": {}}
    if state == "burning":
        left = status.get("burn_remaining")
        if isinstance(left, int) and left > 0:
            return {"key": "step.burn_more", "args": {"n": left}}
        return {"key": "step.burn_one", "args": {}}
    if state == "ready":
        if not shoe_up:
            return {"key": "step.start_round_reconnect", "args": {}}
        return {"key": "step.start_round_last" if status.get("last_round")
                else "step.start_round", "args": {}}
    if state == "revealing":
        shown = len(status.get("hands") or {})
        if shown < len(HAND_ORDER):
            return {"key": "step.reveal", "args": {"seat": HAND_ORDER[shown]}}
    return {"key": "step.wait", "args": {}}


def step_words(lang: str, status: Mapping[str, Any]) -> str:
    """The dealer's next step in words: "deal card 7 of 12: Player 2, second card"."""
    return words_of(lang, step(status))


def words_of(lang: str, message: Mapping[str, Any]) -> str:
    """A ``{"key", "args"}`` message in ``lang`` (seats and "which" translated too)."""
    args = dict(message.get("args") or {})
    if isinstance(args.get("seat"), str):
        args["seat"] = seat_words(lang, args["seat"])
    if args.get("which") in ("first", "second"):
        args["which"] = say(lang, f"card.{args['which']}")
    return say(lang, str(message["key"]), **args)
