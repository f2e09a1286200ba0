"""What crosses from the daemon to the screen process: sealed, one JSON object a line.

The daemon filters here, before anything is written to the screen process, so the sealing
never depends on that process: it is sent only the events the screens draw from
(``SCREEN_EVENTS``: a round's cards reach it with ``round_result``, after its betting closed)
and the published status, which the machine has sealed, without the hands while betting is
open. A ``round_result`` of a round whose betting this filter saw open and not closed is
refused (the machine never publishes one; were it ever to, it stays on this side).

Messages (``kind`` and its fields):

* ``reset``: ``events`` — forget the screen, rebuild it from these (the journal's events of
  the current shoe): a new screen process, or one that fell behind;
* ``events``: ``events`` — published events, in seq order;
* ``status``: ``status`` (the published status), ``now`` (the table clock) and ``mono`` (the
  monotonic clock, shared by both processes, when ``now`` was read), ``speed`` (table
  seconds per real second): the screen process reads the table clock on from them;
* ``backends``: ``backends`` — each transport's backlog and state;
* ``alive``: nothing — the daemon is there (after ``KEEPALIVE_S`` with nothing else to say).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import structlog

log = structlog.get_logger("pokdeng.screens")

#: the events the screens are built from (controller/display/screen.py ``Screen.apply``)
SCREEN_EVENTS = frozenset({"shoe_started", "round_opened", "round_result", "round_cancelled"})
#: the daemon says something at least this often: a screen process that hears nothing for a
#: few of these takes the table for frozen (child.py ``TABLE_SILENT_S``)
KEEPALIVE_S = 1.0
#: the events that end a round's betting window
WINDOW_CLOSED = frozenset({"betting_closed", "round_cancelled"})


def message(kind: str, **fields: Any) -> bytes:
    """One line of the feed."""
    return json.dumps({"kind": kind, **fields}, separators=(",", ":"),
                      ensure_ascii=False).encode() + b"\n"


class SealedFilter:
    """The daemon's side of the seal: what of the events and the status may cross."""

    def __init__(self) -> None:
        self._open: set[tuple[Any, Any]] = set()  # (shoe, round) with betting open

    def events(self, events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The events the screens draw from, in order; a round's result only once its
        betting closed."""
        passed: list[dict[str, Any]] = []
        for event in events:
            kind = event.get("type")
            window = (event.get("shoe"), event.get("round"))
            if kind == "round_opened":
                self._open.add(window)
            elif kind in WINDOW_CLOSED:
                self._open.discard(window)
            elif kind == "shoe_started":
                self._open.clear()
            if kind not in SCREEN_EVENTS:
                continue
            if kind == "round_result" and window in self._open:
                log.error("a round result while its betting is open: not sent to the screens",
                          seq=event.get("seq"))
                continue
            passed.append(dict(event))
        return passed

    @staticmethod
    def status(snapshot: Mapping[str, Any]) -> dict[str, Any]:
        """The published status as the screens may have it: no hands while betting is open,
        and no record of who did what (the journal keeps the who; a screen names roles)."""
        status = dict(snapshot)
        status.pop("last_actions", None)
        if status.get("betting_open"):
            status.pop("hands", None)
        return status
