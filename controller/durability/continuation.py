"""A table's history continued after the seq its backend holds (``journal continue``).

A state directory restored from an older copy, or copied from another table, is refused at
start when its backend holds more of the table's history, or other events at the same seqs
(delivery/held.py): dealing on it would issue ids the backend already holds, with other
bodies. When no copy of the journal is as new as the backend, the events after the newest copy
exist only at the backend, and a new journal from seq 1 would collide the same way. Continuing
is the way out, with the table stopped:

* the journal's files (journal, WAL, head file, archives) are set aside, untouched, in
  ``forked-<time>/`` beside them, for the audit: nothing is deleted;
* a new journal starts whose first event is the one after the backend's last (``N + 1``): its
  chain starts at an origin hashed from the backend's position (``journal.Continuation``), so
  no id is issued twice and what the backend holds stays the table's history;
* the table starts it with no shoe open, its next shoe past every shoe the backend may hold:
  past the backend's last shoe (its last event's; when that names none, as a continued
  journal's first event, the events handed in back to one that does: a claim no backend
  confirms, so only with ``--unconfirmed``) and past every shoe the journal set aside names
  (its events, its archive base), so no shoe number is dealt twice.

It believes proof, not claims (continuation_evidence.py): the journal being replaced refuses
an event it shows is not the table's history as sent (a delivery row, archive or head file
past it, or its anchor on another body), and a configured backend must confirm it (HTTP and
MQTT say where they stand, a file transport by its file's last event), each that tells
holding exactly up to it, same digest. ``--unconfirmed`` with a reason, for backends that
cannot answer, is recorded in the new journal (``Continuation.unconfirmed``), and a backend
that answers later is held to the event's digest (held.py). The numbers handed in are bounded
(bounds.py), and so are the next seq and shoe the table issues after them: one past the bound
would fail every start afterwards.

The backend's last event (its JSON, as the backend stored it) is what the supervisor brings
from the backend; its SHA-256 must be the one the backend says it holds (``held``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.bounds import MAX_EXTERNAL_NUMBER, external_count
from controller.durability.canonical_form import (
    CanonicalFormError,
    event_digest,
    legacy_event_digest,
)
from controller.durability.continuation_evidence import proof_past, shoes_named
from controller.durability.delivery.held import Held, fork_problem
from controller.durability.disk import fsync_directory
from controller.durability.journal import (
    ArchiveBase,
    Continuation,
    ContinuationOutOfBounds,
    Journal,
    JournalError,
    connect,
    last_seq_of,
    open_read_only,
    read_chain,
    read_continuation,
)
from controller.durability.write_lock import write_transaction
from controller.table.records import MachineSettings


class ContinueRefused(Exception):
    """The history cannot be continued as asked; the message says why and what to do."""


class BadBackendEvent(ContinueRefused):
    """What was handed in as the backend's last event is not a usable event (bad input)."""


#: the install guide's step for an event the table's own evidence contradicts
ASK_AGAIN = ("ask the backend's operator again for the last event of this table it holds, "
             "exactly as stored (docs/install.md, \"A table whose history forked\")")


@dataclass(frozen=True)
class BackendEvent:
    """The backend's last event of this table, read and checked from what the supervisor
    brought: its seq, shoe (None: it names none, as a clock_status), its digest (RFC 8785)
    and its digest in the older documented form that a backend written before RFC 8785 holds
    (held.py); the anchor the table sent it with (journal record and hash), and ``told_shoe``:
    the backend's last shoe as the events handed in tell it (None: they do not);
    ``shoe_unconfirmed``: told by lines before the last (the last names none), which no
    backend confirms."""
    seq: int
    shoe: int | None
    sha256: str
    older_sha256: str | None = None
    anchor: tuple[int, str] | None = None
    told_shoe: int | None = None
    shoe_unconfirmed: bool = False

    def held_by(self, held: Held) -> bool:
        return held.sha256 in (self.sha256, self.older_sha256)

    def backend_shoe(self) -> int | None:
        return self.told_shoe if self.told_shoe is not None else self.shoe


def read_backend_event(text: str, table_id: str, where: str) -> BackendEvent:
    """The backend's last event of table ``table_id``: one JSON object, or the last line of
    JSON Lines (the lines before it, this table's events too, can tell its last shoe).
    BadBackendEvent for what is not a usable event; ContinueRefused for another table's."""
    events = _events_of(text, where)
    for line, event in events:
        _check_event(event, table_id, where if len(events) == 1 else f"{where}:{line}")
    last = events[-1][1]
    for line, event in events[:-1]:
        if event["seq"] >= last["seq"]:
            raise BadBackendEvent(f"{where}:{line}: seq {event['seq']} is not before the last "
                                  f"line's (seq {last['seq']}): the last line must be the "
                                  "backend's last event")
    by_seq = {event["seq"]: event for _, event in events}
    anchor = _anchor_of(last, where)  # before the digest: it names a bad anchor plainly
    try:
        digest = event_digest(last)
    except CanonicalFormError as exc:
        raise BadBackendEvent(f"{where}: the event cannot be the table's: {exc}") from None
    told = _told_shoe(by_seq, last["seq"])
    # only the last line is the event a backend confirms (its digest): a shoe the lines
    # before it tell is a claim, and an edited one would deal a shoe number again
    unconfirmed = last.get("shoe") is None and told is not None and last["seq"] > 1
    return BackendEvent(last["seq"], last.get("shoe"), digest, legacy_event_digest(last),
                        anchor, told, unconfirmed)


def _events_of(text: str, where: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, event) for each event in ``text``: a whole JSON object, or JSON Lines."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise BadBackendEvent(f"{where}: empty: expected the backend's last event of this "
                              "table as JSON")
    try:
        whole = json.loads(text)
    except ValueError as exc:
        if len(lines) == 1:
            raise BadBackendEvent(f"{where}: not JSON: {exc}") from None
        whole = None
    if whole is not None:
        if not isinstance(whole, dict):
            raise BadBackendEvent(f"{where}: expected a JSON object (an event)")
        return [(lines[0][0], whole)]
    events = []
    for n, line in lines:
        try:
            event = json.loads(line)
        except ValueError as exc:
            raise BadBackendEvent(f"{where}:{n}: not JSON: {exc}") from None
        if not isinstance(event, dict):
            raise BadBackendEvent(f"{where}:{n}: expected a JSON object (an event)")
        events.append((n, event))
    return events


def _check_event(event: dict[str, Any], table_id: str, where: str) -> None:
    """Its numbers within bounds.py's (they came from outside), and this table's."""
    try:
        seq = external_count(event.get("seq"), "the event's seq", minimum=1)
        for name in ("shoe", "round"):
            if event.get(name) is not None:
                external_count(event[name], f"the event's {name}")
        # the table issues the next seq and the next shoe: they too must be within bounds
        if seq == MAX_EXTERNAL_NUMBER:
            raise ValueError(f"the event's seq {seq} leaves no next seq within "
                             f"{MAX_EXTERNAL_NUMBER}")
        if event.get("shoe") == MAX_EXTERNAL_NUMBER:
            raise ValueError(f"the event's shoe {MAX_EXTERNAL_NUMBER} leaves no next shoe "
                             f"within {MAX_EXTERNAL_NUMBER}")
    except ValueError as exc:
        raise BadBackendEvent(f"{where}: {exc}: not an event this table sent") from None
    if event.get("table") != table_id or event.get("id") != f"{table_id}:{seq}":
        raise ContinueRefused(f"{where}: the event is of table {event.get('table')!r} (id "
                              f"{event.get('id')!r}), not of this table {table_id!r}: ask "
                              f"the backend's operator for the last event of table "
                              f"{table_id!r} it holds (id {table_id}:<seq>)")


def _anchor_of(event: dict[str, Any], where: str) -> tuple[int, str] | None:
    """The journal record and hash the event names as its anchor (None: it has none)."""
    anchor = event.get("anchor")
    if anchor is None:
        return None
    try:
        if not isinstance(anchor, dict) or not isinstance(anchor.get("hash"), str):
            raise ValueError(f"the event's anchor must be {{\"record\": n, \"hash\": "
                             f"\"<hex>\"}}, got {anchor!r:.80}")
        record = external_count(anchor.get("record"), "the event's anchor record", minimum=1)
    except ValueError as exc:
        raise BadBackendEvent(f"{where}: {exc}: not an event this table sent") from None
    return record, anchor["hash"]


def _told_shoe(by_seq: dict[int, dict[str, Any]], last: int) -> int | None:
    """The backend's last shoe: the last event's, when it names one (the event a backend
    confirms; shoes only grow, so no line before it tells more); else the shoe of the
    nearest event back that names one, when the events run without a gap back to it (or to
    seq 1: none): events follow in seq order, so none between held a later shoe."""
    if by_seq[last].get("shoe") is not None:
        return int(by_seq[last]["shoe"])
    seq = last
    while seq in by_seq and by_seq[seq].get("shoe") is None:
        seq -= 1
    if seq == 0:
        return 0
    if seq in by_seq:
        return int(by_seq[seq]["shoe"])
    return None


@dataclass(frozen=True)
class ShoeRule:
    """The next shoe is past every shoe the backend may hold: past its last shoe as its
    events tell, and past every shoe the journal set aside (or its archives) names."""
    backend: int
    journal: int

    @property
    def last(self) -> int:
        return max(self.backend, self.journal)

    def describe(self) -> str:
        journal = (f"up to {self.journal}" if self.journal else "none")
        return (f"the dealer starts shoe {self.last + 1}, past the backend's last shoe "
                f"({self.backend}) and every shoe the journal set aside names ({journal})")


def shoe_rule(journal_path: str | Path, event: BackendEvent) -> ShoeRule:
    """ContinueRefused when the events handed in do not tell the backend's last shoe."""
    told = event.backend_shoe()
    if told is None:
        raise ContinueRefused(
            f"the backend's last event (seq {event.seq}) names no shoe (a clock_status), so "
            "it does not tell which shoes the backend holds, and a shoe number it holds would "
            "be dealt again: ask the backend's operator for this table's events from the last "
            f"one that names a shoe up to seq {event.seq}, as JSON Lines, and hand them in "
            "instead")
    return ShoeRule(told, shoes_named(journal_path) if holds_evidence(journal_path) else 0)


def agreeing_position(event: BackendEvent, answers: dict[str, Held]) -> None:
    """Every backend that answered must hold exactly up to that event: ContinueRefused
    naming the one that does not (continuing after another seq loses or repeats ids)."""
    for name, held in sorted(answers.items()):
        if held.seq != event.seq:
            raise ContinueRefused(
                f"backend {name} holds this table's events up to seq {held.seq}, the event "
                f"given is seq {event.seq}: bring the backend's last event (seq {held.seq})")
        if not event.held_by(held):
            raise ContinueRefused(
                f"backend {name} holds another event seq {held.seq} than the one given (its "
                f"sha256 {(held.sha256 or '')[:12]}…): bring the event exactly as it stored it")


def holds_evidence(journal_path: str | Path) -> bool:
    """Whether the journal being replaced is there to be weighed: not when it is gone, nor
    when it continues after a seq beyond bounds.py's (made before ``journal continue`` bounded
    it): every start failed before its first record, so it holds nothing but that seq."""
    path = Path(journal_path)
    if not path.exists():
        return False
    conn = open_read_only(path)
    try:
        read_continuation(conn)
    except ContinuationOutOfBounds:
        return bool(conn.execute("SELECT 1 FROM records LIMIT 1").fetchone())
    finally:
        conn.close()
    return True


def refuse_unless_behind(journal_path: str | Path, event: BackendEvent) -> None:
    """ContinueRefused unless the journal is behind the backend's ``event`` or holds another
    event at its seq: a journal that holds the backend's history (or runs past it) is dealt
    on, not continued. A journal that is gone passes (it was lost)."""
    if not holds_evidence(journal_path):
        return
    conn = open_read_only(journal_path)
    try:
        last = last_seq_of(conn)
        problem = fork_problem(conn, last, Held(event.seq, event.sha256, "given"))
    finally:
        conn.close()
    if problem is None:
        raise ContinueRefused(
            f"{journal_path} ends at seq {last} and holds seq {event.seq} as the backend does "
            "(or nothing here tells otherwise): it is not behind the backend; start the table "
            "on it")


def refuse_if_proven_past(journal_path: str | Path, key: bytes | None,
                          event: BackendEvent) -> None:
    """ContinueRefused when the journal being replaced proves the table got further than the
    event's seq, or that the event is not the one it sent (continuation_evidence.py)."""
    if not holds_evidence(journal_path):
        return
    proof = proof_past(journal_path, key, event.seq, event.sha256, event.anchor)
    if proof is not None:
        raise ContinueRefused(
            f"{journal_path}, the journal being replaced, shows that the event handed in "
            f"(seq {event.seq}) is not the table's history as it sent it: {proof}. Continuing "
            f"after it would issue again ids the table already sent: {ASK_AGAIN}; if the "
            f"backend really holds no more than seq "
            f"{event.seq}, it lost events it was sent: have them sent again from this journal "
            "(start the table on it) instead of continuing")


@dataclass(frozen=True)
class Continued:
    """What ``continue_history`` did: the files set aside, where the new journal starts, and
    the rule its next shoe followed."""
    set_aside: Path | None
    moved: tuple[str, ...]
    continuation: Continuation
    shoes: ShoeRule


def continue_history(journal_path: str | Path, key: bytes | None, event: BackendEvent,
                     source: str, settings: MachineSettings, now: float | None = None,
                     unconfirmed: dict[str, str] | None = None) -> Continued:
    """Set the journal's files aside and start a new journal after ``event`` (the table
    stopped), its next shoe past every shoe the backend or the journal set aside names.
    ``unconfirmed`` (who, why): no backend confirmed the event, recorded in the new journal.
    ContinueRefused when the journal is open in another process, or no shoe can be told.
    Run as the user who controls the journal's directory (``as_owner.py``, as ``journal
    continue`` does): the files made here are theirs, and none of their links is followed with
    root's rights."""
    path = Path(journal_path)
    shoes = shoe_rule(path, event)  # read before the journal is set aside
    at = datetime.fromtimestamp(now if now is not None else datetime.now(UTC).timestamp(), UTC)
    set_aside, moved = _set_aside(path, at)
    continuation = Continuation(event.seq, event.sha256, source,
                                at.isoformat(timespec="seconds").replace("+00:00", "Z"),
                                unconfirmed, event.older_sha256)
    _start_journal(path, key, continuation, _checkpoint(settings, event.seq, shoes.last))
    return Continued(set_aside, moved, continuation, shoes)


def _checkpoint(settings: MachineSettings, seq: int, last_shoe: int) -> dict[str, Any]:
    """A table with no shoe open whose next event is seq N + 1 and next shoe the one after
    ``last_shoe``."""
    from controller.table.machine import TableMachine

    state = TableMachine(settings).checkpoint()
    state.update(seq=seq, shoe=last_shoe)
    return state


def _set_aside(path: Path, at: datetime) -> tuple[Path | None, tuple[str, ...]]:
    if path.exists():
        _refuse_if_open(path)  # (closing it may fold its WAL into it: listed after)
    names = [path.name + suffix for suffix in ("", "-wal", "-shm", ".head", ".archive")]
    present = [name for name in names if (path.parent / name).exists()]
    if not present:
        return None, ()
    target = path.parent / f"forked-{at.strftime('%Y%m%dT%H%M%SZ')}"
    target.mkdir(mode=0o750)
    for name in present:
        os.rename(path.parent / name, target / name)
    fsync_directory(target)
    fsync_directory(path.parent)
    return target, tuple(present)


def _refuse_if_open(path: Path) -> None:
    from controller.durability.vacuum import JournalInUse, hold_exclusively

    try:
        conn = connect(path)
    except JournalError as exc:
        raise ContinueRefused(str(exc)) from None
    try:
        hold_exclusively(conn, path)
    except JournalInUse as exc:
        raise ContinueRefused(str(exc)) from None
    finally:
        conn.close()


def _start_journal(path: Path, key: bytes | None, continuation: Continuation,
                   checkpoint: dict[str, Any]) -> None:
    Journal(path, key).close()  # the schema and the chain's kind, as for any new journal
    conn = connect(path)
    try:
        origin = continuation.origin_hash(read_chain(conn, key, path))
        base = ArchiveBase(0, origin, continuation.after_seq, checkpoint)
        with write_transaction(conn):
            conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                             [("continued", continuation.to_json()),
                              ("archive_base", base.to_json())])
            conn.execute("INSERT INTO head(id, records, last_hash) VALUES (1, 0, ?)",
                         (origin,))
    except sqlite3.Error as exc:
        raise JournalError(f"{path}: the new journal was not written: {exc}") from None
    finally:
        conn.close()
