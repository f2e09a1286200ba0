"""The dealer's buttons: new_shoe, start_round, reveal, cancel_round, end_shoe.

Each button checks that the procedure is where it may be pressed and, if not, rejects the
press with a reason for the dealer's screen; otherwise it takes the machine's step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from controller.table import drain, faults, software
from controller.table.inputs import Button, Supervisor
from controller.table.machine_state import MachineCore
from controller.table.procedure import STATE_WORDS

# Dealer buttons that still work while the table is paused.
BUTTONS_WHILE_PAUSED = frozenset({"cancel_round"})


class DealerButtons:
    """The dealer panel's side of one table machine."""

    def __init__(self, machine: MachineCore):
        self._machine = machine

    def on_button(self, inp: Button) -> None:
        if self._machine.hold == "paused" and inp.name not in BUTTONS_WHILE_PAUSED:
            self._machine._reject(
                inp, faults.TABLE_PAUSED,
                f"{inp.name} is not possible while the table is paused; resume first")
            return
        action = self._ACTIONS.get(inp.name)
        if action is not None:  # a name no script can hold (inputs checks them) does nothing
            action(self, inp)

    def _new_shoe(self, inp: Button) -> None:
        m = self._machine
        if m.state != "no_shoe":
            m._reject(inp, faults.NOT_ALLOWED,
                      f"shoe {m.shoe_number} is still open; end_shoe first")
        elif not m.devices["shoe"]:
            m._reject(inp, faults.SHOE_DISCONNECTED,
                      "the shoe is disconnected; reconnect it before new_shoe")
        else:
            m.shoe_number += 1
            m._reset_shoe()
            m.open_shoe()
            m._emit("shoe_started", software.shoe_started_data(m.software))

    def _start_round(self, inp: Button) -> None:
        m = self._machine
        if m.draining:
            m._reject(inp, faults.DRAINING, drain.REFUSAL)
        elif m.state != "ready":
            m._reject(inp, faults.NOT_ALLOWED,
                      f"start_round is not possible now: {STATE_WORDS[m.state]}")
        elif not m.devices["shoe"]:
            m._reject(inp, faults.SHOE_DISCONNECTED,
                      "the shoe is disconnected; reconnect it before start_round")
        else:
            m._open_round()

    def reveal(self, inp: Button | Supervisor) -> None:
        """The next hand, on a button-reveal table (the supervisor's panel reveal comes here)."""
        m = self._machine
        if m.settings.reveal != "button":
            m._reject(inp, faults.NOT_ALLOWED, "this table reveals the hands by itself")
        elif m.state != "revealing":
            m._reject(inp, faults.NOT_ALLOWED, f"nothing to reveal yet: {STATE_WORDS[m.state]}")
        else:
            m._reveal_next()

    def _cancel_round(self, inp: Button) -> None:
        self._machine._on_cancel_round(inp, "cancelled by the dealer")

    def _end_shoe(self, inp: Button) -> None:
        m = self._machine
        if m.state == "no_shoe":
            m._reject(inp, faults.NOT_ALLOWED, "no shoe is open")
        elif m.round is not None:
            m._reject(inp, faults.ROUND_OPEN, f"round {m.round.number} is open; cancel_round first")
        else:
            m._end_shoe_events("ended_by_dealer")
            m.close_shoe()

    _ACTIONS: ClassVar[dict[str, Callable[[DealerButtons, Button], None]]] = {
        "new_shoe": _new_shoe,
        "start_round": _start_round,
        "reveal": reveal,
        "cancel_round": _cancel_round,
        "end_shoe": _end_shoe,
    }
