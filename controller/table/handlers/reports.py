"""Reports from around the procedure: devices, the system clock, backends, the software
running, and the controller's own faults.

Each is recorded for the status view and sent on as an event when it is news (the same level
again is not); only a lost shoe that cards are still needed from, or a controller fault, pauses
the table.
"""

from __future__ import annotations

from controller.table import faults, software
from controller.table.events import iso_time
from controller.table.inputs import (
    BackendStatus,
    ClockReport,
    ControllerFault,
    DeviceStatus,
    Software,
)
from controller.table.machine_state import MachineCore


class Reports:
    """What one table machine is told of its surroundings."""

    def __init__(self, machine: MachineCore):
        self._machine = machine

    def on_device(self, inp: DeviceStatus) -> None:
        m = self._machine
        if m.devices[inp.name] == inp.connected:
            return  # the same level again: not news
        m.devices[inp.name] = inp.connected
        m._emit("device_status", {"device": inp.name, "connected": inp.connected})
        if inp.name == "shoe" and not inp.connected and m._needs_cards():
            m._fault(faults.SHOE_LOST,
                     "the shoe disconnected while cards are still needed; reconnect it, "
                     "then resume, or cancel_round")

    def on_clock(self, inp: ClockReport) -> None:
        m = self._machine
        if inp.sync == m.clock_sync and inp.step_s is None:
            return  # the same state again: not news
        m.clock_sync = inp.sync
        if inp.step_s is not None:
            m.last_clock_step = {"seconds": inp.step_s, "time": iso_time(m._now)}
        m._emit("clock_status", inp.data())

    def on_backend(self, inp: BackendStatus) -> None:
        """A backend's delivery state: recorded and sent on, never a pause (the table deals
        on; the outbox catches up)."""
        m = self._machine
        if inp.reachable and inp.name in m.backends_unreachable:
            del m.backends_unreachable[inp.name]
            m._emit("backend_restored", {"transport": inp.name, "reason": inp.reason})
        elif not inp.reachable and inp.name not in m.backends_unreachable:
            m.backends_unreachable[inp.name] = inp.reason
            m._emit("backend_unreachable", {"transport": inp.name, "reason": inp.reason})

    def on_software(self, inp: Software) -> None:
        m = self._machine
        current = software.identity(inp)
        if software.changed(m.software, current):
            m._emit("software_changed", {"from": m.software, "to": current}, round_=None)
        m.software = current

    def on_controller_fault(self, inp: ControllerFault) -> None:
        """The controller itself failed (journal, …): pause until the supervisor resumes."""
        m = self._machine
        if inp.code in faults.FAULTS:
            m._fault(inp.code, inp.reason)
        else:
            m._fault(faults.CONTROLLER_FAULT, f"controller fault {inp.code}: {inp.reason}",
                     {"code": inp.code, "reason": inp.reason})
