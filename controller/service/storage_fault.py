"""The table stopped on a journal that refuses writes (docs/disk-safety.md): the fault, the
inputs held meanwhile, and the retry that journals the pause and then applies them.

When a write fails the in-memory machine may be ahead of the disk, so it is rebuilt from the
journal and the table shows the ``journal_unwritable`` fault until a write succeeds again.
Inputs that arrive meanwhile (a card already drawn is a fact) are held, in order; once the
pause is journaled they go through the owner loop's own path, on a paused table, so nothing
reaches the machine unjournaled and nothing is lost.

Owner thread only: it is a part of the owner loop, which it calls back through ``OwnerLoop``
(a Protocol, so that this module never imports the daemon).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import structlog

from controller.durability.journal import Journal, JournalError
from controller.service.held_inputs import HeldInputs
from controller.table.inputs import ControllerFault, Input
from controller.table.machine import TableMachine

log = structlog.get_logger("pokdeng.daemon")

STORAGE_RETRY_S = 5.0         # how often a failed journal is retried


class OwnerLoop(Protocol):
    """The owner loop's steps a storage fault takes (each on the owner thread)."""

    @property
    def machine(self) -> TableMachine | None: ...
    @property
    def journal(self) -> Journal | None: ...
    def stamp(self, inp: Input) -> Input: ...
    def rebuild(self) -> TableMachine: ...
    def after_journal(self, entries: list[tuple[Input, list[dict[str, Any]]]]) -> None: ...
    def apply(self, inp: Input) -> None: ...
    def publish(self, status: dict[str, Any]) -> None: ...


class StorageFault:
    """Whether the journal refuses writes (``reason``), what is held, and when to retry."""

    def __init__(self, loop: OwnerLoop) -> None:
        self._loop = loop
        self.reason: str | None = None  # set while the journal cannot be written
        self.retry_at: float = 0.0
        self.held: HeldInputs = HeldInputs()

    def failed(self, exc: BaseException) -> None:
        """The journal refused a write: the machine is ahead of the disk. Undo and pause."""
        reason = f"journal write failed: {exc}"
        log.error("journal write failed; rebuilding the table from the journal and pausing",
                  error=str(exc))
        try:
            self._loop.rebuild()
        except Exception as rebuild_exc:
            log.critical("cannot rebuild the table from the journal", error=str(rebuild_exc))
            raise
        self.reason = reason
        self.retry_at = time.monotonic()  # first retry right away: may be transient
        self.publish()

    def keep(self, inp: Input, first: bool = False) -> None:
        """Keep an input that cannot be journaled now; it is applied once the journal works."""
        self.held.keep(inp, first)
        if self.reason:
            self.publish()

    def publish_status(self) -> None:
        """Publish the status as it stands (another thread's part of it changed)."""
        machine = self._loop.machine
        assert machine is not None
        if self.reason:
            self.publish()
        else:
            self._loop.publish(machine.status())

    def publish(self) -> None:
        """The status with the fault over it: paused, ``journal_unwritable``."""
        machine = self._loop.machine
        assert machine is not None
        self._loop.publish(dict(machine.status(), paused=True,
                                fault={"code": "journal_unwritable", "reason": self.reason}))

    def retry_due(self) -> bool:
        return bool(self.reason) and time.monotonic() >= self.retry_at

    def retry(self) -> None:
        """Try to journal the storage fault; once it sticks, the table runs from the journal."""
        loop = self._loop
        machine, journal = loop.machine, loop.journal
        assert machine is not None and journal is not None
        pause = loop.stamp(ControllerFault(0.0, "journal_unwritable",
                                           self.reason or "journal write failed"))
        events = machine.handle(pause)
        try:
            journal.append(pause, events)
        except (JournalError, OSError) as exc:
            loop.rebuild()
            self.retry_at = time.monotonic() + STORAGE_RETRY_S
            log.error("journal still cannot be written", error=str(exc))
            return
        log.warning("journal writable again; the table stays paused for the supervisor",
                    held=len(self.held))
        self.reason = None
        loop.after_journal([(pause, events)])
        self._apply_held()

    def _apply_held(self) -> None:
        """Apply the held inputs in arrival order, each journaled first, on the paused table.

        They are stamped now (the table clock never runs backwards past the pause); the
        machine treats e.g. a card during a pause as a fault, and the supervisor decides.
        If the journal fails again the rest stay held, in order.
        """
        if self.held:
            log.warning("applying the inputs held while the journal could not be written",
                        held=len(self.held))
        while self.held and not self.reason:
            self._loop.apply(self.held.take_first())
