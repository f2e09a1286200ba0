"""Committed events handed to a delivery thread in memory, so it need not read them back.

The owner loop puts each append's events here right after their commit, with the anchor the
journal would give them (anchors.py); the delivery thread takes them in seq order. The journal
stays the source of truth: the thread reads it instead whenever what is here does not follow
on from its position (after a failed batch, a restart, a resend, or an overflow here) or an
event's anchor could not be decided in memory.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from controller.durability.delivery.anchors import UNKNOWN

#: events held per delivery thread; past it the oldest go, and the thread reads the journal
HANDOFF_CAPACITY = 4096


@dataclass(frozen=True)
class HandedEvent:
    seq: int
    body: str                             # the committed canonical JSON
    anchor: dict[str, Any] | str | None   # the anchor, None (sealed) or UNKNOWN

    def event(self) -> dict[str, Any]:
        """The event exactly as ``anchored_events_after`` reads it from the journal."""
        event: dict[str, Any] = json.loads(self.body)
        if self.anchor is not None:
            event["anchor"] = self.anchor
        return event


class Handoff:
    """One delivery thread's queue: one producer (the owner loop), one consumer."""

    def __init__(self, capacity: int = HANDOFF_CAPACITY):
        self._lock = threading.Lock()
        self._items: deque[HandedEvent] = deque()
        self._capacity = capacity
        self.overflowed = False  # events were dropped: the consumer must read the journal

    def put(self, items: list[HandedEvent]) -> None:
        with self._lock:
            self._items.extend(items)
            while len(self._items) > self._capacity:
                self._items.popleft()
                self.overflowed = True

    def take(self, after_seq: int, limit: int) -> list[dict[str, Any]] | None:
        """Up to ``limit`` events following ``after_seq`` without a gap; [] when nothing is
        here; None when what is here does not follow on (read the journal instead)."""
        with self._lock:
            items = self._items
            while items and items[0].seq <= after_seq:
                items.popleft()  # already delivered (read from the journal meanwhile)
            if self.overflowed:
                self.overflowed = False
                return None
            if not items:
                return []
            if items[0].seq != after_seq + 1 or items[0].anchor == UNKNOWN:
                return None
            taken: list[HandedEvent] = []
            while items and len(taken) < limit and items[0].anchor != UNKNOWN \
                    and items[0].seq == after_seq + 1 + len(taken):
                taken.append(items.popleft())
        return [item.event() for item in taken]
