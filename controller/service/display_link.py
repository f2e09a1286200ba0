"""The dealer display's sources in the daemon: the shoe so far from the journal and the
backends' backlog (the screen process's link, controller/service/screens/link.py, sends
them), and ``start_display``, the display served in this process as the daemon once did
(the status-sharing tests count its encodings; the daemon starts a screen process instead).

The display (controller/display/) is fed only what left the table already sealed: the
journaled, published events (handed over by the owner thread, which only appends them to the
display's inbox) and the published status snapshot. After a restart it catches up from the
journal's events of the current shoe, read on the display's own thread through its own
read-only connection, so the owner loop never waits for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import (
    last_event_seq_of_type,
    open_read_only,
    read_events_after,
)
from controller.service.clock.table_clock import TableClock
from controller.service.status_board import StatusBoard

log = structlog.get_logger("pokdeng.display")

MAX_HISTORY_EVENTS = 50_000  # a shoe is a few thousand events; this bounds a strange journal


class DisplayStartError(Exception):
    """The display cannot listen where the config says; the message names the address."""


def shoe_history(journal_path: str) -> list[dict[str, Any]]:
    """The journal's events from the newest ``shoe_started`` on (the shoe on the table, or the
    last one played): what the roadmap and the last results are built from."""
    conn = open_read_only(journal_path)
    try:
        start = last_event_seq_of_type(conn, "shoe_started")
        if start is None:
            return []
        return read_events_after(conn, start - 1, MAX_HISTORY_EVENTS)
    finally:
        conn.close()


def backend_backlog(outbox: Outbox | None) -> Callable[[], dict[str, Any]] | None:
    """Per transport, its backlog and state (never its last error's text)."""
    if outbox is None:
        return None

    def read() -> dict[str, Any]:
        return {name: {"backlog": figures.get("backlog"), "state": figures.get("state")}
                for name, figures in outbox.status().items()}
    return read


def start_display(settings: DisplaySettings, board: StatusBoard, clock: TableClock,
                  outbox: Outbox | None, journal_path: str) -> DisplayServer:
    """Serve the display; raise DisplayStartError when its address cannot be used."""
    display = DisplayServer(settings, board.versioned_snapshot,
                            rate=clock.real_seconds(1.0),
                            history=lambda: shoe_history(journal_path),
                            backends=backend_backlog(outbox))
    display.feed.language = settings.language  # the screens' words until a page asks
    try:
        display.start()
    except OSError as exc:
        raise DisplayStartError(f"display.listen {settings.listen}: cannot listen: "
                                f"{exc.strerror or exc}") from None
    board.subscribe_changes(display.status_changed)
    return display
