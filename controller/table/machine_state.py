"""What the machine's helpers read, restore and call of it: its state and steps, as Protocols.

``checkpoint.py`` (save and restore at a shoe's end), ``drain.py`` and ``views.py`` (the status
and the dealer's prompt) work on a ``TableMachine`` but need only ``MachineState``'s fields.
The machine's parts in ``handlers/`` (``hold``, ``card_intake``, ``dealer_buttons``,
``supervisor_commands``, ``reports``) also take its steps, ``MachineCore``. Both name the
machine's shape instead of its class: the machine imports them, and nothing imports it back
(tests/test_layering.py fails on an import circle).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from controller.rules.cards import Card, ShoeComposition
from controller.table.inputs import Input
from controller.table.records import MachineSettings, PauseReason, RoundState


class MachineState(Protocol):
    settings: MachineSettings
    seq: int
    clock: float
    shoe_number: int
    rounds_total: int
    rounds_played: int
    devices: dict[str, bool]
    switch_on: bool
    backends_unreachable: dict[str, str]
    fault: PauseReason | None
    last_fault: PauseReason | None
    card_owed: str | None
    clock_sync: str
    last_clock_step: dict[str, Any] | None
    software: dict[str, str] | None
    draining: bool
    composition: ShoeComposition
    burn_count: int | None
    burned: int
    last_round: bool
    round: RoundState | None

    @property
    def state(self) -> str:
        """The procedure's state (transitions sets it on the machine)."""

    @property
    def hold(self) -> str:
        """``running`` or ``paused``."""

    def restore_paused(self) -> None:
        """Pause again, as the checkpoint says the table was."""


class MachineCore(MachineState, Protocol):
    """The machine's own steps, which its parts take. Underscored: they belong to the table
    package, not to the machine's callers."""

    cut_card_seen: bool
    # The events of the input being handled, in order (supervisor attribution reads them).
    _events: list[dict[str, Any]]
    _now: float
    # The procedure's triggers its parts pull (declared in ``procedure.ProcedureTriggers``).
    open_shoe: Callable[[], bool]
    show_flip_card: Callable[[], bool]
    burn_shoe_card: Callable[[], bool]
    deal_card: Callable[[], bool]
    close_shoe: Callable[[], bool]

    def burn_count_reached(self) -> bool: ...
    def all_round_cards_dealt(self) -> bool: ...
    def _needs_cards(self) -> bool: ...
    def _emit(self, type_: str, data: dict[str, Any] | None = None, *,
              round_: int | None | bool = True) -> None: ...
    def _fault(self, code: str, reason: str, detail: dict[str, Any] | None = None,
               evidence: dict[str, str] | None = None) -> None: ...
    def _reject(self, inp: Input, code: str, reason: str) -> None: ...
    def _card_words(self, card: Card) -> str: ...
    def _card_evidence(self, card: Card) -> dict[str, str] | None: ...
    def _reset_shoe(self) -> None: ...
    def _open_round(self) -> None: ...
    def _reveal_next(self) -> None: ...
    def _cancel_round(self, reason: str) -> None: ...
    def _on_cancel_round(self, inp: Input, reason: str) -> None: ...
    def _end_shoe_events(self, reason: str) -> None: ...
