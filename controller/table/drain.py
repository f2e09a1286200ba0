"""Draining a table for an upgrade: the open round finishes, no new round starts.

A supervisor ``drain`` (journaled, with who took it) sets the table draining: the round in
progress, if any, plays to its result; the dealer's ``start_round`` is refused with
``REFUSAL``; once no round is open the table is *drained* and the daemon may be stopped
without stopping anyone's bets. ``resume`` releases it. The drain is part of the journaled
state, so a table stopped drained for an upgrade starts drained on the new software, until a
supervisor who has checked it resumes.
"""

from __future__ import annotations

from controller.table.machine_state import MachineState

REFUSAL = "draining: safe to stop (supervisor resume takes rounds again)"
PROMPT = "draining: safe to stop"
STATUS_WORDS = "drained: safe to stop"


def drained(machine: MachineState) -> bool:
    """Draining, and no round is open: stopping now stops no round."""
    return machine.draining and machine.round is None


def status_fields(machine: MachineState) -> dict[str, object]:
    """The status view's drain fields."""
    return {"draining": machine.draining, "drained": drained(machine)}
