"""Shoe-end checkpoints: where recovery starts, tied to the journal's hash chain.

At every shoe end the daemon stores the table machine's checkpoint (the same
``controller/table/checkpoint.py`` capture the archive keeps at its cut) in the journal's
SQLite file, right after the transaction that journaled the shoe-ending entry. It is stored in
the archive base's format (``ArchiveBase``: the record it follows, that record's chain hash,
the last event seq, the checkpoint) with a SHA-256 of that text, in its own one-row table::

    checkpoint(id=1, base TEXT, digest TEXT)

The checkpoint is not part of the chain (record hashes are unchanged), so recovery trusts it
only once it matches the chain (``check_against_chain``): its digest holds, the record it names
is in the live journal and not past the head, that record's stored hash recomputes from its
columns and equals the checkpoint's, it is the last record of an entry holding the
``shoe_ended`` of the checkpoint's shoe, and the seqs agree. Anything else is
``CheckpointRefused`` and recovery replays from the archive base (or record 1) instead: the
answer is then derived from chained records only (docs/durability.md).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from typing import TYPE_CHECKING

from controller.durability.chain import ChainHash
from controller.durability.journal import ArchiveBase, Journal, JournalError
from controller.durability.write_lock import write_transaction

if TYPE_CHECKING:
    from controller.table.machine import TableMachine

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoint (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    base TEXT NOT NULL,
    digest TEXT NOT NULL
)
"""


class CheckpointRefused(JournalError):
    """The stored checkpoint does not match the journal's chain; the message says how."""


def digest(text: str, chain: ChainHash | None = None) -> str:
    """SHA-256 of the checkpoint's text; on a keyed chain an HMAC with the chain's key, so
    that nobody without the key can store a checkpoint recovery would start from."""
    mac = None if chain is None else chain.mac(text)
    return mac if mac is not None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def store(conn: sqlite3.Connection, base: ArchiveBase, chain: ChainHash | None = None, *,
          lock: threading.Lock | None = None) -> None:
    """Replace the stored checkpoint with ``base``, in one durable transaction (``lock``: the
    journal's ``writer_lock``, when other threads of this process write to it)."""
    text = base.to_json()
    with write_transaction(conn, lock=lock):
        conn.execute(_SCHEMA)
        conn.execute("INSERT INTO checkpoint(id, base, digest) VALUES (1, ?, ?)"
                     " ON CONFLICT(id) DO UPDATE SET base=excluded.base,"
                     " digest=excluded.digest", (text, digest(text, chain)))


def save_at_shoe_end(journal: Journal, machine: TableMachine) -> ArchiveBase:
    """Store ``machine``'s checkpoint as the state right after the journal's last record.

    Call right after the entry holding ``shoe_ended`` was journaled, before any other input.
    Raises ValueError when no checkpoint can be taken there (a shoe is open, or the checkpoint
    would not rebuild the same status), JournalError when it cannot be written."""
    checkpoint = machine.checkpoint()
    rebuilt = type(machine).from_checkpoint(machine.settings, checkpoint)
    if rebuilt.status() != machine.status():
        raise ValueError("the checkpoint does not rebuild the table's status")
    base = ArchiveBase(journal.record_count(), journal.last_hash(), journal.last_event_seq(),
                       checkpoint)
    try:
        store(journal.database(), base, journal.chain, lock=journal.writer_lock)
    except sqlite3.Error as exc:
        raise JournalError(f"{journal.path}: checkpoint not written: {exc}") from exc
    return base


def latest(conn: sqlite3.Connection, chain: ChainHash | None = None) -> ArchiveBase | None:
    """The stored checkpoint; None when there is none (an older journal).

    Raises CheckpointRefused when the row is there but damaged or edited."""
    try:
        row = conn.execute("SELECT base, digest FROM checkpoint WHERE id=1").fetchone()
    except sqlite3.OperationalError:
        return None  # no checkpoint table: written before checkpoints existed
    if row is None:
        return None
    text, stored_digest = row
    if not isinstance(text, str) or digest(text, chain) != stored_digest:
        raise CheckpointRefused("the stored checkpoint does not match its digest "
                                "(edited or damaged)")
    try:
        data = json.loads(text)
        base = ArchiveBase(int(data["records"]), str(data["hash"]), int(data["seq"]),
                           dict(data["checkpoint"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointRefused(f"the stored checkpoint is not valid: {exc}") from None
    return base


def check_against_chain(conn: sqlite3.Connection, base: ArchiveBase,
                        chain: ChainHash | None = None) -> None:
    """Refuse a checkpoint that does not sit on the chain where it says (CheckpointRefused).

    Cost: a handful of indexed lookups, whatever the journal's size."""
    n = base.records
    where = f"the checkpoint after record {n}"
    head = conn.execute("SELECT records FROM head WHERE id=1").fetchone()
    head_records = 0 if head is None else int(head[0])
    if n > head_records:
        raise CheckpointRefused(f"{where} points past the journal's head "
                                f"(the journal ends at record {head_records})")
    row = conn.execute("SELECT kind, event_seq, written, body, prev_hash, hash FROM records"
                       " WHERE n=?", (n,)).fetchone()
    if row is None:
        raise CheckpointRefused(f"{where}: record {n} is not in the live journal")
    kind, event_seq, written, body, prev_hash, stored_hash = row
    if not isinstance(written, float) or not isinstance(body, str) \
            or not isinstance(prev_hash, str) \
            or (chain or ChainHash()).digest(n, kind, event_seq, written, prev_hash,
                                             body) != stored_hash:
        raise CheckpointRefused(f"{where}: record {n} does not match its own hash")
    if stored_hash != base.hash:
        raise CheckpointRefused(f"{where}: it names hash {base.hash[:12]}…, record {n} has "
                                f"{str(stored_hash)[:12]}…")
    if kind != "event" or event_seq != base.seq:
        raise CheckpointRefused(f"{where}: record {n} is not event seq {base.seq}")
    if base.checkpoint.get("seq") != base.seq:
        raise CheckpointRefused(f"{where}: its table state is at seq "
                                f"{base.checkpoint.get('seq')!r}, not {base.seq}")
    after = conn.execute("SELECT kind FROM records WHERE n=?", (n + 1,)).fetchone()
    if after is not None and after[0] != "input":
        raise CheckpointRefused(f"{where}: record {n} is not the end of an entry")
    entry_input = conn.execute("SELECT MAX(n) FROM records WHERE n < ? AND kind='input'",
                               (n,)).fetchone()[0]
    if entry_input is None:
        raise CheckpointRefused(f"{where}: the entry holding record {n} is not in the journal")
    ended = [json.loads(text) for (text,) in conn.execute(
        "SELECT body FROM records WHERE n > ? AND n <= ? AND kind='event'"
        " AND json_extract(body, '$.type')='shoe_ended'", (entry_input, n))]
    shoes = [event.get("shoe") for event in ended if isinstance(event, dict)]
    if base.checkpoint.get("shoe") not in shoes:
        raise CheckpointRefused(f"{where}: its entry does not end shoe "
                                f"{base.checkpoint.get('shoe')!r}")


def describe(base: ArchiveBase) -> str:
    return f"shoe {base.checkpoint.get('shoe')} (record {base.records}, seq {base.seq})"
