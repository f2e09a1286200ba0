"""``journal verify FILE --against EVENTS.jsonl``: the journal against what a backend received.

EVENTS.jsonl is what the backend holds: the file sink's lines (one event each), an export of
the backend's stored events in the same form, or HTTP request bodies (``{"events": [...]}``)
one a line. Every received event must be in the journal (live or archived) with the same
seq, id and body, and where it carries an anchor, at the anchored record with the anchored
hash. Bodies are compared as JSON values in their RFC 8785 form (canonical_form.py): a backend
that stores ``15`` for an older table's ``15.0`` holds the same event. The first difference,
in seq order, is reported; an event received twice with different content is one too (the
table re-issued an id).

A journal cut at its end, re-grown after a cut, edited or re-chained no longer matches: the
backend's copies of its events and anchors were made before, and a keyed hash cannot be
recomputed without the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.durability.archives.archive import (
    archive_dir_for,
    archived_event_records,
    verify_with_archives,
)
from controller.durability.as_owner import as_owner_of
from controller.durability.canonical_form import same_json
from controller.durability.delivery.anchors import strip_anchor
from controller.durability.journal import (
    JournalError,
    JournalKeyError,
    open_read_only,
)
from controller.durability.recovery import first_difference
from controller.regular_file import open_regular


class ReceivedFileError(JournalError):
    """The received-events file cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Received:
    event: dict[str, Any]
    line: int


@dataclass(frozen=True)
class AgainstResult:
    ok: bool
    received: int                    # distinct events received
    anchored: int                    # of them, with an anchor
    journal_events: int              # events in the journal (archives included)
    problem: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        if not self.ok:
            return self.problem
        return (f"{self.received} received events ({self.anchored} anchored) match the "
                f"journal ({self.journal_events} events)")


def read_received(path: str | Path) -> tuple[dict[int, Received], str | None]:
    """seq -> the event as received (first copy), and the first event received twice with
    different content (described), if any."""
    path = Path(path)
    received: dict[int, Received] = {}
    conflict: str | None = None
    try:  # a file the operator names: as the user who controls its directory (as_owner.py)
        with as_owner_of(path.absolute().parent):
            # not a FIFO (it would hang the command) nor a device: a regular file only
            handle = open(open_regular(path), encoding="utf-8")
    except OSError as exc:
        raise ReceivedFileError(f"{path}: cannot read: {exc.strerror}") from None
    with handle:
        try:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                for event in _events_of(path, number, line):
                    first = received.setdefault(event["seq"], Received(event, number))
                    if conflict is None and not same_json(first.event, event):
                        conflict = (f"event {event['id']} (seq {event['seq']}) was received "
                                    f"twice with different content ({path} lines {first.line} "
                                    f"and {number}): "
                                    f"{first_difference(first.event, event)}")
        except UnicodeDecodeError as exc:
            raise ReceivedFileError(f"{path}: not UTF-8 text: {exc}") from None
    return received, conflict


def _events_of(path: Path, number: int, line: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ReceivedFileError(f"{path} line {number}: not JSON: {exc}") from None
    events = data.get("events") if isinstance(data, dict) and "seq" not in data else [data]
    if not isinstance(events, list):
        raise ReceivedFileError(f"{path} line {number}: neither an event nor a batch of events")
    for event in events:
        if not isinstance(event, dict) or isinstance(event.get("seq"), bool) \
                or not isinstance(event.get("seq"), int) or not isinstance(event.get("id"), str):
            raise ReceivedFileError(f"{path} line {number}: an event without an integer seq "
                                    "and a text id")
    return events


def journal_events(journal_path: Path, archive_dir: Path) -> Iterator[tuple[int, int, str, str]]:
    """(record, seq, body, hash) of every event, archived ones first, in seq order."""
    for record in archived_event_records(journal_path, archive_dir, require_manifest=False):
        yield record["n"], record["event_seq"], record["body"], record["hash"]
    conn = open_read_only(journal_path)
    try:
        yield from conn.execute("SELECT n, event_seq, body, hash FROM records "
                                "WHERE kind='event' ORDER BY n")
    finally:
        conn.close()


def verify_against(journal_path: str | Path, received_path: str | Path,
                   archive_dir: str | Path | None = None,
                   key: bytes | None = None) -> AgainstResult:
    """Check the journal's chain (with ``key`` for a keyed one), then every received event
    against it. ReceivedFileError / JournalError when a file cannot be read."""
    journal_path = Path(journal_path)
    directory = Path(archive_dir) if archive_dir is not None else archive_dir_for(journal_path)
    received, conflict = read_received(received_path)
    anchored = sum(1 for r in received.values() if "anchor" in r.event)
    notes: list[str] = []
    try:
        chain = verify_with_archives(journal_path, directory, key)
    except JournalKeyError as exc:
        if key is not None:
            raise
        chain = None
        notes.append(f"{exc}; the chain's MACs were not checked, only the anchors and bodies")

    def failed(problem: str, journal_count: int = 0) -> AgainstResult:
        return AgainstResult(False, len(received), anchored, journal_count, problem,
                             tuple(notes))

    if chain is not None and not chain.ok:
        return failed(f"the journal's chain does not hold: {chain.describe()}")
    if conflict is not None:
        return failed(conflict)
    problems: dict[int, str] = {}
    found: set[int] = set()
    count = 0
    last_seq = 0
    for n, seq, body, digest in journal_events(journal_path, directory):
        count += 1
        last_seq = seq
        got = received.get(seq)
        if got is not None:
            found.add(seq)
            problem = _compare(got, n, body, digest)
            if problem is not None:
                problems.setdefault(seq, problem)
    for seq, got in received.items():
        if seq not in found:
            where = (f"its events end at seq {last_seq}" if seq > last_seq
                     else "no journal record holds that seq")
            problems[seq] = (f"event {got.event['id']} (seq {seq}, line {got.line}) is not in "
                             f"the journal: {where}")
    if problems:
        return failed(problems[min(problems)], count)
    return AgainstResult(True, len(received), anchored, count, notes=tuple(notes))


def _compare(got: Received, n: int, body: str, digest: str) -> str | None:
    event = got.event
    name = f"event {event['id']} (seq {event['seq']}, line {got.line})"
    journaled = json.loads(body)
    sent = strip_anchor(event)
    if not same_json(sent, journaled):
        return f"{name} differs from the journal's: {first_difference(journaled, sent)}"
    anchor = event.get("anchor")
    if anchor is None:
        return None
    if not isinstance(anchor, dict):
        return f"{name}: its anchor is not an object"
    if anchor.get("record") != n:
        return (f"{name} was anchored at record {anchor.get('record')}, the journal holds it at "
                f"record {n}: records were added or removed before it")
    if anchor.get("hash") != digest:
        return (f"{name} was anchored with hash {str(anchor.get('hash'))[:12]}… at record {n}; "
                f"the journal's record {n} has {digest[:12]}…: the journal was rewritten at or "
                "before that record")
    return None
