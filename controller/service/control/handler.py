"""What the control socket asks of the table: the daemon's side of ``ControlHandler``.

It reads the published status (plus the backends' and the archive's), and posts supervisor
actions to the owner thread's queue; it never touches the machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from controller.durability.archives.retention import JournalRetention
from controller.durability.delivery.outbox import Outbox
from controller.rules.cards import ACCEPTED_FORMS, CardCodeError, parse_card
from controller.service.clock.table_clock import TableClock
from controller.service.status_board import StatusBoard
from controller.table.inputs import Actor, Input, Supervisor

#: the backends' figures in a ``status`` answer are at most this old: callers asking at once
#: share one reading of the outbox (a journal query) instead of one each. Never older than the
#: status they go with: a reading is shared only within the status version it was read in.
BACKEND_FIGURES_FRESH_S = 0.1


class TableControl:
    """Answers the control socket (``controller/service/control/server.py``'s handler)."""

    def __init__(self, board: StatusBoard, clock: TableClock,
                 submit: Callable[[Input], Future[dict[str, Any]]],
                 stop_requested: threading.Event, outbox: Outbox | None,
                 retention: JournalRetention | None):
        self._board: StatusBoard = board
        self._clock: TableClock = clock
        self._submit: Callable[[Input], Future[dict[str, Any]]] = submit
        self._stop_requested: threading.Event = stop_requested
        self._outbox: Outbox | None = outbox
        self._retention: JournalRetention | None = retention
        self._backend_lock = threading.Lock()
        self._backend: tuple[int, float, dict[str, Any]] = (-1, float("-inf"), {})

    def control_status_line(self) -> bytes:
        """The ``status`` answer: the status encoded once per change, shared with every
        reader, plus this moment's fields and the backends' and archive's figures."""
        return self._board.status_line(self._extra)[1]

    def control_watch_line(self) -> tuple[int, bytes]:
        """A ``watch`` push and the status version it shows (one line for every watcher)."""
        return self._board.status_line()

    def _extra(self, version: int) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self._outbox is not None:
            extra["backend"] = self._backend_figures(self._outbox, version)
        if self._retention is not None:
            extra["journal_archive"] = self._retention.status()
        return extra

    def _backend_figures(self, outbox: Outbox, version: int) -> dict[str, Any]:
        """The outbox's figures, read after status ``version`` was published (a backlog of 0
        then covers every event that status counts)."""
        with self._backend_lock:
            read_in, read_at, figures = self._backend
            if read_in != version or time.monotonic() - read_at >= BACKEND_FIGURES_FRESH_S:
                try:
                    figures = outbox.status()
                except Exception as exc:  # status must answer even if the outbox is unwell
                    figures = {"error": str(exc)}
                self._backend = (version, time.monotonic(), figures)
            return figures

    def control_watch_interval(self) -> float:
        # Heartbeats keep a dealer view's countdown honest; scaled for a fast demo clock.
        return max(0.05, min(1.0, self._clock.real_seconds(1.0)))

    def control_supervisor(self, action: str, card: str | None,
                           by: Actor) -> Future[dict[str, Any]]:
        """Post a supervisor action taken by ``by``; the future holds the table's answer."""
        try:
            parsed = parse_card(card) if card is not None else None
        except CardCodeError:  # its message quotes the text, which may name a sealed card
            return _answered({"ok": False, "error": f"not a card code; accepted: {ACCEPTED_FORMS}"})
        if self._stop_requested.is_set():
            return _answered({"ok": False, "error": "the daemon is stopping"})
        return self._submit(Supervisor(0.0, action, parsed, by))

    def subscribe_changes(self, callback: Callable[[], None]) -> None:
        self._board.subscribe_changes(callback)


def _answered(answer: dict[str, Any]) -> Future[dict[str, Any]]:
    future: Future[dict[str, Any]] = Future()
    future.set_result(answer)
    return future


def supervisor_answer(events: list[dict[str, Any]], storage_fault: str | None) -> dict[str, Any]:
    """The control socket's answer to a supervisor action, from the events it produced."""
    if storage_fault:
        return {"ok": False, "error": f"not done: {storage_fault}"}
    rejected = [e for e in events if e.get("type") == "input_rejected"]
    if rejected:
        data = rejected[0].get("data") or {}
        return {"ok": False, "error": data.get("reason") or "rejected by the table",
                "events": [e["type"] for e in events]}
    if not events:
        return {"ok": False, "error": "nothing to do in the table's current state"}
    return {"ok": True, "events": [e["type"] for e in events]}
