"""Where a backend stands, held against the journal: a restored disk must not deal on.

A backend tells the table how far it holds this table's history (docs/backend.md, "Where the
backend stands"): ``{"seq": N, "sha256": H}``, N the highest seq up to which it holds every
event 1..N, H the SHA-256 of event N's RFC 8785 form as it received it (anchor included;
canonical_form.py).

A journal restored from an earlier copy (a failed disk and last night's backup) ends before N,
or, if it dealt on meanwhile, holds another event N: either way it would issue ids the backend
already holds, with other bodies, and a backend that de-duplicates by id would drop them. So
the table compares before it deals (``fork_problem``), and refuses when they disagree.

An event N that is no longer in the live journal (archived) cannot be compared body for body
here; the journal's end is still compared.

Migration: tables before RFC 8785 documented H over Python's ``json.dumps`` text (sorted keys,
no spaces), which writes ``15.0`` where JavaScript writes ``15``. A backend written from those
docs keeps working: H is accepted in either form. Both are digests of the very event this
journal holds, so accepting the older one loses nothing a fork check needs; for the events this
version writes (integers as integers) the two forms differ only for numbers written with an
exponent. A digest in neither form is reported as a digest difference, told apart from a
journal that ends before the backend.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from controller.bounds import external_count
from controller.durability.canonical_form import (
    CANONICAL_FORM,
    CanonicalFormError,
    legacy_event_digest,
)

# held's digest, where callers have always imported it from (canonical_form.py defines it)
from controller.durability.canonical_form import event_digest as event_digest
from controller.durability.delivery.anchors import BETTING_ENDS, anchored_events_after
from controller.durability.journal import read_continuation

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

#: how ``fork_problem`` begins when the journal holds the backend's event N and only the digest
#: differs (a hashing difference, most likely), as against a journal that ends before it
DIGEST_DIFFERS = "the backend's hash of event"


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


def held_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What a backend holding ``events`` says (one table's, any order, repeats allowed): the
    reference the documented receivers and the tests follow."""
    by_seq = {event["seq"]: event for event in events}
    seq = 0
    while seq + 1 in by_seq:
        seq += 1
    return {"seq": 0} if seq == 0 else {"seq": seq, "sha256": event_digest(by_seq[seq])}


def digests_of(event: dict[str, Any]) -> tuple[str, ...]:
    """The digests of ``event`` a backend may hold: its RFC 8785 one first, then the older
    documented form's (module doc)."""
    try:
        return event_digest(event), legacy_event_digest(event)
    except CanonicalFormError:  # not from this table's writer: the older form only
        return (legacy_event_digest(event),)


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
        return (f"the journal is behind the backend: the backend ({held.source}) holds this "
                f"table's events up to seq {held.seq}, but this journal ends at seq "
                f"{last_seq}: it is an earlier copy of the table's history (a state directory "
                f"restored from a backup?)")
    sent = anchored_events_after(conn, held.seq - 1, 1)
    if not sent or sent[0].get("seq") != held.seq:
        return _origin_problem(conn, held)  # else archived: only the end could be compared
    event = sent[0]
    ours = digests_of(event)
    if held.sha256 in ours:
        return None
    # This journal's digest is named only when it cannot carry a sealed card: its event N may
    # lie in a round whose betting is open, and a digest of its body (unanchored on a plain
    # chain) would name its card to anyone who tries the 52.
    if _sealed(conn, event):
        our_words = "this journal's digest is not shown: its round's betting is still open"
    else:
        our_words = f"this journal's event {held.seq} has sha256 {ours[0]}"
    return (f"{DIGEST_DIFFERS} {held.seq} differs: the backend ({held.source}) "
            f"holds event {held.seq} with sha256 {held.sha256}; {our_words} (the "
            f"{CANONICAL_FORM} form of the event as sent, anchor included; docs/backend.md). "
            f"This journal holds an event {held.seq} with the same id ({event.get('id')}), so "
            f"a hashing difference is the likely cause; if the backend does hash each event "
            f"as received in that form, the table's history forked at or before seq "
            f"{held.seq} (a state directory restored from a backup that dealt on, or another "
            f"table's copy?)")


def _origin_problem(conn: sqlite3.Connection, held: Held) -> str | None:
    """A journal continued after seq N (``journal continue``) holds no event N, but it
    recorded the digest of the event N it was continued from: a backend holding another event
    N means the event handed in was not the backend's (edited, or not its last), so this
    journal's history forked there. A continuation recorded without the older form's digest
    and confirmed by a backend then is not held to it: that backend may hash in the older
    form, and it had compared the event itself."""
    continuation = read_continuation(conn)
    if continuation is None or continuation.after_seq != held.seq:
        return None
    recorded = {continuation.sha256, continuation.older_sha256} - {None}
    if held.sha256 in recorded:
        return None
    if continuation.older_sha256 is None and continuation.unconfirmed is None:
        return None
    return (f"the table's history forked at seq {held.seq}: the backend ({held.source}) holds "
            f"event {held.seq} with sha256 {held.sha256}, but this journal continues the "
            f"table's history (journal continue, {continuation.at}"
            f"{', UNCONFIRMED' if continuation.unconfirmed else ''}) after an event "
            f"{held.seq} with sha256 {continuation.sha256}: the event handed in was not the "
            f"one the backend holds (docs/install.md, \"A table whose history forked\")")


def _sealed(conn: sqlite3.Connection, event: dict[str, Any]) -> bool:
    """Whether ``event`` lies in a round whose betting has not closed in this journal (its
    digest could then be tried against the 52 cards). Round-less events are not sealed."""
    if event.get("round") is None:
        return False
    row = conn.execute("SELECT n FROM records WHERE event_seq = ?", (event["seq"],)).fetchone()
    opened = conn.execute(
        "SELECT n FROM records WHERE kind='event' AND n <= ? "
        "AND json_extract(body, '$.type')='round_opened' ORDER BY n DESC LIMIT 1",
        (row[0],)).fetchone()
    if opened is None:
        return False
    closed = conn.execute(
        "SELECT 1 FROM records WHERE kind='event' AND n > ? "
        f"AND json_extract(body, '$.type') IN ({','.join('?' * len(BETTING_ENDS))}) LIMIT 1",
        (opened[0], *BETTING_ENDS)).fetchone()
    return closed is None
