"""Publishes the table's health (health.py) on change (``LISTENER_SETTLE_S`` after it) and every
``HEARTBEAT_S`` seconds.

Its own thread: the owner loop only sets an event when the status changes (a status board
listener must not block), and this thread builds the message from the published snapshot,
the outbox's figures and the journal's size, and hands it to the publisher (the MQTT health
topic). An orderly stop publishes the offline message; a crash leaves it to the last will.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import structlog

from controller.service.status_board import LISTENER_SETTLE_S, StatusBoard
from controller.service.telemetry.health import (
    health_message,
    journal_bytes,
    offline_message,
    what_changed,
)

log = structlog.get_logger("pokdeng.health")

HEARTBEAT_S = 30.0  # a fleet view takes a table silent for longer than this as stale


class HealthPublisher(Protocol):
    def publish(self, message: dict[str, Any]) -> None: ...

    def close(self, offline: dict[str, Any]) -> None: ...


class HealthReporter:
    def __init__(self, table: str, board: StatusBoard, publisher: HealthPublisher, *,
                 delivery: Callable[[], dict[str, dict[str, Any]]],
                 journal: Callable[[], dict[str, int]], software: dict[str, Any],
                 heartbeat_s: float = HEARTBEAT_S, settle_s: float = LISTENER_SETTLE_S):
        self.table = table
        self._board = board
        self._publisher = publisher
        self._delivery = delivery
        self._journal = journal
        self._software = dict(software)
        self._heartbeat_s = heartbeat_s
        self._settle_s = settle_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._last_published: dict[str, Any] | None = None
        self._thread = threading.Thread(target=self._run, name="health", daemon=True)

    def start(self) -> None:
        self._board.subscribe_changes(self._wake.set)
        self._thread.start()

    def current(self) -> dict[str, Any]:
        """The health message as of now."""
        return health_message(self._board.snapshot(), self._delivery(), self._journal(),
                              self._software)

    def _run(self) -> None:
        due = 0.0
        while not self._stop.is_set():
            self._wake.clear()
            try:
                message = self.current()
                changed = what_changed(message)
                if changed != self._last_published or time.monotonic() >= due:
                    self._publisher.publish(message)
                    self._last_published = changed
                    due = time.monotonic() + self._heartbeat_s
            except Exception:  # the table must not notice a health problem
                log.exception("cannot publish the table's health")
                due = time.monotonic() + self._heartbeat_s
            if self._wake.wait(max(0.0, due - time.monotonic())):
                self._stop.wait(self._settle_s)

    def stop(self, reason: str = "shutdown") -> None:
        """Stop publishing and say the table is offline (an orderly stop)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(5)
        try:
            self._publisher.close(offline_message(self.table, reason, self._software,
                                                  time.time()))
        except Exception:
            log.exception("cannot publish the table's offline health")


def health_reporter_for(config: Any, board: StatusBoard, outbox: Any, journal: Any,
                        software: dict[str, Any]) -> HealthReporter | None:
    """The reporter for a table with an MQTT transport (None without one)."""
    settings = config.mqtt
    if settings is None:
        return None
    from controller.transports.mqtt_health import MqttHealthPublisher  # paho: only with MQTT

    table = config.table.table_id
    publisher = MqttHealthPublisher(settings, table,
                                    will=offline_message(table, "connection lost", software))
    path = config.journal_path
    reporter = HealthReporter(
        table, board, publisher,
        delivery=outbox.status if outbox is not None else dict,
        journal=lambda: {"bytes": journal_bytes(path), "records": journal.record_count()},
        software=software)
    reporter.start()
    return reporter
