"""The table's procedure as data: its states, transitions and the plain words for each state.

``TableMachine`` builds its two ``transitions`` machines from these tables, and
``controller.table.generators.diagram`` draws docs/state-diagram.md from them, so the machine
and its diagram cannot drift apart. Callbacks and conditions are named here and defined on the
machine (the hold's on its ``Hold``, handlers/hold.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.rules.hands import HAND_ORDER

# Where each card of a round goes: index 0 is the burn card, then two passes of P1..P5, banker.
ROUND_TARGETS: tuple[str, ...] = ("burn",) + HAND_ORDER + HAND_ORDER
CARDS_PER_ROUND = len(ROUND_TARGETS)  # 13

# --- the procedure, as data -----------------------------------------------------------------
PROCEDURE_STATES = (
    "no_shoe",  # no shoe open: waiting for new_shoe
    "awaiting_flip",  # shoe open: the flip card sets the burn count
    "burning",  # burning the flip card's count
    "ready",  # between rounds
    "betting",  # round open, betting open; cards may already come
    "dealing",  # betting closed, cards still missing
    "revealing",  # betting closed and all 13 cards in: hands are revealed
)
ROUND_STATES = ("betting", "dealing", "revealing")
SHOE_SETUP_STATES = ("awaiting_flip", "burning")

# Only moves between states are transitions. Counting a burn, dealing a card and revealing a
# hand inside a state are plain steps of the machine: as transitions that stay put they cost a
# trigger each (a few hundred a shoe) and changed nothing.
PROCEDURE_TRANSITIONS: list[dict[str, Any]] = [
    {"trigger": "open_shoe", "source": "no_shoe", "dest": "awaiting_flip"},
    {"trigger": "show_flip_card", "source": "awaiting_flip", "dest": "burning"},
    {"trigger": "burn_shoe_card", "source": "burning", "dest": "ready",
     "conditions": "burn_count_reached", "after": "announce_burn_completed"},
    {"trigger": "open_round", "source": "ready", "dest": "betting"},
    {"trigger": "deal_card", "source": "dealing", "dest": "revealing",
     "conditions": "all_round_cards_dealt", "after": "reveal_when_automatic"},
    {"trigger": "close_betting", "source": "betting", "dest": "revealing",
     "conditions": "all_round_cards_dealt", "before": "announce_betting_closed",
     "after": "reveal_when_automatic"},
    {"trigger": "close_betting", "source": "betting", "dest": "dealing",
     "before": "announce_betting_closed"},
    {"trigger": "settle_round", "source": "revealing", "dest": "no_shoe",
     "conditions": "is_last_round", "after": "announce_shoe_ended_by_cut_card"},
    {"trigger": "settle_round", "source": "revealing", "dest": "ready"},
    {"trigger": "cancel_open_round", "source": list(ROUND_STATES), "dest": "no_shoe",
     "conditions": "is_last_round", "after": "announce_shoe_ended_by_cut_card"},
    {"trigger": "cancel_open_round", "source": list(ROUND_STATES), "dest": "ready"},
    {"trigger": "close_shoe", "source": ["awaiting_flip", "burning", "ready"], "dest": "no_shoe"},
]

# --- the hold, as data --------------------------------------------------------------------------
HOLD_STATES = ("running", "paused")
HOLD_TRANSITIONS: list[dict[str, Any]] = [
    {"trigger": "pause_table", "source": "running", "dest": "paused",
     "before": "freeze_countdown"},
    # A fault while paused: stays paused, the newest fault is shown.
    {"trigger": "pause_table", "source": "paused", "dest": None},
    {"trigger": "resume_table", "source": "paused", "dest": "running",
     "conditions": ["key_switch_at_run", "misread_card_entered", "shoe_back_if_cards_needed"],
     "after": "restart_countdown"},
]


class ProcedureTriggers:
    """The procedure's triggers, which ``transitions`` adds to the model at run time.

    Declared (never assigned, so ``transitions`` still binds them) for the type checker; each
    returns whether a transition was taken. tests/table/test_machine_diagram.py checks the list
    against PROCEDURE_TRANSITIONS."""

    state: str
    open_shoe: Callable[[], bool]
    show_flip_card: Callable[[], bool]
    burn_shoe_card: Callable[[], bool]
    open_round: Callable[[], bool]
    deal_card: Callable[[], bool]
    close_betting: Callable[[], bool]
    settle_round: Callable[[], bool]
    cancel_open_round: Callable[[], bool]
    close_shoe: Callable[[], bool]


class HoldTriggers:
    """The hold's triggers, added at run time like ProcedureTriggers'."""

    state: str
    pause_table: Callable[[], bool]
    resume_table: Callable[[], bool]


STATE_WORDS = {
    "no_shoe": "no shoe is open",
    "awaiting_flip": "the shoe waits for its flip card",
    "burning": "the shoe's burn cards are being drawn",
    "ready": "no round is open",
    "betting": "a round is open and betting is open",
    "dealing": "betting is closed and cards are still being dealt",
    "revealing": "the hands are being revealed",
}
HOLD_WORDS = {
    "running": "the table runs",
    "paused": "held by the key switch, the supervisor or a fault",
}
