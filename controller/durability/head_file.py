"""The head file: where the journal stood at the last shoe end, kept beside it.

A journal cut at an entry boundary, with its ``head`` row fixed, is a shorter journal whose
chain holds; restarted on it, the table would issue the cut event ids again with new content.
So the daemon remembers, outside the journal, where the journal reached: ``<journal>.head``,
written atomically (temporary file, fsync, rename, directory fsync) at every shoe end and on
a clean stop::

    {"format": "pokdeng-journal-head", "v": 1, "chain": "hmac-sha256", "record": n,
     "hash": "<hash of record n>", "seq": <last event seq>, "time": "…Z", "mac": "<hex>"}

``mac`` is an HMAC-SHA256 of the other fields (canonical JSON) with the chain's key; a plain
chain's head file has none. At start-up ``tail_problem`` holds the journal to this file and to
the outbox's delivered positions: a journal behind either, or whose record ``n`` has another
hash, refuses to run (the daemon exits 65) instead of re-issuing ids.

What it cannot see: the file deleted, or replaced by an older genuine copy (or, on a plain
chain, forged). The backend's anchors (delivery/anchors.py, ``journal verify --against``)
catch those.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.durability.chain import DESCRIPTIONS, KEYED, ChainHash
from controller.durability.disk import write_durably
from controller.durability.journal import (
    ArchiveBase,
    Journal,
    JournalError,
    canonical_json,
    open_read_only,
    read_base,
)
from controller.regular_file import read_regular

HEAD_FORMAT = "pokdeng-journal-head"


class HeadFileError(JournalError):
    """The head file cannot be read or does not belong to this journal's chain."""


@dataclass(frozen=True)
class HeadMark:
    record: int
    hash: str
    seq: int
    time: str


def head_path(journal_path: str | Path) -> Path:
    """``<journal>.head``, next to the journal."""
    path = Path(journal_path)
    return path.with_name(path.name + ".head")


def _fields(mark: HeadMark, chain_kind: str) -> dict[str, Any]:
    return {"format": HEAD_FORMAT, "v": 1, "chain": chain_kind, "record": mark.record,
            "hash": mark.hash, "seq": mark.seq, "time": mark.time}


def mark_of(journal: Journal, now: float) -> HeadMark:
    """Where ``journal`` stands now."""
    stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
    return HeadMark(journal.record_count(), journal.last_hash(), journal.last_event_seq(),
                    stamp.replace("+00:00", "Z"))


def write_head(path: Path, mark: HeadMark, chain: ChainHash) -> None:
    """Replace the head file with ``mark``, signed with the chain's key when it has one."""
    data = _fields(mark, chain.kind)
    mac = chain.mac(canonical_json(data))
    if mac is not None:
        data["mac"] = mac
    write_durably(path, (canonical_json(data) + "\n").encode())


def read_head(path: Path, chain: ChainHash) -> HeadMark | None:
    """The head file's mark (None when there is none yet); HeadFileError when it is not this
    chain's: unreadable, unsigned or wrongly signed for a keyed chain, or of the other kind."""
    try:  # a FIFO planted at its name would hang the reader: only a regular file is read
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise HeadFileError(f"{path}: cannot read the head file: {exc}") from None
    try:
        data = json.loads(text)
        mark = HeadMark(int(data["record"]), str(data["hash"]), int(data["seq"]),
                        str(data["time"]))
        kind = data["chain"]
        if data.get("format") != HEAD_FORMAT or kind not in DESCRIPTIONS:
            raise ValueError("not a journal head file")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise HeadFileError(f"{path}: not a valid head file: {exc}") from None
    if kind != chain.kind:
        raise HeadFileError(
            f"{path}: the head file was written for a {DESCRIPTIONS[kind].split(' ')[0]} chain "
            f"but the journal's chain is {chain.describe()}: the journal was rewritten, or "
            "the file belongs to another journal")
    if chain.kind == KEYED:
        expected = chain.mac(canonical_json(_fields(mark, kind)))
        if data.get("mac") != expected:
            raise HeadFileError(f"{path}: the head file's MAC does not match the journal's key: "
                                "forged, edited, or from another table")
    return mark


def tail_problem(journal_path: str | Path, chain: ChainHash,
                 head: str | Path | None = None) -> str | None:
    """Why this journal must not run (records lost from its end), or None.

    Holds the journal (read on a connection of its own) to each transport's delivered event
    seq and to its head file (``head``, default ``<journal>.head``). HeadFileError when the
    head file is not this chain's.
    """
    conn = open_read_only(journal_path)
    try:
        conn.execute("BEGIN")  # one snapshot
        return _tail_problem(conn, Path(journal_path), chain,
                             head_path(journal_path) if head is None else Path(head))
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"{journal_path}: not a usable journal database: {exc}") from None
    finally:
        conn.close()


def _tail_problem(conn: sqlite3.Connection, journal_path: Path, chain: ChainHash,
                  path: Path) -> str | None:
    base = read_base(conn)
    last_n, last_seq = conn.execute("SELECT MAX(n), MAX(event_seq) FROM records").fetchone()
    records = int(last_n) if last_n is not None else (0 if base is None else base.records)
    last_seq = int(last_seq) if last_seq is not None else (0 if base is None else base.seq)
    for transport, seq in conn.execute(
            "SELECT transport, last_seq FROM delivery ORDER BY transport"):
        if seq > last_seq:
            return (f"{journal_path}: transport {transport!r} has delivered events up to seq "
                    f"{seq} but the journal ends at seq {last_seq}: events {last_seq + 1}..{seq}, "
                    "already delivered, are missing from the journal; running on would send "
                    "their ids again with other content")
    return (_head_problem(conn, journal_path, chain, path, base, records, last_seq)
            or _checkpoint_problem(conn, journal_path, chain, base, records))


def _head_problem(conn: sqlite3.Connection, journal_path: Path, chain: ChainHash, path: Path,
                  base: ArchiveBase | None, records: int, last_seq: int) -> str | None:
    mark = read_head(path, chain)
    if mark is None:
        return None
    if mark.record > records:
        return (f"{journal_path}: the journal is behind its head file {path}: it ends at record "
                f"{records} (event seq {last_seq}), the head file says record {mark.record} "
                f"(event seq {mark.seq}) was written at {mark.time}; records "
                f"{records + 1}..{mark.record} are missing")
    if base is not None and mark.record <= base.records:
        if mark.record == base.records and mark.hash != base.hash:
            return (f"{journal_path}: record {mark.record} (the archive cut) has another hash "
                    f"than the head file {path} says: the journal was rewritten")
        return None  # archived: `journal verify` checks the archives
    row = conn.execute("SELECT hash, event_seq FROM records WHERE n=?", (mark.record,)).fetchone()
    stored = None if row is None else str(row[0])
    if stored != mark.hash:
        return (f"{journal_path}: record {mark.record} differs from the head file {path} "
                f"(hash {str(stored)[:12]}…, the head file says {mark.hash[:12]}…, written at "
                f"{mark.time}): the journal was rewritten after that")
    seq_there = conn.execute("SELECT MAX(event_seq) FROM records WHERE n <= ?",
                             (mark.record,)).fetchone()[0]
    if seq_there is not None and int(seq_there) != mark.seq:
        return (f"{journal_path}: record {mark.record} ends at event seq {seq_there}, the head "
                f"file {path} says {mark.seq}: the journal was rewritten")
    return None


def _checkpoint_problem(conn: sqlite3.Connection, journal_path: Path, chain: ChainHash,
                        base: ArchiveBase | None, records: int) -> str | None:
    """The shoe-end checkpoint stored in the journal file (checkpoints.py) is a mark too: one
    whose digest holds (an HMAC with the key on a keyed chain) but that follows a record the
    journal no longer has, or has with another hash, shows records lost or rewritten.
    A checkpoint that does not hold is recovery's business (it replays from further back)."""
    from controller.durability import checkpoints

    try:
        mark = checkpoints.latest(conn, chain)
    except JournalError:
        return None
    if mark is None or (base is not None and mark.records <= base.records):
        return None
    if mark.records > records:
        return (f"{journal_path}: the journal ends at record {records}, but its shoe-end "
                f"checkpoint follows record {mark.records} (event seq {mark.seq}): records "
                f"{records + 1}..{mark.records} are missing")
    row = conn.execute("SELECT hash FROM records WHERE n=?", (mark.records,)).fetchone()
    if row is not None and row[0] != mark.hash:
        return (f"{journal_path}: record {mark.records} has another hash than the shoe-end "
                f"checkpoint that follows it says ({str(row[0])[:12]}…, the checkpoint says "
                f"{mark.hash[:12]}…): the journal was rewritten")
    return None
