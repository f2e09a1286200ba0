"""The last supervisor actions, as ``status`` shows them: when, what, who, and how it went.

Built from journaled supervisor inputs and their events, so the list survives a restart (the
daemon reads the newest ones back from the journal). Never the card of ``enter_card``: it may
be a card of a round whose betting is open.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from controller.table.events import iso_time
from controller.table.inputs import Supervisor

LAST_ACTIONS_KEPT = 5


def summarise(inp: Supervisor, events: list[dict[str, Any]]) -> dict[str, Any]:
    """One action: ``time``, ``action``, ``by`` and ``outcome`` (done with its event types, or
    refused with the rejection code)."""
    summary: dict[str, Any] = {"time": iso_time(inp.at), "action": inp.action,
                               "by": inp.by.to_dict() if inp.by is not None else None}
    rejected = next((e for e in events if e.get("type") == "input_rejected"), None)
    if rejected is not None:
        summary.update(outcome="refused", code=(rejected.get("data") or {}).get("code"))
    else:
        summary.update(outcome="done", events=[e.get("type") for e in events])
    return summary


class LastActions:
    """The newest supervisor actions, oldest first. Owned by the table's owner thread."""

    def __init__(self, history: Iterable[tuple[Supervisor, list[dict[str, Any]]]] = ()):
        self._recent: deque[dict[str, Any]] = deque(
            (summarise(inp, events) for inp, events in history), maxlen=LAST_ACTIONS_KEPT)

    def record(self, inp: Supervisor, events: list[dict[str, Any]]) -> None:
        self._recent.append(summarise(inp, events))

    def recent(self) -> list[dict[str, Any]]:
        return list(self._recent)
