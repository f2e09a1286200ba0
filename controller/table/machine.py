"""The table machine: enforces the shoe and round procedure and turns inputs into events.

Pure and single-owner: ``TableMachine.handle(input)`` returns the events that input caused.
No threads, no I/O, no wall clock: the clock is the input's ``at`` (table-clock seconds), and
the betting countdown fires when an input's ``at`` reaches its deadline, before that input is
handled, and its events carry the deadline's time. The daemon posts a ``Tick`` at
``next_deadline()`` so the countdown closes on time. Same inputs, byte-identical events.

Two orthogonal state machines (``transitions``, states and transitions as data below):

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

The procedure's tables are in ``procedure``, the dealer's views in ``views``, checkpoints in
``checkpoint``; ``python -m controller.table.diagram`` draws docs/state-diagram.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

from transitions import Machine

from controller.rules.cards import Card, ShoeComposition, ShoeCompositionError
from controller.rules.hands import HAND_ORDER, round_result_data
from controller.table import checkpoint, drain, faults, software, views
from controller.table.events import iso_time, make_event
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
    HOLD_STATES,
    HOLD_TRANSITIONS,
    PROCEDURE_STATES,
    PROCEDURE_TRANSITIONS,
    ROUND_STATES,
    ROUND_TARGETS,
    SHOE_SETUP_STATES,
    STATE_WORDS,
    HoldTriggers,
    ProcedureTriggers,
)
from controller.table.records import REVEAL_MODES, MachineSettings, PauseReason, RoundState

# Callers build and restore the machine through this module.
__all__ = ["REVEAL_MODES", "MachineSettings", "PauseReason", "TableMachine"]

log = logging.getLogger(__name__)
# The daemon routes logs through its own handlers; alone (replay, tests) the machine is quiet.
log.addHandler(logging.NullHandler())

# The events a supervisor action causes that carry who took it.
SUPERVISOR_ATTRIBUTED_EVENTS = frozenset(
    {"paused", "resumed", "round_cancelled", "shoe_ended", "card_dealt", "input_rejected",
     "hand_revealed", "drain_started", "drain_ended"})
# Dealer buttons that still work while the table is paused.
BUTTONS_WHILE_PAUSED = frozenset({"cancel_round"})


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
        # The hold has its own small model; its callbacks are this machine's methods.
        self._hold_model = _HoldModel()
        self._hold = Machine(
            model=self._hold_model,
            states=list(HOLD_STATES),
            transitions=[_bound(t, self) for t in HOLD_TRANSITIONS],
            initial="running",
            auto_transitions=False,
        )
        self.pause_table = self._hold_model.pause_table
        self.resume_table = self._hold_model.resume_table

    @property
    def hold(self) -> str:
        """``running`` or ``paused``."""
        return self._hold_model.state

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
        handler = self._HANDLERS[type(inp)]
        handler(self, inp)
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

    def key_switch_at_run(self) -> bool:
        return not self.switch_on

    def misread_card_entered(self) -> bool:
        return self.card_owed != faults.MISREAD

    def shoe_back_if_cards_needed(self) -> bool:
        return self.devices["shoe"] or not self._needs_cards()

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

    def freeze_countdown(self) -> None:
        if self.round is not None and self.round.betting_open and self.round.closes_at is not None:
            self.round.seconds_left = self.round.closes_at - self._now
            self.round.closes_at = None

    def restart_countdown(self) -> None:
        if (self.round is not None and self.round.betting_open
                and self.round.seconds_left is not None):
            self.round.closes_at = self._now + self.round.seconds_left
            self.round.seconds_left = None

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

    def _resume_if_key_at_run(self) -> None:
        """After a cancel or an end of shoe while paused the fault is settled: resume, unless
        the key still holds the table at PAUSE."""
        if self.hold != "paused":
            return
        self.card_owed = None
        if self.switch_on:
            self.fault = PauseReason(faults.SWITCH_PAUSE, "the supervisor key switch is at PAUSE")
        else:
            self._resume()

    def _resume(self) -> None:
        self.fault = None
        self.card_owed = None  # a ninth copy not entered by now was set aside
        if not self.resume_table():
            # Callers check _resume_blocker first; reaching this is a bug, never a silent resume.
            raise RuntimeError(f"resume refused by the hold's conditions: {self._resume_blocker()}")
        data: dict[str, Any] = {}
        if self.round is not None and self.round.closes_at is not None:
            data["betting_closes_at"] = iso_time(self.round.closes_at)
            data["betting_seconds_left"] = round(self.round.closes_at - self._now, 3)
        self._emit("resumed", data)

    def _resume_blocker(self, *, ignore_owed: bool = False) -> tuple[str, str] | None:
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

    # --- input handlers ---------------------------------------------------------------------

    def _on_card(self, inp: CardScan) -> None:
        self._take_card(inp.card)

    def _take_card(self, card: Card, *, entered: bool = False) -> None:
        if self.hold == "paused":
            self._set_aside(card)
            self._fault(faults.CARD_WHILE_PAUSED,
                        f"{self._card_words(card)} came out while the table is paused; "
                        "set it aside, then resume or cancel_round",
                        evidence=self._card_evidence(card))
            return
        if self.state == "no_shoe":
            self._fault(faults.CARD_NO_ROUND,
                        f"{card.display()} came out with no shoe open; set it aside, then resume")
            return
        try:
            self.composition.check_draw(card)
        except ShoeCompositionError:  # an impossible card is never counted
            self._impossible_card(card)
            return
        if self.state == "awaiting_flip":
            self.composition.draw(card)
            self.burn_count = card.burn_value
            self._emit("burn_card_shown", {"card": card.code, "burn_count": self.burn_count})
            self.show_flip_card()
        elif self.state == "burning":
            self.composition.draw(card)
            self.burned += 1
            self._emit("card_burned", {"number": self.burned, "burn_count": self.burn_count})
            if self.burn_count_reached():  # the last burn: the shoe is ready for rounds
                self.burn_shoe_card()
        elif self.state == "ready":
            self.composition.draw(card)
            self._fault(faults.CARD_NO_ROUND,
                        f"{card.display()} came out with no round open; "
                        "set it aside, then resume")
        else:  # a round is open
            assert self.round is not None
            if self.round.complete:
                self.composition.draw(card)
                self._fault(faults.TOO_MANY_CARDS,
                            f"{self._card_words(card)} came out as a 14th card of round "
                            f"{self.round.number}; set it aside, then resume or cancel_round",
                            evidence=self._card_evidence(card))
                return
            self.composition.draw(card)
            index = len(self.round.cards)
            self.round.cards.append(card)
            data: dict[str, Any] = {"index": index, "target": ROUND_TARGETS[index]}
            if entered:
                data["entered"] = True  # typed in by the supervisor after a misread
            self._emit("card_dealt", data)
            if self.state == "dealing" and self.all_round_cards_dealt():
                self.deal_card()  # the last card after betting closed: reveal

    def _set_aside(self, card: Card) -> None:
        """A card out of play still left the shoe: count it when it is a possible card."""
        if self.state != "no_shoe":
            try:
                self.composition.draw(card)
            except ShoeCompositionError:
                pass  # impossible card: not counted, the fault says so

    def _impossible_card(self, card: Card) -> None:
        size = self.composition.size
        if self.composition.cards_drawn >= size:
            self._fault(faults.SHOE_OVERDRAWN,
                        f"{self._card_words(card)} would be card {self.composition.cards_drawn + 1}"
                        f" of a {size}-card shoe; check the reader, cancel_round and end_shoe",
                        evidence=self._card_evidence(card))
        else:
            if self._needs_cards():
                self.card_owed = faults.NINTH_COPY
            self._fault(faults.NINTH_COPY,
                        f"{self._card_words(card)} would be copy {self.settings.decks + 1} of one "
                        f"card in a shoe of {self.settings.decks} decks; supervisor enter_card "
                        "with the card drawn, or set it aside and resume, or cancel_round",
                        evidence=self._card_evidence(card))

    def _on_misread(self, inp: Misread) -> None:
        if inp.code == faults.UNKNOWN_SHOE_FRAME:
            self._on_unknown_shoe_frame(inp)
            return
        detail = {k: v for k, v in (("code", inp.code), ("reason", inp.reason)) if v is not None}
        said = f" (shoe: {': '.join(detail.values())})" if detail else ""
        evidence = inp.evidence
        if self.hold == "paused":
            self._fault(faults.CARD_WHILE_PAUSED,
                        f"an unreadable card came out while the table is paused{said}; "
                        "set it aside, then resume or cancel_round", detail or None, evidence)
        elif self._needs_cards():
            self.card_owed = faults.MISREAD
            self._fault(faults.MISREAD,
                        f"the shoe could not read a card{said}; supervisor enter_card with that "
                        "card, or cancel_round", detail or None, evidence)
        elif self.state in ROUND_STATES:
            self._fault(faults.TOO_MANY_CARDS,
                        f"an unreadable 14th card came out{said}; set it aside, then resume "
                        "or cancel_round", detail or None, evidence)
        else:
            self._fault(faults.CARD_NO_ROUND,
                        f"an unreadable card came out with no round open{said}; set it aside, "
                        "then resume", detail or None, evidence)

    def _on_unknown_shoe_frame(self, inp: Misread) -> None:
        """A frame the driver does not know: during a shoe it may have been the cut card (a
        wrong ``cut_card_frames``), so the table stops rather than play past it."""
        if self.state == "no_shoe":
            log.info("an unknown shoe frame with no shoe open; ignored")
            return
        self._fault(faults.UNKNOWN_SHOE_FRAME,
                    "the shoe sent a frame this table does not know (the cut card, if "
                    "cut_card_frames is wrong?); check it, then resume, or end_shoe after the "
                    "round if it was the cut card", None, inp.evidence)

    def _on_cut_card(self, inp: CutCard) -> None:
        if self.state == "no_shoe":
            self._fault(faults.CUT_CARD_NO_SHOE, "a cut card came out with no shoe open; resume")
        elif self.cut_card_seen:
            self._fault(faults.SECOND_CUT_CARD,
                        "a second cut card came out of this shoe; the last round is already set; "
                        "resume")
        else:
            self.cut_card_seen = self.last_round = True
            self._emit("cut_card_drawn", {"last_round": True})

    def _on_switch(self, inp: Switch) -> None:
        if inp.on == self.switch_on:
            return  # the same level again: not news
        self.switch_on = inp.on
        if inp.on:
            if self.hold == "running":
                self._fault(faults.SWITCH_PAUSE, "the supervisor key switch is at PAUSE")
            return
        if self.hold == "paused":
            blocker = self._resume_blocker()
            if blocker:
                self._reject(inp, *blocker)
            else:
                self._resume()

    def _on_device(self, inp: DeviceStatus) -> None:
        if self.devices[inp.name] == inp.connected:
            return  # the same level again: not news
        self.devices[inp.name] = inp.connected
        self._emit("device_status", {"device": inp.name, "connected": inp.connected})
        if inp.name == "shoe" and not inp.connected and self._needs_cards():
            self._fault(faults.SHOE_LOST,
                        "the shoe disconnected while cards are still needed; reconnect it, "
                        "then resume, or cancel_round")

    def _on_clock(self, inp: ClockReport) -> None:
        if inp.sync == self.clock_sync and inp.step_s is None:
            return  # the same state again: not news
        self.clock_sync = inp.sync
        if inp.step_s is not None:
            self.last_clock_step = {"seconds": inp.step_s, "time": iso_time(self._now)}
        self._emit("clock_status", inp.data())

    def _on_backend(self, inp: BackendStatus) -> None:
        """A backend's delivery state: recorded and sent on, never a pause (the table deals
        on; the outbox catches up)."""
        if inp.reachable and inp.name in self.backends_unreachable:
            del self.backends_unreachable[inp.name]
            self._emit("backend_restored", {"transport": inp.name, "reason": inp.reason})
        elif not inp.reachable and inp.name not in self.backends_unreachable:
            self.backends_unreachable[inp.name] = inp.reason
            self._emit("backend_unreachable", {"transport": inp.name, "reason": inp.reason})

    def _on_button(self, inp: Button) -> None:
        if self.hold == "paused" and inp.name not in BUTTONS_WHILE_PAUSED:
            self._reject(inp, faults.TABLE_PAUSED,
                         f"{inp.name} is not possible while the table is paused; resume first")
            return
        action = self._BUTTON_ACTIONS.get(inp.name)
        if action is not None:  # a name no script can hold (inputs checks them) does nothing
            action(self, inp)

    def _button_new_shoe(self, inp: Button) -> None:
        if self.state != "no_shoe":
            self._reject(inp, faults.NOT_ALLOWED,
                         f"shoe {self.shoe_number} is still open; end_shoe first")
        elif not self.devices["shoe"]:
            self._reject(inp, faults.SHOE_DISCONNECTED,
                         "the shoe is disconnected; reconnect it before new_shoe")
        else:
            self.shoe_number += 1
            self._reset_shoe()
            self.open_shoe()
            self._emit("shoe_started", software.shoe_started_data(self.software))

    def _button_start_round(self, inp: Button) -> None:
        if self.draining:
            self._reject(inp, faults.DRAINING, drain.REFUSAL)
        elif self.state != "ready":
            self._reject(inp, faults.NOT_ALLOWED,
                         f"start_round is not possible now: {STATE_WORDS[self.state]}")
        elif not self.devices["shoe"]:
            self._reject(inp, faults.SHOE_DISCONNECTED,
                         "the shoe is disconnected; reconnect it before start_round")
        else:
            self._open_round()

    def _button_reveal(self, inp: Button | Supervisor) -> None:
        if self.settings.reveal != "button":
            self._reject(inp, faults.NOT_ALLOWED, "this table reveals the hands by itself")
        elif self.state != "revealing":
            self._reject(inp, faults.NOT_ALLOWED,
                         f"nothing to reveal yet: {STATE_WORDS[self.state]}")
        else:
            self._reveal_next()

    def _button_cancel_round(self, inp: Button) -> None:
        self._on_cancel_round(inp, "cancelled by the dealer")

    def _button_end_shoe(self, inp: Button) -> None:
        if self.state == "no_shoe":
            self._reject(inp, faults.NOT_ALLOWED, "no shoe is open")
        elif self.round is not None:
            self._reject(inp, faults.ROUND_OPEN,
                         f"round {self.round.number} is open; cancel_round first")
        else:
            self._end_shoe_events("ended_by_dealer")
            self.close_shoe()

    _BUTTON_ACTIONS: ClassVar[dict[str, Callable[[TableMachine, Button], None]]] = {
        "new_shoe": _button_new_shoe,
        "start_round": _button_start_round,
        "reveal": _button_reveal,
        "cancel_round": _button_cancel_round,
        "end_shoe": _button_end_shoe,
    }

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
        self._resume_if_key_at_run()

    def _on_supervisor(self, inp: Supervisor) -> None:
        action = self._SUPERVISOR_ACTIONS.get(inp.action)
        if action is not None:  # a name no script can hold (inputs checks them) does nothing
            action(self, inp)

    def _supervisor_pause(self, inp: Supervisor) -> None:
        if self.hold == "paused":
            self._reject(inp, faults.ALREADY_PAUSED, "the table is already paused")
        else:
            self._fault(faults.SUPERVISOR_PAUSE, "paused by the supervisor")

    def _supervisor_resume(self, inp: Supervisor) -> None:
        if self.draining:  # releases the drain only; a pause needs its own resume
            self.draining = False
            self._emit("drain_ended")
            return
        blocker = self._resume_blocker() if self.hold == "paused" else (
            faults.NOT_PAUSED, "the table is not paused")
        if blocker:
            self._reject(inp, *blocker)
        else:
            self._resume()

    def _supervisor_drain(self, inp: Supervisor) -> None:
        if self.draining:
            self._reject(inp, faults.NOT_ALLOWED, "the table is already draining")
        else:
            self.draining = True
            self._emit("drain_started", {"round_open": self.round is not None})

    def _supervisor_cancel_round(self, inp: Supervisor) -> None:
        self._on_cancel_round(inp, "cancelled by the supervisor")

    def _supervisor_end_shoe(self, inp: Supervisor) -> None:
        if self.state == "no_shoe":
            self._reject(inp, faults.NOT_ALLOWED, "no shoe is open")
            return
        if self.round is not None:
            self._cancel_round("the supervisor ended the shoe")
        if self.state != "no_shoe":  # the cancelled round may have been the last
            self._end_shoe_events("ended_by_supervisor")
            self.close_shoe()
        self._resume_if_key_at_run()

    def _supervisor_enter_card(self, inp: Supervisor) -> None:
        assert inp.card is not None
        if not self.card_owed:
            self._reject(inp, faults.NO_CARD_OWED, "no misread card is waiting to be entered")
            return
        blocker = self._resume_blocker(ignore_owed=True)
        if blocker:
            self._reject(inp, *blocker)
            return
        try:
            self.composition.check_draw(inp.card)
        except ShoeCompositionError:
            self._reject(inp, faults.CARD_NOT_IN_SHOE,
                         "this shoe cannot hold another copy of the card entered (or is "
                         "used up); enter the card actually drawn, or cancel_round")
            return
        self._resume()
        self._take_card(inp.card, entered=True)

    def _supervisor_reveal(self, inp: Supervisor) -> None:
        """The panel's reveal, for a button-reveal table that lost its panel: allowed exactly
        where the button would be."""
        if self.hold == "paused":
            self._reject(inp, faults.TABLE_PAUSED,
                         "reveal is not possible while the table is paused; resume first")
        else:
            self._button_reveal(inp)

    _SUPERVISOR_ACTIONS: ClassVar[dict[str, Callable[[TableMachine, Supervisor], None]]] = {
        "pause": _supervisor_pause,
        "drain": _supervisor_drain,
        "resume": _supervisor_resume,
        "cancel_round": _supervisor_cancel_round,
        "end_shoe": _supervisor_end_shoe,
        "enter_card": _supervisor_enter_card,
        "reveal": _supervisor_reveal,
    }

    def _on_attributed_supervisor(self, inp: Supervisor) -> None:
        """A supervisor action whose events say who took it (``by``), when the input does."""
        first = len(self._events)  # events of timers fired before it are not its doing
        self._on_supervisor(inp)
        if inp.by is not None:
            for event in self._events[first:]:
                if event["type"] in SUPERVISOR_ATTRIBUTED_EVENTS:
                    event["data"]["by"] = inp.by.to_dict()

    def _on_controller_fault(self, inp: ControllerFault) -> None:
        """The controller itself failed (journal, …): pause until the supervisor resumes."""
        if inp.code in faults.FAULTS:
            self._fault(inp.code, inp.reason)
        else:
            self._fault(faults.CONTROLLER_FAULT, f"controller fault {inp.code}: {inp.reason}",
                        {"code": inp.code, "reason": inp.reason})

    def _on_tick(self, inp: Tick) -> None:
        pass  # the clock moved; due timers already fired

    def _on_software(self, inp: Software) -> None:
        current = software.identity(inp)
        if software.changed(self.software, current):
            self._emit("software_changed", {"from": self.software, "to": current},
                       round_=None)
        self.software = current

    _HANDLERS: ClassVar[dict[type, Callable[[TableMachine, Any], None]]] = {
        Button: _on_button,
        CardScan: _on_card,
        CutCard: _on_cut_card,
        Misread: _on_misread,
        Switch: _on_switch,
        DeviceStatus: _on_device,
        Supervisor: _on_attributed_supervisor,
        ControllerFault: _on_controller_fault,
        BackendStatus: _on_backend,
        Tick: _on_tick,
        ClockReport: _on_clock,
        Software: _on_software,
    }

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
        self._hold.set_state("paused", model=self._hold_model)


class _HoldModel(HoldTriggers):
    """The hold's model: transitions keeps its state and triggers here."""


def _bound(transition: dict[str, Any], owner: object) -> dict[str, Any]:
    """A transition whose named callbacks and conditions are ``owner``'s bound methods."""
    out = dict(transition)
    for key in ("conditions", "unless", "before", "after", "prepare"):
        names = out.get(key)
        if names:
            names = [names] if isinstance(names, str) else names
            out[key] = [getattr(owner, name) for name in names]
    return out
