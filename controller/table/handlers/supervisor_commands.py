"""The supervisor's commands: pause, resume, drain, cancel_round, end_shoe, enter_card, reveal.

The supervisor may do what the dealer may not: resume a paused table, end a shoe with a round
open, type in a card the shoe could not read. When the input names who gave the command, the
events it causes carry that person (``by``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from controller.rules.cards import ShoeCompositionError
from controller.table import faults
from controller.table.handlers.card_intake import CardIntake
from controller.table.handlers.dealer_buttons import DealerButtons
from controller.table.handlers.hold import Hold
from controller.table.inputs import Supervisor
from controller.table.machine_state import MachineCore

# The events a supervisor action causes that carry who took it.
SUPERVISOR_ATTRIBUTED_EVENTS = frozenset(
    {"paused", "resumed", "round_cancelled", "shoe_ended", "card_dealt", "input_rejected",
     "hand_revealed", "drain_started", "drain_ended"})


class SupervisorCommands:
    """The supervisor's side of one table machine; it shares the hold, the shoe's intake (for
    an entered card) and the reveal button with the rest of the machine."""

    def __init__(self, machine: MachineCore, hold: Hold, cards: CardIntake,
                 buttons: DealerButtons):
        self._machine = machine
        self._hold = hold
        self._cards = cards
        self._buttons = buttons

    def on_supervisor(self, inp: Supervisor) -> None:
        """A supervisor action whose events say who took it (``by``), when the input does."""
        first = len(self._machine._events)  # events of timers fired before it are not its doing
        action = self._ACTIONS.get(inp.action)
        if action is not None:  # a name no script can hold (inputs checks them) does nothing
            action(self, inp)
        if inp.by is not None:
            for event in self._machine._events[first:]:
                if event["type"] in SUPERVISOR_ATTRIBUTED_EVENTS:
                    event["data"]["by"] = inp.by.to_dict()

    def _pause(self, inp: Supervisor) -> None:
        if self._hold.state == "paused":
            self._machine._reject(inp, faults.ALREADY_PAUSED, "the table is already paused")
        else:
            self._machine._fault(faults.SUPERVISOR_PAUSE, "paused by the supervisor")

    def _resume(self, inp: Supervisor) -> None:
        m = self._machine
        if m.draining:  # releases the drain only; a pause needs its own resume
            m.draining = False
            m._emit("drain_ended")
            return
        blocker = self._hold.blocker() if self._hold.state == "paused" else (
            faults.NOT_PAUSED, "the table is not paused")
        if blocker:
            m._reject(inp, *blocker)
        else:
            self._hold.resume()

    def _drain(self, inp: Supervisor) -> None:
        m = self._machine
        if m.draining:
            m._reject(inp, faults.NOT_ALLOWED, "the table is already draining")
        else:
            m.draining = True
            m._emit("drain_started", {"round_open": m.round is not None})

    def _cancel_round(self, inp: Supervisor) -> None:
        self._machine._on_cancel_round(inp, "cancelled by the supervisor")

    def _end_shoe(self, inp: Supervisor) -> None:
        m = self._machine
        if m.state == "no_shoe":
            m._reject(inp, faults.NOT_ALLOWED, "no shoe is open")
            return
        if m.round is not None:
            m._cancel_round("the supervisor ended the shoe")
        if m.state != "no_shoe":  # the cancelled round may have been the last
            m._end_shoe_events("ended_by_supervisor")
            m.close_shoe()
        self._hold.resume_if_key_at_run()

    def _enter_card(self, inp: Supervisor) -> None:
        m = self._machine
        assert inp.card is not None
        if not m.card_owed:
            m._reject(inp, faults.NO_CARD_OWED, "no misread card is waiting to be entered")
            return
        blocker = self._hold.blocker(ignore_owed=True)
        if blocker:
            m._reject(inp, *blocker)
            return
        try:
            m.composition.check_draw(inp.card)
        except ShoeCompositionError:
            m._reject(inp, faults.CARD_NOT_IN_SHOE,
                      "this shoe cannot hold another copy of the card entered (or is "
                      "used up); enter the card actually drawn, or cancel_round")
            return
        self._hold.resume()
        self._cards.take_card(inp.card, entered=True)

    def _reveal(self, inp: Supervisor) -> None:
        """The panel's reveal, for a button-reveal table that lost its panel: allowed exactly
        where the button would be."""
        if self._hold.state == "paused":
            self._machine._reject(
                inp, faults.TABLE_PAUSED,
                "reveal is not possible while the table is paused; resume first")
        else:
            self._buttons.reveal(inp)

    _ACTIONS: ClassVar[dict[str, Callable[[SupervisorCommands, Supervisor], None]]] = {
        "pause": _pause,
        "drain": _drain,
        "resume": _resume,
        "cancel_round": _cancel_round,
        "end_shoe": _end_shoe,
        "enter_card": _enter_card,
        "reveal": _reveal,
    }
