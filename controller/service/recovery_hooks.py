"""The daemon's side of recovery: keeping systemd patient during a long replay, the one line
that says what recovery found, and the checkpoint stored at every shoe end.

Recovery is silent about the past: the machine's own log lines are dropped while it replays
(controller/durability/recovery.py), so a restart on a month of journal does not re-log a
month of pauses as news; ``log_recovery`` says in one INFO line what was replayed, from where,
how long it took and the table's state now.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import structlog

from controller.durability import checkpoints
from controller.durability.journal import Journal, JournalError
from controller.durability.recovery import RecoveryReport
from controller.service.telemetry.notify import Notifier

if TYPE_CHECKING:
    from controller.table.machine import TableMachine

log = structlog.get_logger("pokdeng.recovery")

EXTEND_BY_S = 30.0      # each EXTEND_TIMEOUT_USEC= asks for this much more time
EXTEND_EVERY_S = 5.0    # and is sent this often while the replay makes progress


class StartupProgress:
    """recover_report's ``progress``: while a long replay moves, tell systemd to wait longer.

    Only progress extends the timeout, so a replay that hangs is still killed."""

    def __init__(self, notifier: Notifier, every_s: float = EXTEND_EVERY_S,
                 extend_by_s: float = EXTEND_BY_S):
        self._notifier = notifier
        self._every_s = every_s
        self._extend_by_s = extend_by_s
        self._due = 0.0
        self.sent = 0

    def __call__(self, records: int) -> None:
        now = time.monotonic()
        if now < self._due:
            return
        self._due = now + self._every_s
        if self._notifier.extend_timeout(
                self._extend_by_s, f"recovering the journal: {records} records replayed"):
            self.sent += 1
        log.debug("recovering the journal", records=records)


def log_recovery(report: RecoveryReport) -> None:
    """One line for the whole recovery (and an ERROR first if a checkpoint was refused)."""
    if report.refused:
        log.error("shoe-end checkpoint refused; replayed the journal from further back",
                  reason=report.refused, start=report.start)
    status = report.machine.status()
    fault = status.get("fault")
    log.info("recovered from the journal", start=report.start, records=report.records,
             inputs=report.inputs, shoes_ended=report.shoes_ended,
             seconds=round(report.seconds, 3), state=status.get("state"),
             shoe=status.get("shoe"), round=status.get("round"),
             paused=bool(status.get("paused")),
             fault=fault.get("code") if isinstance(fault, dict) else None)


def save_checkpoint(journal: Journal | None, machine: TableMachine) -> None:
    """Store the checkpoint right after a shoe-ending entry; a failure costs only a longer
    next start, so it is logged and the table carries on."""
    if journal is None:
        return
    try:
        base = checkpoints.save_at_shoe_end(journal, machine)
    except (ValueError, JournalError) as exc:
        log.warning("shoe-end checkpoint not stored; the next start replays from the previous "
                    "one", error=str(exc))
        return
    log.debug("shoe-end checkpoint stored", records=base.records, seq=base.seq)
