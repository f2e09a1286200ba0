"""The table machine: enforces the shoe and round procedure and turns inputs into events.

Pure and single-owner: ``TableMachine.handle(input)`` returns the events that input caused.
No threads, no I/O, no wall clock: the clock is the input's ``at`` (table-clock seconds), and
the betting countdown fires when an input's ``at`` reaches its deadline, before that input is
handled, and its events carry the deadline's time. The daemon posts a ``Tick`` at
``next_deadline()`` so the countdown closes on time. Same inputs, byte-identical events.

Two orthogonal state machines (``transitions``, states and transitions as data in ``procedure``):

* the **procedure** — no_shoe → awaiting_flip → burning → ready ⇄ (betting → dealing →
  revealing) → ready … → no_shoe;
* the **hold** — running ⇄ paused. A pause (key switch, supervisor, or a fault) freezes the
  procedure where it is; ``cancel_round`` and supervisor ``end_shoe`` may still move it.

Sealed values: before a round's ``betting_closed`` no event, status field or log line at INFO
or above carries a card value of that round; ``card_dealt`` says only where a card went. A
fault's words never name such a card, nor what the shoe sent: that *evidence* (the card, the
raw frame, an RFID tag id) goes out in a ``fault_detail`` event — at once when no betting is
open, otherwise kept with the round and sent right after its ``betting_closed`` (or
``round_cancelled``), so the supervisor still learns which card it was. ``_fault`` is the one
place that decides.

Each kind of input has its part, in ``handlers/``: the shoe's in ``card_intake``, the dealer's
buttons in ``dealer_buttons``, the supervisor's commands in ``supervisor_commands``, the key
switch and the resume rules in ``hold``, devices, clock, backends and software in ``reports``.
The parts take the machine's steps below (``_emit``, ``_fault``, ``_reject``, opening,
revealing and ending) through ``machine_state.MachineCore``. The procedure's tables are in
``procedure``, the dealer's views in ``views``, checkpoints in ``checkpoint``; ``python -m
controller.table.generators.diagram`` draws docs/state-diagram.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from transitions import Machine

from controller.rules.cards import Card, ShoeComposition
from controller.rules.hands import HAND_ORDER, round_result_data
from controller.table import checkpoint, faults, views
from controller.table.events import iso_time, make_event
from controller.table.handlers.card_intake import CardIntake
from controller.table.handlers.dealer_buttons import DealerButtons
from controller.table.handlers.hold import Hold
from controller.table.handlers.reports import Reports
from controller.table.handlers.supervisor_commands import SupervisorCommands
from controller.table.inputs import (
    BackendStatus,
    Button,
    CardScan,
    ClockReport,
    ControllerFault,
    CutCard,
    DeviceStatus,
    Input,
    Misread,
    Software,
    Supervisor,
    Switch,
    Tick,
)
from controller.table.procedure import (
    PROCEDURE_STATES,
    PROCEDURE_TRANSITIONS,
    ROUND_STATES,
    SHOE_SETUP_STATES,
    STATE_WORDS,
    ProcedureTriggers,
)
from controller.table.records import REVEAL_MODES, MachineSettings, PauseReason, RoundState

# Callers build and restore the machine through this module.
__all__ = ["REVEAL_MODES", "MachineSettings", "PauseReason", "TableMachine"]

log = logging.getLogger(__name__)
# The daemon routes logs through its own handlers; alone (replay, tests) the machine is quiet.
log.addHandler(logging.NullHandler())


class TableMachine(ProcedureTriggers):
    """One table's procedure. Owned by one thread; ``handle`` is the only way in."""

    def __init__(self, settings: MachineSettings):
        self.settings = settings
        self.seq = 0
        self.clock = 0.0
        self.shoe_number = 0  # last shoe opened (the current one while open)
        self.rounds_total = 0  # rounds opened at this table, all shoes
        self.devices = {"shoe": True, "panel": True}
        self.backends_unreachable: dict[str, str] = {}  # transport -> why (docs/backend.md)
        self.switch_on = False
        self.fault: PauseReason | None = None
        self.last_fault: PauseReason | None = None
        # The fault (misread or ninth_copy) whose card the supervisor may enter by hand. A
        # misread also blocks resume: the card went somewhere and must be known.
        self.card_owed: str | None = None
        # The system clock as the controller last reported it (docs/clock.md).
        self.clock_sync = "unknown"
        self.last_clock_step: dict[str, Any] | None = None
        self.software: dict[str, str] | None = None  # the last software input (software.py)
        self.draining = False  # no new round starts (drain.py)
        self._reset_shoe()
        self._events: list[dict[str, Any]] = []
        self._now = 0.0
        self._procedure = Machine(
            model=self,
            states=list(PROCEDURE_STATES),
            transitions=PROCEDURE_TRANSITIONS,
            initial="no_shoe",
            auto_transitions=False,
            send_event=False,
        )
        # The hold is the other state machine, on a model of its own (handlers/hold.py).
        self._holding = Hold(self)
        self.pause_table = self._holding.model.pause_table
        # The parts that turn each kind of input into the machine's steps.
        cards = CardIntake(self)
        buttons = DealerButtons(self)
        reports = Reports(self)
        supervisor = SupervisorCommands(self, self._holding, cards, buttons)
        self._handlers: dict[type, Callable[[Any], None]] = {
            Button: buttons.on_button,
            CardScan: cards.on_card,
            CutCard: cards.on_cut_card,
            Misread: cards.on_misread,
            Switch: self._holding.on_switch,
            DeviceStatus: reports.on_device,
            Supervisor: supervisor.on_supervisor,
            ControllerFault: reports.on_controller_fault,
            BackendStatus: reports.on_backend,
            Tick: lambda inp: None,  # the clock moved; due timers already fired
            ClockReport: reports.on_clock,
            Software: reports.on_software,
        }

    @property
    def hold(self) -> str:
        """``running`` or ``paused``."""
        return self._holding.state

    def _reset_shoe(self) -> None:
        self.composition = ShoeComposition(self.settings.decks)
        self.burn_count: int | None = None
        self.burned = 0
        self.round_number = 0  # rounds opened in this shoe; the current round's number
        self.rounds_played = 0
        self.rounds_cancelled = 0
        self.cut_card_seen = False
        self.last_round = False  # the cut card is out: the current/next round is the last
        self.round: RoundState | None = None

    # --- the way in -----------------------------------------------------------------------

    def handle(self, inp: Input) -> list[dict[str, Any]]:
        """Fire timers due by ``inp.at``, then handle ``inp``; return the events, in order."""
        self._events = []
        # The clock never runs backwards: a late-stamped input is handled at the current time.
        at = max(float(inp.at), self.clock)
        self._fire_due_timers(at)
        self.clock = self._now = at
        self._handlers[type(inp)](inp)
        events, self._events = self._events, []
        return events

    def next_deadline(self) -> float | None:
        """Table-clock time of the next timer (betting close); None when none or paused."""
        if self.round is not None and self.hold == "running" and self.round.betting_open:
            return self.round.closes_at
        return None

    def _fire_due_timers(self, at: float) -> None:
        deadline = self.next_deadline()
        if deadline is not None and at >= deadline:
            self.clock = self._now = deadline
            self.close_betting()

    # --- events -----------------------------------------------------------------------------

    def _emit(self, type_: str, data: dict[str, Any] | None = None, *,
              round_: int | None | bool = True) -> None:
        self.seq += 1
        shoe = self.shoe_number if self.state != "no_shoe" or type_ == "shoe_ended" else None
        if round_ is True:
            round_ = self.round.number if self.round is not None else None
        self._events.append(make_event(
            self.settings.table_id, self.seq, self._now, type_, shoe, round_ or None, data or {}
        ))

    def _sealed(self) -> bool:
        """True while the open round's card values must not leave the table."""
        return self.round is not None and self.round.betting_open

    def _card_words(self, card: Card) -> str:
        return "a card" if self._sealed() else card.display()

    def _card_evidence(self, card: Card) -> dict[str, str] | None:
        """The card a sealed reason could not name, for its ``fault_detail``."""
        return {"card": card.code} if self._sealed() else None

    def _fault(self, code: str, reason: str, detail: dict[str, Any] | None = None,
               evidence: dict[str, str] | None = None) -> None:
        """Pause with a fault (or replace the shown fault when already paused).

        ``reason`` and ``detail`` go out now, so they never name a sealed card; ``evidence``
        (what the shoe sent) follows in a ``fault_detail`` event once it is not sealed."""
        fault = PauseReason(code, reason, detail)
        self.fault = self.last_fault = fault
        self.pause_table()
        log.warning("table paused: %s: %s", code, reason,
                    extra={"table": self.settings.table_id, "code": code})
        self._emit("paused", fault.to_dict())
        if evidence:
            held = {"code": code, "paused_seq": self.seq, "evidence": dict(evidence)}
            if self._sealed():
                assert self.round is not None
                self.round.sealed_evidence.append(held)
            else:
                self._emit("fault_detail", held)

    def _unseal_evidence(self) -> None:
        """The round's betting closed (or the round ended): what its faults held back goes out."""
        assert self.round is not None
        for held in self.round.sealed_evidence:
            self._emit("fault_detail", held)
        self.round.sealed_evidence.clear()

    def _reject(self, inp: Input, code: str, reason: str) -> None:
        data: dict[str, Any] = {"input": inp.kind, "code": code, "reason": reason}
        name = getattr(inp, "name", None) or getattr(inp, "action", None)
        if name is not None:
            data["name"] = name  # never the card of enter_card: it may be sealed
        log.info("input rejected: %s %s: %s", inp.kind, name or "", reason)
        self._emit("input_rejected", data)

    # --- conditions (named after the rule they enforce) -----------------------------------

    def burn_count_reached(self) -> bool:
        return self.burn_count is not None and self.burned >= self.burn_count

    def all_round_cards_dealt(self) -> bool:
        return self.round is not None and self.round.complete

    def is_last_round(self) -> bool:
        return self.last_round

    def _needs_cards(self) -> bool:
        """The procedure is waiting for cards from the shoe."""
        if self.state in SHOE_SETUP_STATES:
            return True
        return self.state in ROUND_STATES and self.round is not None and not self.round.complete

    # --- callbacks --------------------------------------------------------------------------

    def announce_burn_completed(self) -> None:
        self._emit("burn_completed", {"burned": self.burned})

    def announce_betting_closed(self) -> None:
        assert self.round is not None
        self.round.betting_open = False
        self.round.closes_at = None
        self._emit("betting_closed")
        self._unseal_evidence()

    def reveal_when_automatic(self) -> None:
        if self.settings.reveal == "auto":
            while self.state == "revealing":
                self._reveal_next()

    def announce_shoe_ended_by_cut_card(self) -> None:
        self._end_shoe_events("cut_card")

    # --- procedure steps ----------------------------------------------------------------------

    def _reveal_next(self) -> None:
        assert self.round is not None
        position = HAND_ORDER[len(self.round.revealed)]
        hand = self.round.hand(position)
        self.round.revealed[position] = hand
        self._emit("hand_revealed", {"position": position, **hand.to_event_data()})
        if len(self.round.revealed) == len(HAND_ORDER):
            data = round_result_data(self.round.revealed)
            data["last_round"] = self.last_round
            self.rounds_played += 1
            self._emit("round_result", data)
            self.round = None
            self.settle_round()

    def _end_shoe_events(self, reason: str) -> None:
        self._emit("shoe_ended", {
            "rounds": self.rounds_played,
            "rounds_cancelled": self.rounds_cancelled,
            "cards_drawn": self.composition.cards_drawn,
            "reason": reason,
        }, round_=None)
        self._reset_shoe()

    def _cancel_round(self, reason: str) -> None:
        assert self.round is not None
        self.rounds_cancelled += 1
        self._emit("round_cancelled", {"reason": reason, "refund_all": True})
        self._unseal_evidence()
        self.round = None
        self.cancel_open_round()

    def _open_round(self) -> None:
        self.round_number += 1
        self.rounds_total += 1
        closes_at = self._now + self.settings.betting_seconds
        self.round = RoundState(self.round_number, closes_at=closes_at)
        # The screen's "last fault" is per round: an old reason may name a card (legitimately,
        # outside any round) and must not sit on screen next to this round's sealed cards.
        self.last_fault = None
        self.open_round()
        self._emit("round_opened", {
            "betting_seconds": self.settings.betting_seconds,
            "betting_closes_at": iso_time(closes_at),
            "last_round": self.last_round,
        })

    def _on_cancel_round(self, inp: Input, reason: str) -> None:
        if self.round is None:
            self._reject(inp, faults.NOT_ALLOWED,
                         f"cancel_round is not possible now: {STATE_WORDS[self.state]}")
            return
        self._cancel_round(reason)
        self._holding.resume_if_key_at_run()

    # --- views (controller.table.views) ---------------------------------------------------

    def next_target(self) -> str | None:
        return views.next_target(self)

    def prompt(self) -> str:
        return views.prompt(self)

    def status(self) -> dict[str, Any]:
        return views.status(self)

    # --- checkpoints (controller.table.checkpoint) --------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """Small JSON-able state, valid between shoes only (no shoe open)."""
        return checkpoint.capture(self)

    @classmethod
    def from_checkpoint(cls, settings: MachineSettings, data: dict[str, Any]) -> TableMachine:
        checkpoint.check(settings, data)
        machine = cls(settings)
        checkpoint.restore(machine, data)
        return machine

    def restore_paused(self) -> None:
        """Paused as a checkpoint says, without events: no fault happens now."""
        self._holding.restore_paused()
