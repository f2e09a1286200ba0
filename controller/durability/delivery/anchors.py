"""Anchors: each event leaves the table with its journal record's position and hash.

``"anchor": {"record": n, "hash": "<hex>"}`` is added to the event envelope when it is read
for delivery (the journaled body cannot hold its own hash). The backend thereby keeps a copy
of the chain's head at every event it received, and ``journal verify --against`` holds the
journal to it: a journal rewritten, cut or re-grown after the fact no longer matches what the
backend was sent.

Sealing: a record's hash covers every record before it, card inputs included. A keyed hash
(HMAC-SHA256) reveals nothing without the key, so with a keyed chain every event carries its
anchor. A plain SHA-256 does: with the other columns known, the 52 possible cards of a sealed
input can be tried in no time. So with a plain chain an event whose record lies inside a
round's betting window (after its ``round_opened``, before its ``betting_closed`` or
``round_cancelled``) carries no anchor, now or ever: whether an event is anchored depends on the
journal alone, so a repeat after a restart sends the very same bytes. The next anchored event
(``betting_closed`` itself) covers those records.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from controller.durability.chain import KEYED
from controller.durability.journal import chain_kind

#: events that end a round's betting window (its cards may be hashed from then on)
BETTING_ENDS = ("betting_closed", "round_cancelled")


def anchor_of(n: int, digest: str) -> dict[str, Any]:
    return {"record": n, "hash": digest}


def _betting_open_before(conn: sqlite3.Connection, n: int) -> bool:
    """Whether a round's betting window is open just before record ``n`` (from the journal)."""
    # Backwards from n: stops at the newest round_opened (a round is a few dozen records).
    row = conn.execute(
        "SELECT n FROM records WHERE kind='event' AND n < ? "
        "AND json_extract(body, '$.type')='round_opened' ORDER BY n DESC LIMIT 1",
        (n,)).fetchone()
    if row is None:
        return False
    closed = conn.execute(
        "SELECT 1 FROM records WHERE kind='event' AND n > ? AND n < ? "
        f"AND json_extract(body, '$.type') IN ({','.join('?' * len(BETTING_ENDS))}) LIMIT 1",
        (row[0], n, *BETTING_ENDS)).fetchone()
    return closed is None


#: ``EventSealing.anchor`` cannot tell (the betting window's state is not known yet)
UNKNOWN = "unknown"


class EventSealing:
    """Decides each event's anchor in journal order: its record's anchor, None while a plain
    chain's betting window is open, or ``UNKNOWN`` when the window's state is not known.

    ``betting_open``: whether a betting window is open before the first event it is given
    (always False for a keyed chain; None: not known until the next ``round_opened`` or
    betting end, which settle it).
    """

    def __init__(self, keyed: bool, betting_open: bool | None):
        self.keyed = keyed
        self.betting_open = False if keyed else betting_open

    def anchor(self, n: int, event_type: Any, digest: str) -> dict[str, Any] | str | None:
        if self.keyed:
            return anchor_of(n, digest)
        if event_type == "round_opened":  # its record chains over closed rounds only
            self.betting_open = True
            return anchor_of(n, digest)
        if event_type in BETTING_ENDS:
            self.betting_open = False
            return anchor_of(n, digest)
        if self.betting_open is None:
            return UNKNOWN
        return None if self.betting_open else anchor_of(n, digest)

    def add(self, event: dict[str, Any], n: int, digest: str) -> dict[str, Any]:
        """``event`` (journal record ``n``, hash ``digest``) with its anchor, unless sealed; for
        a reader that knows the window's state (it started where it is known)."""
        anchor = self.anchor(n, event.get("type"), digest)
        assert anchor != UNKNOWN, "the betting window's state must be known here"
        if anchor is not None:
            event["anchor"] = anchor
        return event


def sealing_after(conn: sqlite3.Connection, n: int) -> EventSealing:
    """The sealing state for the events after record ``n`` of the journal on ``conn``."""
    keyed = chain_kind(conn) == KEYED
    return EventSealing(keyed, False if keyed else _betting_open_before(conn, n + 1))


def anchored_events_after(conn: sqlite3.Connection, seq: int, limit: int) -> list[dict[str, Any]]:
    """Events with seq greater than ``seq`` (at most ``limit``), each with its anchor where the
    chain allows one (see the module's doc)."""
    rows = conn.execute(
        "SELECT n, body, hash FROM records WHERE event_seq > ? ORDER BY event_seq LIMIT ?",
        (seq, limit)).fetchall()
    if not rows:
        return []
    sealing = sealing_after(conn, rows[0][0] - 1)
    return [sealing.add(json.loads(body), n, digest) for n, body, digest in rows]


def strip_anchor(event: dict[str, Any]) -> dict[str, Any]:
    """The event as journaled: what was sent, without the anchor added on the way out."""
    return {key: value for key, value in event.items() if key != "anchor"}
