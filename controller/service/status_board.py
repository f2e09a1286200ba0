"""The published table status: one sealed snapshot, replaced whole, read by any thread.

The owner thread publishes; the control socket, the demo and systemd's STATUS= line read.
Every status here is built from the machine's sealed status, so no card of a round whose
betting is open appears in it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from controller.service.clock import TableClock
from controller.service.notify import Notifier
from controller.table.views import seconds_left_now

#: a change listener that does real work (reads the journal, publishes, writes a file) waits
#: this long after a change before it looks: a burst of changes is one look, and the look
#: stays off the way out of the card that made the change
LISTENER_SETTLE_S = 0.2


def status_line(status: dict[str, Any]) -> str:
    """The one-line STATUS= text systemd shows (sealed: built from the sealed status)."""
    parts = [str(status.get("state", "?"))]
    if status.get("shoe") is not None:
        parts.append(f"shoe {status['shoe']}")
    if status.get("round") is not None:
        parts.append(f"round {status['round']}")
    if status.get("cards_left") is not None:
        parts.append(f"{status['cards_left']} cards left")
    fault = status.get("fault")
    if status.get("storage_fault"):
        parts.append(f"STORAGE FAULT: {status['storage_fault']}")
        if status.get("held_inputs"):
            parts.append(f"{status['held_inputs']} inputs held")
    elif status.get("paused"):
        reason = fault.get("reason") if isinstance(fault, dict) else None
        parts.append(f"PAUSED: {reason}" if reason else "PAUSED")
    if status.get("drained"):
        parts.append("drained: safe to stop")
    elif status.get("draining"):
        parts.append("draining: finishing the round")
    devices = status.get("devices") or {}
    lost = [name for name, up in devices.items() if up is False]
    if lost:
        parts.append("lost: " + ", ".join(lost))
    check = status.get("journal_check")
    if isinstance(check, dict) and check.get("state") == "failed":
        parts.append(f"JOURNAL CHECK FAILED: {check.get('reason')}")
    unreachable = status.get("backends_unreachable") or {}
    if unreachable:
        parts.append("BACKEND UNREACHABLE: " + ", ".join(sorted(unreachable)))
    return "; ".join(parts)



def at_now(snapshot: dict[str, Any], now: float) -> dict[str, Any]:
    """A copy of the published status as of ``now``: the clock reading and the betting seconds
    left then (the snapshot itself is as of the last input)."""
    status = dict(snapshot, now=now)
    if status.get("betting_open"):
        status["betting_seconds_left"] = seconds_left_now(status, now)
    return status

class StatusBoard:
    """The latest snapshot and its version; watchers wait for the version to move."""

    def __init__(self, clock: TableClock, notifier: Notifier):
        self._clock: TableClock = clock
        self._notifier: Notifier = notifier
        self._snapshot: dict[str, Any] = {"state": "starting"}
        self._version: int = 0
        self._changed: threading.Condition = threading.Condition()
        self._change_listeners: list[Callable[[], None]] = []

    def snapshot(self) -> dict[str, Any]:
        with self._changed:
            return self._snapshot

    def versioned_snapshot(self) -> tuple[int, dict[str, Any]]:
        """The published status, its version and the table clock now (for watchers)."""
        with self._changed:
            snapshot = at_now(self._snapshot, self._clock.now())
            return self._version, snapshot

    def wait_for_change(self, version: int, timeout: float) -> tuple[int, dict[str, Any]]:
        with self._changed:
            if self._version == version:
                self._changed.wait(timeout)
            return self.versioned_snapshot()

    def subscribe_changes(self, callback: Callable[[], None]) -> None:
        """``callback`` is called (on the owner thread; it must not block) at every change."""
        self._change_listeners.append(callback)

    def publish(self, snapshot: dict[str, Any]) -> None:
        """Replace the snapshot (owner thread), wake watchers and update STATUS=."""
        self._replace(snapshot)
        for listener in self._change_listeners:
            listener()
        self._notifier.status(status_line(snapshot))

    def mark_stopped(self) -> None:
        """The last word: watchers see the table stopped (the notifier is closed by then)."""
        with self._changed:
            self._replace(dict(self._snapshot, state="stopped"))

    def _replace(self, snapshot: dict[str, Any]) -> None:
        with self._changed:
            self._snapshot = snapshot
            self._version += 1
            self._changed.notify_all()
