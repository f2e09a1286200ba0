"""A table machine's checkpoint: the little state that outlives a shoe.

Taken between shoes only (no shoe open), so recovery replays the journal from the checkpoint
instead of from the table's first input. The journal and the archive store it as JSON.
"""

from __future__ import annotations

from typing import Any

from controller.table.machine_state import MachineState
from controller.table.records import MachineSettings, pause_reason_from

VERSION = 1


def capture(machine: MachineState) -> dict[str, Any]:
    """Small JSON-able state, valid between shoes only (no shoe open)."""
    if machine.state != "no_shoe":
        raise ValueError(
            f"a checkpoint is taken between shoes; shoe {machine.shoe_number} is open")
    return {
        "v": VERSION,
        "table": machine.settings.table_id,
        "seq": machine.seq,
        "clock": machine.clock,
        "shoe": machine.shoe_number,
        "rounds_total": machine.rounds_total,
        "devices": dict(machine.devices),
        "backends_unreachable": dict(machine.backends_unreachable),
        "switch_on": machine.switch_on,
        "paused": machine.hold == "paused",
        "fault": machine.fault.to_dict() if machine.fault else None,
        "last_fault": machine.last_fault.to_dict() if machine.last_fault else None,
        "clock_sync": machine.clock_sync,
        "last_clock_step": machine.last_clock_step,
        "software": machine.software,
        "draining": machine.draining,
    }


def check(settings: MachineSettings, checkpoint: dict[str, Any]) -> None:
    """Refuse a checkpoint of another version or another table."""
    if checkpoint.get("v") != VERSION:
        raise ValueError(f"unknown checkpoint version {checkpoint.get('v')!r}")
    if checkpoint.get("table") != settings.table_id:
        raise ValueError(
            f"checkpoint is for table {checkpoint.get('table')!r}, not {settings.table_id!r}")


def restore(machine: MachineState, checkpoint: dict[str, Any]) -> None:
    """Set a fresh machine (no shoe open) to the checkpoint's state."""
    machine.seq = int(checkpoint["seq"])
    machine.clock = float(checkpoint["clock"])
    machine.shoe_number = int(checkpoint["shoe"])
    machine.rounds_total = int(checkpoint["rounds_total"])
    machine.devices = {name: bool(checkpoint["devices"][name]) for name in ("shoe", "panel")}
    machine.switch_on = bool(checkpoint["switch_on"])
    # absent from checkpoints taken before backends were recorded
    machine.backends_unreachable = {str(name): str(reason) for name, reason in
                                    (checkpoint.get("backends_unreachable") or {}).items()}
    machine.fault = pause_reason_from(checkpoint.get("fault"))
    machine.last_fault = pause_reason_from(checkpoint.get("last_fault"))
    # Checkpoints taken before the clock was reported have neither: unknown, no step seen.
    machine.clock_sync = str(checkpoint.get("clock_sync") or "unknown")
    machine.last_clock_step = checkpoint.get("last_clock_step")
    software = checkpoint.get("software")  # absent from checkpoints taken before it existed
    machine.software = dict(software) if isinstance(software, dict) else None
    machine.draining = bool(checkpoint.get("draining"))  # absent from older checkpoints
    if checkpoint["paused"]:
        machine.restore_paused()
