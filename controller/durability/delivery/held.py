"""Where a backend stands, held against the journal: a restored disk must not deal on.

A backend tells the table how far it holds this table's history (docs/backend.md, "Where the
backend stands"): ``{"seq": N, "sha256": H}``, N the highest seq up to which it holds every
event 1..N, H the SHA-256 of event N's canonical JSON as it received it (anchor included).

A journal restored from an earlier copy (a failed disk and last night's backup) ends before N,
or, if it dealt on meanwhile, holds another event N: either way it would issue ids the backend
already holds, with other bodies, and a backend that de-duplicates by id would drop them. So
the table compares before it deals (``fork_problem``), and refuses when they disagree.

An event N that is no longer in the live journal (archived) cannot be compared body for body
here; the journal's end is still compared.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from controller.durability.bounds import external_count
from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.journal import canonical_json

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Held:
    """A backend's position: it holds events 1..``seq``; ``sha256`` is event ``seq``'s digest
    (None when it holds nothing: seq 0). ``source`` names the transport that said so."""

    seq: int
    sha256: str | None
    source: str

    def describe(self) -> str:
        if self.seq == 0:
            return f"{self.source}: holds no event of this table"
        return f"{self.source}: holds seq 1-{self.seq} (event {self.seq}: sha256 " \
               f"{(self.sha256 or '')[:12]}…)"


def parse_held(value: Any, source: str) -> Held:
    """A backend's ``held`` object; ValueError saying what is wrong (it came off the network)."""
    if not isinstance(value, dict) or not set(value) <= {"seq", "sha256"} or "seq" not in value:
        raise ValueError(f'expected {{"seq": N, "sha256": "<hex>"}}, got {value!r:.120}')
    seq = external_count(value["seq"], "seq")
    digest = value.get("sha256")
    if seq == 0:
        if digest is not None:
            raise ValueError("seq 0 (nothing held) takes no sha256")
        return Held(0, None, source)
    if not isinstance(digest, str) or not _SHA256.match(digest):
        raise ValueError(f"sha256 must be 64 lowercase hex digits, got {digest!r:.80}")
    return Held(seq, digest, source)


def event_digest(event: dict[str, Any]) -> str:
    """SHA-256 of an event's canonical JSON, as a backend computes it over what it received."""
    return hashlib.sha256(canonical_json(event).encode("utf-8")).hexdigest()


def held_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What a backend holding ``events`` says (one table's, any order, repeats allowed): the
    reference the documented receivers and the tests follow."""
    by_seq = {event["seq"]: event for event in events}
    seq = 0
    while seq + 1 in by_seq:
        seq += 1
    return {"seq": 0} if seq == 0 else {"seq": seq, "sha256": event_digest(by_seq[seq])}


def held_at(event: dict[str, Any] | None) -> dict[str, Any]:
    """What a backend whose last event of this table is ``event`` says (None: it holds none).
    For a backend that keeps the events in seq order, every one after the last it had: the
    file sink, whose appends never skip a seq."""
    return {"seq": 0} if event is None else {"seq": event["seq"],
                                             "sha256": event_digest(event)}


def fork_problem(conn: sqlite3.Connection, last_seq: int, held: Held) -> str | None:
    """Why this journal (on ``conn``, its events ending at ``last_seq``) is not the history the
    backend holds, or None when it is (or when nothing can be compared)."""
    if held.seq == 0:
        return None
    if held.seq > last_seq:
        return (f"the backend ({held.source}) holds this table's events up to seq {held.seq}, "
                f"but this journal ends at seq {last_seq}: it is an earlier copy of the "
                f"table's history (a state directory restored from a backup?)")
    sent = anchored_events_after(conn, held.seq - 1, 1)
    if not sent or sent[0].get("seq") != held.seq:
        return None  # archived: only the end could be compared
    # Only the backend's digest is named: this journal's event N may lie in a round whose
    # betting is open, and a digest of its body (unanchored on a plain chain) would name its
    # card to anyone who tries the 52.
    if event_digest(sent[0]) != held.sha256:
        return (f"the backend ({held.source}) holds another event seq {held.seq} than this "
                f"journal (its sha256 {(held.sha256 or '')[:12]}…): the table's history "
                f"forked at or before seq {held.seq} (a state directory restored from a "
                f"backup, or another table's copy?)")
    return None
