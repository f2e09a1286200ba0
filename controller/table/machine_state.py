"""What the machine's helpers read and restore of it: its state, as a Protocol.

``checkpoint.py`` (save and restore at a shoe's end), ``drain.py`` and ``views.py`` (the status
and the dealer's prompt) work on a ``TableMachine`` but need only these fields, so they name
this instead of the machine's class: the machine imports them, and nothing imports it back
(tests/test_layering.py fails on an import circle).
"""

from __future__ import annotations

from typing import Any, Protocol

from controller.rules.cards import ShoeComposition
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
