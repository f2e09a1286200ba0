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
* the table starts it with no shoe open, its shoe numbers after the backend's last event's
  shoe, so no shoe number is dealt twice either.

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

from controller.durability.delivery.held import Held, event_digest, fork_problem
from controller.durability.disk import fsync_directory
from controller.durability.journal import (
    ArchiveBase,
    Continuation,
    Journal,
    JournalError,
    connect,
    last_seq_of,
    open_read_only,
    read_chain,
)
from controller.durability.write_lock import write_transaction
from controller.table.records import MachineSettings


class ContinueRefused(Exception):
    """The history cannot be continued as asked; the message says why and what to do."""


@dataclass(frozen=True)
class BackendEvent:
    """The backend's last event of this table, read and checked from what the supervisor
    brought: its seq, shoe and digest."""
    seq: int
    shoe: int
    sha256: str


def read_backend_event(text: str, table_id: str, where: str) -> BackendEvent:
    """One event (a JSON object, or the last line of JSON Lines) of table ``table_id``."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ContinueRefused(f"{where}: empty: expected the backend's last event of table "
                              f"{table_id} as JSON")
    try:
        event = json.loads(lines[-1] if len(lines) > 1 else text)
    except ValueError as exc:
        raise ContinueRefused(f"{where}: not JSON: {exc}") from None
    if not isinstance(event, dict):
        raise ContinueRefused(f"{where}: expected a JSON object (an event)")
    seq, shoe = event.get("seq"), event.get("shoe")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ContinueRefused(f"{where}: the event has no seq >= 1")
    if event.get("table") != table_id or event.get("id") != f"{table_id}:{seq}":
        raise ContinueRefused(f"{where}: the event is of table {event.get('table')!r} (id "
                              f"{event.get('id')!r}), not of this table {table_id!r}")
    if shoe is not None and (isinstance(shoe, bool) or not isinstance(shoe, int) or shoe < 0):
        raise ContinueRefused(f"{where}: the event's shoe is not a shoe number")
    return BackendEvent(seq, shoe or 0, event_digest(event))


def agreeing_position(event: BackendEvent, answers: dict[str, Held]) -> None:
    """Every backend that answered must hold exactly up to that event: ContinueRefused
    naming the one that does not (continuing after another seq loses or repeats ids)."""
    for name, held in sorted(answers.items()):
        if held.seq != event.seq:
            raise ContinueRefused(
                f"backend {name} holds this table's events up to seq {held.seq}, the event "
                f"given is seq {event.seq}: bring the backend's last event (seq {held.seq})")
        if held.sha256 != event.sha256:
            raise ContinueRefused(
                f"backend {name} holds another event seq {held.seq} than the one given (its "
                f"sha256 {(held.sha256 or '')[:12]}…): bring the event exactly as it stored it")


def refuse_unless_behind(journal_path: str | Path, event: BackendEvent) -> None:
    """ContinueRefused unless the journal is behind the backend's ``event`` or holds another
    event at its seq: a journal that holds the backend's history (or runs past it) is dealt
    on, not continued. A journal that is gone passes (it was lost)."""
    if not Path(journal_path).exists():
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


@dataclass(frozen=True)
class Continued:
    """What ``continue_history`` did: the files set aside, and where the new journal starts."""
    set_aside: Path | None
    moved: tuple[str, ...]
    continuation: Continuation


def continue_history(journal_path: str | Path, key: bytes | None, event: BackendEvent,
                     source: str, settings: MachineSettings,
                     now: float | None = None) -> Continued:
    """Set the journal's files aside and start a new journal after ``event`` (the table
    stopped). ContinueRefused when the journal is open in another process. Run as the user
    who controls the journal's directory (``as_owner.py``, as ``journal continue`` does): the
    files made here are theirs, and none of their links is followed with root's rights."""
    path = Path(journal_path)
    at = datetime.fromtimestamp(now if now is not None else datetime.now(UTC).timestamp(), UTC)
    set_aside, moved = _set_aside(path, at)
    continuation = Continuation(event.seq, event.sha256, source,
                                at.isoformat(timespec="seconds").replace("+00:00", "Z"))
    _start_journal(path, key, continuation, _checkpoint(settings, event))
    return Continued(set_aside, moved, continuation)


def _checkpoint(settings: MachineSettings, event: BackendEvent) -> dict[str, Any]:
    """A table with no shoe open whose next event is seq N + 1 and next shoe the one after
    the backend's last."""
    from controller.table.machine import TableMachine

    state = TableMachine(settings).checkpoint()
    state.update(seq=event.seq, shoe=event.shoe)
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
