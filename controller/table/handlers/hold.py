"""The hold (running ⇄ paused): its transitions, and when a paused table may resume.

The procedure freezes while the table is paused; this is the other of the machine's two
``transitions`` machines. Its conditions and callbacks, named in ``procedure.HOLD_TRANSITIONS``,
are this class's methods. A pause itself starts at ``TableMachine._fault``, which also decides
what a fault may say; here are the key switch, the betting countdown's freeze and restart, and
the rules for resuming.
"""

from __future__ import annotations

from typing import Any

from transitions import Machine

from controller.table import faults
from controller.table.events import iso_time
from controller.table.inputs import Switch
from controller.table.machine_state import MachineCore
from controller.table.procedure import HOLD_STATES, HOLD_TRANSITIONS, HoldTriggers
from controller.table.records import PauseReason


class _HoldModel(HoldTriggers):
    """The hold's model: transitions keeps its state and triggers here."""


class Hold:
    """One table's hold; the machine's ``hold`` is its state."""

    def __init__(self, machine: MachineCore):
        self._machine = machine
        self.model = _HoldModel()
        self.transitions = Machine(
            model=self.model,
            states=list(HOLD_STATES),
            transitions=[_bound(t, self) for t in HOLD_TRANSITIONS],
            initial="running",
            auto_transitions=False,
        )

    @property
    def state(self) -> str:
        return self.model.state

    def restore_paused(self) -> None:
        """Paused as a checkpoint says, without events: no fault happens now."""
        self.transitions.set_state("paused", model=self.model)

    # --- conditions (named after the rule they enforce) -------------------------------------

    def key_switch_at_run(self) -> bool:
        return not self._machine.switch_on

    def misread_card_entered(self) -> bool:
        return self._machine.card_owed != faults.MISREAD

    def shoe_back_if_cards_needed(self) -> bool:
        return self._machine.devices["shoe"] or not self._machine._needs_cards()

    # --- callbacks: the betting countdown stands still while paused -------------------------

    def freeze_countdown(self) -> None:
        m = self._machine
        if m.round is not None and m.round.betting_open and m.round.closes_at is not None:
            m.round.seconds_left = m.round.closes_at - m._now
            m.round.closes_at = None

    def restart_countdown(self) -> None:
        m = self._machine
        if m.round is not None and m.round.betting_open and m.round.seconds_left is not None:
            m.round.closes_at = m._now + m.round.seconds_left
            m.round.seconds_left = None

    # --- the supervisor's key switch ------------------------------------------------------

    def on_switch(self, inp: Switch) -> None:
        m = self._machine
        if inp.on == m.switch_on:
            return  # the same level again: not news
        m.switch_on = inp.on
        if inp.on:
            if self.state == "running":
                m._fault(faults.SWITCH_PAUSE, "the supervisor key switch is at PAUSE")
            return
        if self.state == "paused":
            blocker = self.blocker()
            if blocker:
                m._reject(inp, *blocker)
            else:
                self.resume()

    # --- resuming ---------------------------------------------------------------------------

    def blocker(self, *, ignore_owed: bool = False) -> tuple[str, str] | None:
        """(rejection code, reason) when the table cannot resume now, else None."""
        if not self.key_switch_at_run():
            return faults.KEY_AT_PAUSE, "the key switch is at PAUSE; turn it to RUN"
        if not ignore_owed and not self.misread_card_entered():
            return (faults.RESUME_BLOCKED,
                    "a misread card is not entered yet: supervisor enter_card, or cancel_round")
        if not self.shoe_back_if_cards_needed():
            return (faults.RESUME_BLOCKED,
                    "the shoe is still disconnected: reconnect it, or cancel_round")
        return None

    def resume(self) -> None:
        m = self._machine
        m.fault = None
        m.card_owed = None  # a ninth copy not entered by now was set aside
        if not self.model.resume_table():
            # Callers check blocker() first; reaching this is a bug, never a silent resume.
            raise RuntimeError(f"resume refused by the hold's conditions: {self.blocker()}")
        data: dict[str, Any] = {}
        if m.round is not None and m.round.closes_at is not None:
            data["betting_closes_at"] = iso_time(m.round.closes_at)
            data["betting_seconds_left"] = round(m.round.closes_at - m._now, 3)
        m._emit("resumed", data)

    def resume_if_key_at_run(self) -> None:
        """After a cancel or an end of shoe while paused the fault is settled: resume, unless
        the key still holds the table at PAUSE."""
        if self.state != "paused":
            return
        m = self._machine
        m.card_owed = None
        if m.switch_on:
            m.fault = PauseReason(faults.SWITCH_PAUSE, "the supervisor key switch is at PAUSE")
        else:
            self.resume()


def _bound(transition: dict[str, Any], owner: object) -> dict[str, Any]:
    """A transition whose named callbacks and conditions are ``owner``'s bound methods."""
    out = dict(transition)
    for key in ("conditions", "unless", "before", "after", "prepare"):
        names = out.get(key)
        if names:
            names = [names] if isinstance(names, str) else names
            out[key] = [getattr(owner, name) for name in names]
    return out
