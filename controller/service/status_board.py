"""The published table status: one sealed snapshot, replaced whole, read by any thread.

The owner thread publishes; the control socket, the demo and systemd's STATUS= line read.
Every status here is built from the machine's sealed status, so no card of a round whose
betting is open appears in it.

Encoded once per change: every ``watch`` and ``status`` client of the control socket is sent
the same JSON encoding of a version (``encoded``), made by the first reader of that version;
each reader adds only the fields of its own moment (``now`` and the betting seconds left
then) and, for ``status``, the backends' figures. A busy socket (many watchers, a monitor
asking ``status`` ten times a second) costs one encoding per change, not one per reader.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from controller.service.clock.table_clock import TableClock
from controller.service.telemetry.notify import Notifier
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
    for name, problem in sorted((status.get("device_problems") or {}).items()):
        parts.append(f"{name}: {problem}")  # systemctl status shows why, not only that
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


#: what ``at_now`` sets: a reader's moment, left out of the shared encoding
MOMENT_FIELDS = frozenset({"now", "betting_seconds_left"})


def moment_fields(snapshot: Mapping[str, Any], now: float) -> dict[str, Any]:
    """The fields ``at_now`` would set or keep for ``snapshot`` at ``now``."""
    fields: dict[str, Any] = {"now": now}
    if snapshot.get("betting_open"):
        fields["betting_seconds_left"] = seconds_left_now(dict(snapshot), now)
    elif "betting_seconds_left" in snapshot:
        fields["betting_seconds_left"] = snapshot["betting_seconds_left"]
    return fields


def with_fields(encoded: bytes, fields: Mapping[str, Any]) -> bytes:
    """An encoded JSON object with ``fields`` added at its end (only they are encoded here)."""
    if not fields:
        return encoded
    tail = json.dumps(fields, ensure_ascii=False).encode()
    if encoded == b"{}":
        return tail
    return encoded[:-1] + b", " + tail[1:]

class StatusBoard:
    """The latest snapshot and its version; watchers wait for the version to move."""

    def __init__(self, clock: TableClock, notifier: Notifier):
        self._clock: TableClock = clock
        self._notifier: Notifier = notifier
        self._snapshot: dict[str, Any] = {"state": "starting"}
        self._version: int = 0
        self._changed: threading.Condition = threading.Condition()
        self._change_listeners: list[Callable[[], None]] = []
        self._encode_lock: threading.Lock = threading.Lock()
        self._encoded: tuple[int, bytes] = (-1, b"")
        #: encodings made, per view ("status": the control socket's): one per change at most
        self.encodings: Counter[str] = Counter()

    def snapshot(self) -> dict[str, Any]:
        with self._changed:
            return self._snapshot

    def versioned_snapshot(self) -> tuple[int, dict[str, Any]]:
        """The published status, its version and the table clock now (for watchers)."""
        with self._changed:
            snapshot = at_now(self._snapshot, self._clock.now())
            return self._version, snapshot

    def encoded(self) -> tuple[int, dict[str, Any], bytes]:
        """The published version, its snapshot, and the snapshot's JSON without the moment's
        fields: encoded by the first reader of a version, then the same bytes for every one."""
        with self._encode_lock:  # held while encoding: readers of a new version wait for one
            with self._changed:
                version, snapshot = self._version, self._snapshot
            if self._encoded[0] != version:
                body = {k: v for k, v in snapshot.items() if k not in MOMENT_FIELDS}
                self._encoded = (version, json.dumps(body, ensure_ascii=False).encode())
                self.encodings["status"] += 1
            return version, snapshot, self._encoded[1]

    def status_line(self, extra: Callable[[int], Mapping[str, Any]] | None = None
                    ) -> tuple[int, bytes]:
        """The version and ``{"ok": true, "status": …}`` + newline as the control socket sends
        it: the shared encoding with this moment's fields (and ``extra(version)``'s, read
        after the snapshot, so they are never older than it) added."""
        version, snapshot, body = self.encoded()
        fields = moment_fields(snapshot, self._clock.now())
        fields.update(extra(version) if extra is not None else {})
        return version, b'{"ok": true, "status": ' + with_fields(body, fields) + b"}\n"

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
