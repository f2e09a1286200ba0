"""What comes out of the shoe: cards, unreadable cards, unknown frames and the cut card.

Each is placed where the procedure expects it (flip, burn, a hand) or, out of place, paused on
with a fault. A card that left the shoe is counted in the shoe's composition whenever it is a
possible card, played or not, so the shoe's count stays true; an impossible one never is.
"""

from __future__ import annotations

import logging
from typing import Any

from controller.rules.cards import Card, ShoeCompositionError
from controller.table import faults
from controller.table.inputs import CardScan, CutCard, Misread
from controller.table.machine_state import MachineCore
from controller.table.procedure import ROUND_STATES, ROUND_TARGETS

# Logged as the machine: one logger for the table's procedure.
log = logging.getLogger("controller.table.machine")


class CardIntake:
    """The shoe's side of one table machine."""

    def __init__(self, machine: MachineCore):
        self._machine = machine

    def on_card(self, inp: CardScan) -> None:
        self.take_card(inp.card)

    def take_card(self, card: Card, *, entered: bool = False) -> None:
        """A card out of the shoe (or ``entered`` by the supervisor after a misread)."""
        m = self._machine
        if m.hold == "paused":
            self._set_aside(card)
            m._fault(faults.CARD_WHILE_PAUSED,
                     f"{m._card_words(card)} came out while the table is paused; "
                     "set it aside, then resume or cancel_round",
                     evidence=m._card_evidence(card))
            return
        if m.state == "no_shoe":
            m._fault(faults.CARD_NO_ROUND,
                     f"{card.display()} came out with no shoe open; set it aside, then resume")
            return
        try:
            m.composition.check_draw(card)
        except ShoeCompositionError:  # an impossible card is never counted
            self._impossible_card(card)
            return
        if m.state == "awaiting_flip":
            m.composition.draw(card)
            m.burn_count = card.burn_value
            m._emit("burn_card_shown", {"card": card.code, "burn_count": m.burn_count})
            m.show_flip_card()
        elif m.state == "burning":
            m.composition.draw(card)
            m.burned += 1
            m._emit("card_burned", {"number": m.burned, "burn_count": m.burn_count})
            if m.burn_count_reached():  # the last burn: the shoe is ready for rounds
                m.burn_shoe_card()
        elif m.state == "ready":
            m.composition.draw(card)
            m._fault(faults.CARD_NO_ROUND,
                     f"{card.display()} came out with no round open; set it aside, then resume")
        else:  # a round is open
            self._deal(card, entered)

    def _deal(self, card: Card, entered: bool) -> None:
        m = self._machine
        assert m.round is not None
        if m.round.complete:
            m.composition.draw(card)
            m._fault(faults.TOO_MANY_CARDS,
                     f"{m._card_words(card)} came out as a 14th card of round "
                     f"{m.round.number}; set it aside, then resume or cancel_round",
                     evidence=m._card_evidence(card))
            return
        m.composition.draw(card)
        index = len(m.round.cards)
        m.round.cards.append(card)
        data: dict[str, Any] = {"index": index, "target": ROUND_TARGETS[index]}
        if entered:
            data["entered"] = True  # typed in by the supervisor after a misread
        m._emit("card_dealt", data)
        if m.state == "dealing" and m.all_round_cards_dealt():
            m.deal_card()  # the last card after betting closed: reveal

    def _set_aside(self, card: Card) -> None:
        """A card out of play still left the shoe: count it when it is a possible card."""
        m = self._machine
        if m.state != "no_shoe":
            try:
                m.composition.draw(card)
            except ShoeCompositionError:
                pass  # impossible card: not counted, the fault says so

    def _impossible_card(self, card: Card) -> None:
        m = self._machine
        size = m.composition.size
        if m.composition.cards_drawn >= size:
            m._fault(faults.SHOE_OVERDRAWN,
                     f"{m._card_words(card)} would be card {m.composition.cards_drawn + 1}"
                     f" of a {size}-card shoe; check the reader, cancel_round and end_shoe",
                     evidence=m._card_evidence(card))
        else:
            if m._needs_cards():
                m.card_owed = faults.NINTH_COPY
            decks = m.settings.decks
            m._fault(faults.NINTH_COPY,
                     f"{m._card_words(card)} would be copy {decks + 1} of one "
                     f"card in a shoe of {decks} decks; supervisor enter_card "
                     "with the card drawn, or set it aside and resume, or cancel_round",
                     evidence=m._card_evidence(card))

    def on_misread(self, inp: Misread) -> None:
        if inp.code == faults.UNKNOWN_SHOE_FRAME:
            self._on_unknown_shoe_frame(inp)
            return
        m = self._machine
        detail = {k: v for k, v in (("code", inp.code), ("reason", inp.reason)) if v is not None}
        said = f" (shoe: {': '.join(detail.values())})" if detail else ""
        evidence = inp.evidence
        if m.hold == "paused":
            m._fault(faults.CARD_WHILE_PAUSED,
                     f"an unreadable card came out while the table is paused{said}; "
                     "set it aside, then resume or cancel_round", detail or None, evidence)
        elif m._needs_cards():
            m.card_owed = faults.MISREAD
            m._fault(faults.MISREAD,
                     f"the shoe could not read a card{said}; supervisor enter_card with that "
                     "card, or cancel_round", detail or None, evidence)
        elif m.state in ROUND_STATES:
            m._fault(faults.TOO_MANY_CARDS,
                     f"an unreadable 14th card came out{said}; set it aside, then resume "
                     "or cancel_round", detail or None, evidence)
        else:
            m._fault(faults.CARD_NO_ROUND,
                     f"an unreadable card came out with no round open{said}; set it aside, "
                     "then resume", detail or None, evidence)

    def _on_unknown_shoe_frame(self, inp: Misread) -> None:
        """A frame the driver does not know: during a shoe it may have been the cut card (a
        wrong ``cut_card_frames``), so the table stops rather than play past it."""
        m = self._machine
        if m.state == "no_shoe":
            log.info("an unknown shoe frame with no shoe open; ignored")
            return
        m._fault(faults.UNKNOWN_SHOE_FRAME,
                 "the shoe sent a frame this table does not know (the cut card, if "
                 "cut_card_frames is wrong?); check it, then resume, or end_shoe after the "
                 "round if it was the cut card", None, inp.evidence)

    def on_cut_card(self, inp: CutCard) -> None:
        m = self._machine
        if m.state == "no_shoe":
            m._fault(faults.CUT_CARD_NO_SHOE, "a cut card came out with no shoe open; resume")
        elif m.cut_card_seen:
            m._fault(faults.SECOND_CUT_CARD,
                     "a second cut card came out of this shoe; the last round is already set; "
                     "resume")
        else:
            m.cut_card_seen = m.last_round = True
            m._emit("cut_card_drawn", {"last_round": True})
