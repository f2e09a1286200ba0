"""What ``journal continue`` holds the backend's "last event N" to, apart from the backends'
own answers: the journal being replaced, and a file transport's file.

The journal being replaced is proof of what it did, not a claim: a ``delivery`` row past N, an
archive (archived only once every transport had delivered it) past N, or its head file past N:
each shows that the table got further than N, so N is not the whole truth (an old event, or a
backend that lost what it was sent): continuing after N would issue those ids again. And an
event handed in whose anchor is one of its records must be what it sent there, body for body.

The shoes it names bound the next shoe from below (``shoes_named``), with the backend's own.

A file transport says where it stands by what its file ends with (``file_position``): the
last complete line, read as the file sink wrote it (anchor included), so its digest is the one
an HTTP or MQTT backend would report for the same event.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from controller.bounds import external_count
from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.delivery.held import Held, event_digest
from controller.durability.head_file import HeadFileError, head_path, read_head
from controller.durability.journal import (
    JournalError,
    open_read_only,
    read_base,
    read_chain,
)
from controller.regular_file import open_regular

#: how much of a file transport's file is read back per step, looking for its last line
_TAIL_CHUNK = 64 * 1024


def proof_past(journal_path: str | Path, key: bytes | None, seq: int, sha256: str,
               anchor: tuple[int, str] | None) -> str | None:
    """What in the journal at ``journal_path`` proves the table got further than ``seq``, or
    that the event handed in (digest ``sha256``, ``anchor``) is not the one it sent; None when
    nothing does (a journal that is gone proves nothing)."""
    path = Path(journal_path)
    if not path.exists():
        return None
    conn = open_read_only(path)
    try:
        conn.execute("BEGIN")  # one snapshot
        return (_delivered_past(conn, seq) or _archived_past(conn, seq)
                or _anchor_proof(conn, seq, sha256, anchor)
                or _head_past(conn, path, key, seq))
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"{path}: not a usable journal database: {exc}") from None
    finally:
        conn.close()


def _delivered_past(conn: sqlite3.Connection, seq: int) -> str | None:
    past = [f"{transport!r} up to seq {delivered}" for transport, delivered in conn.execute(
        "SELECT transport, last_seq FROM delivery WHERE last_seq > ? ORDER BY transport",
        (seq,))]
    if not past:
        return None
    return f"its delivery rows say this table's events were delivered to {', '.join(past)}"


def _archived_past(conn: sqlite3.Connection, seq: int) -> str | None:
    base = read_base(conn)
    if base is None or base.seq <= seq:
        return None
    if base.records == 0:  # a continued journal: a backend held base.seq when it began
        return f"it continues the table's history after seq {base.seq}, which a backend held"
    return (f"its archives hold events up to seq {base.seq} (a shoe is archived only once "
            "every transport has delivered it)")


def _anchor_proof(conn: sqlite3.Connection, seq: int, sha256: str,
                  anchor: tuple[int, str] | None) -> str | None:
    """The event's anchor names a record of this journal with the same hash: this journal
    sent it, so it must be this journal's event ``seq``, body for body, and its last."""
    if anchor is None:
        return None
    record, digest = anchor
    row = conn.execute("SELECT hash, event_seq FROM records WHERE n=?", (record,)).fetchone()
    if row is None or row[0] != digest:
        return None  # not this journal's record (archived, beyond its end, or another history)
    if row[1] != seq:
        return (f"the event's anchor is its record {record}, which is event seq {row[1]}, not "
                f"seq {seq}: the event handed in was edited")
    sent = anchored_events_after(conn, seq - 1, 1)
    if sent and event_digest(sent[0]) != sha256:
        return (f"the event's anchor is its record {record}, event seq {seq}, but the event "
                "handed in differs from what the table sent there: it was edited")
    return None  # the very event it sent: refuse_unless_behind weighs where the journal ends


def _head_past(conn: sqlite3.Connection, path: Path, key: bytes | None,
               seq: int) -> str | None:
    """A head file that is this chain's (a keyed chain's: signed with its key) and says the
    journal reached past ``seq``. One that cannot be read as such proves nothing."""
    try:
        mark = read_head(head_path(path), read_chain(conn, key, path))
    except (HeadFileError, JournalError):
        return None
    if mark is None or mark.seq <= seq:
        return None
    return (f"its head file {head_path(path)} says the journal reached seq {mark.seq} at "
            f"{mark.time}")


def shoes_named(journal_path: str | Path) -> int:
    """The highest shoe number the journal at ``journal_path`` names: in its events, or in its
    archive base (the machine after the last archived record, or a continued journal's start);
    0 when it names none or is gone."""
    path = Path(journal_path)
    if not path.exists():
        return 0
    conn = open_read_only(path)
    try:
        conn.execute("BEGIN")
        row = conn.execute("SELECT MAX(json_extract(body, '$.shoe')) FROM records "
                           "WHERE kind='event'").fetchone()
        highest = int(row[0]) if row and isinstance(row[0], int) else 0
        base = read_base(conn)
        shoe = None if base is None else base.checkpoint.get("shoe")
        if isinstance(shoe, int) and not isinstance(shoe, bool):
            highest = max(highest, shoe)
        return highest
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"{path}: not a usable journal database: {exc}") from None
    finally:
        conn.close()


def file_position(path: str | Path, table: str, name: str) -> Held | None:
    """Where a file transport's file stands: the event on its last complete line (seq and
    digest); None when there is no file or no complete line yet (it cannot tell). ValueError
    naming the file when that line is not an event of ``table``, or when the name holds no
    regular file (a link is not followed, a FIFO or device is not opened:
    controller/regular_file.py).
    Run as the owner of the file's directory (as_owner.py): whoever controls it controls
    what is at that name."""
    try:
        line = _last_complete_line(Path(path))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it: {exc.strerror}") from None
    if line is None:
        return None
    try:
        event: Any = json.loads(line)
    except ValueError as exc:
        raise ValueError(f"{path}: its last line is not JSON: {exc}") from None
    if not isinstance(event, dict) or event.get("table") != table:
        raise ValueError(f"{path}: its last line is not an event of table {table!r}")
    seq = external_count(event.get("seq"), f"{path}: its last event's seq", minimum=1)
    return Held(seq, event_digest(event), name)


def _last_complete_line(path: Path) -> bytes | None:
    """The file's last line that ends with a newline (a torn write after it is ignored, as
    the file sink cuts it off), read backwards from the end."""
    with os.fdopen(open_regular(path, follow=False), "rb") as file:
        end = file.seek(0, os.SEEK_END)
        tail = b""
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            file.seek(start)
            tail = file.read(end - start) + tail
            end = start
            before_last_newline = tail[:max(tail.rfind(b"\n"), 0)].rstrip()
            if b"\n" in before_last_newline:
                break  # the last complete line is all here
    cut = tail.rfind(b"\n")
    lines = [line for line in tail[:max(cut, 0)].split(b"\n") if line.strip()]
    return lines[-1] if lines else None
