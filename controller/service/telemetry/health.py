"""The table's health message: what a studio's fleet view needs to know about one table.

Built from the published status view only (``StatusBoard``'s sealed snapshot), the outbox's
delivery figures and the journal's size, so it can name no card: not the hands, not the
prompt, nothing a round carries; only the state, numbers, device flags and fault *codes*.
The MQTT transport publishes it retained on ``<prefix>/<table>/health``
(``controller/service/telemetry/health_reporter.py``); its JSON Schema is
``docs/health.schema.json``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from controller import __version__

#: the status fields that may carry clock-sync state (whichever the status has)
CLOCK_SYNC_KEYS = ("clock_sync", "time_sync")


def iso_now(now: float | None = None) -> str:
    moment = datetime.now(UTC) if now is None else datetime.fromtimestamp(now, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def journal_bytes(journal_path: str) -> int:
    """The journal's size on disk: the database and its write-ahead log."""
    total = 0
    for path in (journal_path, journal_path + "-wal"):
        try:
            total += os.path.getsize(path)
        except OSError:
            pass  # no WAL between checkpoints, or the journal not created yet
    return total


def _fault_code(status: dict[str, Any]) -> str | None:
    for key in ("fault", "last_fault"):
        fault = status.get(key)
        if isinstance(fault, dict) and fault.get("code"):
            return str(fault["code"])
    return None


def _clock_sync(status: dict[str, Any]) -> Any:
    for key in CLOCK_SYNC_KEYS:
        value = status.get(key)
        if isinstance(value, (str, dict)):
            return value
    clock = status.get("clock")
    if isinstance(clock, dict) and isinstance(clock.get("sync"), (str, dict)):
        return clock["sync"]
    return "unknown"


def _backlog(delivery: dict[str, dict[str, Any]]) -> dict[str, Any]:
    events = max((int(t.get("backlog") or 0) for t in delivery.values()), default=0)
    ages = [t["oldest_age_s"] for t in delivery.values() if t.get("oldest_age_s") is not None]
    return {
        "events": events,
        "oldest_undelivered_age_s": max(ages) if ages else None,
        "transports": {name: {"backlog": int(t.get("backlog") or 0),
                              "state": str(t.get("state") or "unknown")}
                       for name, t in sorted(delivery.items())},
    }


def health_message(status: dict[str, Any], delivery: dict[str, dict[str, Any]],
                   journal: dict[str, int], software: dict[str, Any] | None = None,
                   now: float | None = None) -> dict[str, Any]:
    """The health of a running table.

    ``status``: the published (sealed) status; ``delivery``: ``Outbox.status()``;
    ``journal``: ``{"bytes": …, "records": …}``; ``software``: at least ``version``.
    """
    devices = status.get("devices") or {}
    return {
        "table": status.get("table"),
        "state": str(status.get("state") or "unknown"),
        "paused": bool(status.get("paused")),
        "shoe": status.get("shoe"),
        "round": status.get("round"),
        "devices": {str(name): up for name, up in devices.items() if isinstance(up, bool)},
        # why a device will not open (path, node, errno): a fleet view sees an EPERM at once
        "device_problems": {str(name): str(problem) for name, problem
                            in (status.get("device_problems") or {}).items()},
        "backlog": _backlog(delivery),
        "journal": {"bytes": int(journal.get("bytes", 0)),
                    "records": int(journal.get("records", 0)),
                    "writable": status.get("journal", "ok") != "unwritable"},
        "clock_sync": _clock_sync(status),
        "software": dict(software or {"version": __version__}),
        "last_fault": _fault_code(status),
        "time": iso_now(now),
    }


def offline_message(table: str, reason: str, software: dict[str, Any] | None = None,
                    now: float | None = None) -> dict[str, Any]:
    """The health of a table that is not running: its last will (``now`` None: no time, the
    broker sends it whenever the connection is lost) and its word on an orderly stop."""
    message: dict[str, Any] = {"table": table, "state": "offline", "reason": reason,
                               "software": dict(software or {"version": __version__})}
    if now is not None:
        message["time"] = iso_now(now)
    return message


def what_changed(message: dict[str, Any]) -> dict[str, Any]:
    """The part of a health message whose change is worth a publish: not the time nor the
    age of the oldest undelivered event, which move on their own, nor the counts every card
    moves (the journal's size, how many events wait): whether events wait, per transport,
    is. The heartbeat carries the counts."""
    backlog = dict(message.get("backlog") or {})
    backlog.pop("oldest_undelivered_age_s", None)
    backlog["events"] = bool(backlog.get("events"))
    backlog["transports"] = {name: {"backlog": bool(t.get("backlog")), "state": t.get("state")}
                             for name, t in (backlog.get("transports") or {}).items()}
    journal = dict(message.get("journal") or {})
    journal.pop("bytes", None)
    journal.pop("records", None)
    return {key: value for key, value in dict(message, backlog=backlog, journal=journal).items()
            if key != "time"}
