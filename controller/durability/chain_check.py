"""The live journal's chain checked in short read transactions, and the verified mark.

``verify_in_steps`` is ``verify_connection`` cut into read transactions of ``step`` records
each. One read transaction over a whole month of records would keep one snapshot open for as
long as the walk takes (longer still at idle priority), and a snapshot holds back every WAL
checkpoint behind it: the WAL grows, and with it the owner's commits. Records before the head
never change while the daemon runs (it only appends), so walking them in steps checks the same
chain; the head and the transports' positions are compared in the last step's snapshot. An
archive cut that removes records ahead of the walk starts it again from the new cut.

The **verified mark** (``verified(id=1, mark, digest)``, in the journal file, not a record) says
how far the chain was last found to hold: a record number, that record's chain hash and the
last event seq there. Retention checks only the records after it (O(new records), not the
month). It is trusted only when its digest holds (an HMAC with the chain's key on a keyed
chain: nobody without the key can move it forward) and the record it names is in the live
journal, recomputes to its stored hash and that hash is the mark's. A mark that does not hold
is ignored and the walk starts from the archive cut: the mark only ever saves work, it never
lets a record through unchecked that a walk from the cut would refuse at that moment.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from controller.durability import checkpoints
from controller.durability.chain import ChainHash
from controller.durability.journal import (
    ArchiveBase,
    ChainWalker,
    JournalError,
    VerifyResult,
    canonical_json,
    check_end,
    check_rows,
    read_base,
    walker_from,
)
from controller.durability.write_lock import write_transaction

#: records per read transaction: ~0.1 s of walking, so no snapshot is held for long
STEP_RECORDS = 10_000
MARK_KIND = "verified-mark"
#: how often a walk starts again after archive cuts removed records ahead of it
MAX_RESTARTS = 5

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verified (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    mark TEXT NOT NULL,
    digest TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class Mark:
    """The chain holds from record 1 (or the archive cut) through record ``records``."""
    records: int
    hash: str
    seq: int

    def to_json(self) -> str:
        # "kind" keeps a signed text of another sort (a shoe-end checkpoint names a record,
        # a hash and a seq too) from passing for a mark
        return canonical_json({"kind": MARK_KIND, "records": self.records, "hash": self.hash,
                               "seq": self.seq})


def verify_in_steps(conn: sqlite3.Connection, chain: ChainHash, start: Mark | None = None,
                    step: int = STEP_RECORDS,
                    duty: float = 1.0) -> tuple[VerifyResult, Mark | None]:
    """Walk the live journal's chain from ``start`` (a trusted mark) or from the archive cut,
    ``step`` records per read transaction. Returns the result and, when the chain holds, the
    mark at its end. ``conn`` must not be in a transaction.

    ``duty`` below 1 paces the walk: after each step it rests so that it works that share of
    the time (0.2: a step of 0.1 s, then 0.4 s of rest), as a RAID scrub is rate-limited."""
    if not 0 < duty <= 1:
        raise ValueError(f"duty must be in (0, 1], not {duty}")
    for _attempt in range(MAX_RESTARTS + 1):
        outcome = _walk(conn, chain, start, step, duty)
        if outcome is not None:
            return outcome
        start = None  # a cut overtook the walk: start again from the new cut
    return VerifyResult(False, 0, 0, None, "archive cuts kept overtaking the check"), None


def _walk(conn: sqlite3.Connection, chain: ChainHash, start: Mark | None,
          step: int, duty: float) -> tuple[VerifyResult, Mark | None] | None:
    """One walk; None when an archive cut removed records it had not reached yet."""
    try:
        base = read_base(conn)
    except JournalError as exc:
        return VerifyResult(False, 0, 0, None, str(exc)), None
    first_base = base
    if start is not None and (base is None or start.records > base.records):
        walker = ChainWalker(start.records, start.hash, start.seq, chain)
        base_for_messages: ArchiveBase | None = None  # the walk does not begin at the cut
    else:
        walker = walker_from(base, chain)
        base_for_messages = base
    while True:
        began = time.monotonic()
        conn.execute("BEGIN")
        try:
            base = read_base(conn)
            if base != first_base and base is not None and base.records >= walker.next_n:
                return None
            rows = conn.execute(
                "SELECT n, kind, event_seq, written, body, prev_hash, hash FROM records"
                " WHERE n >= ? ORDER BY n LIMIT ?", (walker.next_n, step)).fetchall()
            problem = check_rows(walker, base_for_messages, rows)
            if problem is not None:
                return problem, None
            if len(rows) < step:
                problem = check_end(conn, walker)
                if problem is not None:
                    return problem, None
                return (VerifyResult(True, walker.records, walker.events),
                        Mark(walker.last_record, walker.prev, walker.last_seq))
        except sqlite3.DatabaseError as exc:
            return VerifyResult(False, walker.records, walker.events, walker.next_n,
                                f"database unreadable: {exc}"), None
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        if duty < 1:  # out of the read transaction: resting holds no snapshot
            time.sleep((time.monotonic() - began) * (1 / duty - 1))


def load_mark(conn: sqlite3.Connection, chain: ChainHash) -> tuple[Mark | None, str]:
    """The stored mark if it can be trusted, else None and why (then walk from the cut)."""
    try:
        row = conn.execute("SELECT mark, digest FROM verified WHERE id=1").fetchone()
    except sqlite3.OperationalError:
        return None, "no verified mark yet"
    if row is None:
        return None, "no verified mark yet"
    text, stored_digest = row
    if not isinstance(text, str) or checkpoints.digest(text, chain) != stored_digest:
        return None, "the verified mark does not match its digest"
    try:
        data = json.loads(text)
        if data.get("kind") != MARK_KIND:
            raise ValueError("not a verified mark")
        mark = Mark(int(data["records"]), str(data["hash"]), int(data["seq"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, "the verified mark is not valid"
    found = conn.execute("SELECT kind, event_seq, written, body, prev_hash, hash FROM records"
                         " WHERE n=?", (mark.records,)).fetchone()
    if found is None:
        return None, f"record {mark.records} of the verified mark is not in the live journal"
    kind, event_seq, written, body, prev_hash, stored_hash = found
    if not isinstance(written, float) or not isinstance(body, str) \
            or not isinstance(prev_hash, str) or stored_hash != mark.hash \
            or chain.digest(mark.records, kind, event_seq, written, prev_hash,
                            body) != stored_hash:
        return None, f"record {mark.records} no longer matches the verified mark"
    last_event = conn.execute("SELECT event_seq FROM records WHERE n <= ? AND event_seq IS NOT"
                              " NULL ORDER BY n DESC LIMIT 1", (mark.records,)).fetchone()
    if last_event is not None and last_event[0] != mark.seq:
        return None, f"the verified mark's seq {mark.seq} is not the journal's there"
    return mark, "ok"


def store_mark(conn: sqlite3.Connection, mark: Mark, chain: ChainHash) -> None:
    """Replace the stored mark in one short write transaction."""
    text = mark.to_json()
    with write_transaction(conn):
        conn.execute(_SCHEMA)
        conn.execute("INSERT INTO verified(id, mark, digest) VALUES (1, ?, ?)"
                     " ON CONFLICT(id) DO UPDATE SET mark=excluded.mark,"
                     " digest=excluded.digest", (text, checkpoints.digest(text, chain)))
