"""Resends that reach into archived shoes: a backend asking from seq 1 gets every event.

Once closed shoes are archived (archive.py) the live journal no longer holds their events;
the archive files do, with every column of every record (record number, body, hash). A resend
reaching below the live journal's base reads them from there, checked first, and sends them
exactly as they went out the first time: the journaled body plus the same anchor
(delivery/anchors.py; the record number and hash are in the archive, and whether an event
carried one depends on the records alone).

What is checked before an archived event goes out:

* the manifest's archives link up from record 1 to the live journal's ``archive_base``
  (each range starts where the previous one ended, on the previous one's last hash);
* each archive read: its SHA-256 as in the manifest, its header as in the manifest, and
  every record walked on the journal's chain (keyed: with the table's key) from the
  archive's first ``prev_hash`` to its ``last_hash``; nothing of an archive is sent unless
  all of it holds.

Archived shoes are closed, so no card of an open round is among them; the outbox still bounds
a resend by what it had published and by ``RESEND_MAX_EVENTS``, so at most that many archived
events are held in memory. A problem (archives moved off the table PC, a missing key, a
damaged file) is logged and the resend starts at the live journal instead, as it did before
archives could be read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import sqlite3
import zlib
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.durability.archives.archive import (
    ARCHIVE_FORMAT,
    MANIFEST_NAME,
    ArchiveError,
    archive_dir_for,
    load_manifest,
)
from controller.durability.chain import ChainHash
from controller.durability.delivery.anchors import EventSealing, anchored_events_after
from controller.durability.journal import (
    ArchiveBase,
    ChainWalker,
    JournalError,
    history_origin,
    read_base,
    read_chain,
    read_continuation,
)

log = logging.getLogger("pokdeng.outbox")

#: the manifest fields an archive's header must repeat
_BOUNDARY = ("first_record", "last_record", "first_seq", "last_seq", "prev_hash", "last_hash")
_COLUMNS = ("n", "kind", "event_seq", "written", "body", "prev_hash", "hash")


@dataclass(frozen=True)
class ArchiveSource:
    """Where a journal's archives are and the key its chain needs (None: a plain chain)."""
    journal_path: Path
    directory: Path
    key: bytes | None = None

    @classmethod
    def beside(cls, journal_path: str | Path, directory: str | Path | None = None,
               key: bytes | None = None) -> ArchiveSource:
        """``directory`` or, by default, ``<journal>.archive/`` next to the journal."""
        path = Path(journal_path)
        return cls(path, Path(directory) if directory else archive_dir_for(path), key)


def archived_events(source: ArchiveSource, conn: sqlite3.Connection, first_seq: int,
                    last_seq: int, checked: set[str] | None = None) -> list[dict[str, Any]]:
    """Events ``first_seq``..``last_seq`` (at most up to the archive base) from the archives,
    each as first sent (body and anchor). Raises ArchiveError (JournalError for a key that
    does not fit) naming the archive and the problem; nothing is returned unless every
    archive read holds. ``checked``: SHA-256 values of archives whose records were walked
    already (the same bytes need no second walk); each archive walked now is added."""
    base = read_base(conn)
    if base is None or first_seq > base.seq:
        return []
    chain = read_chain(conn, source.key, source.journal_path)
    entries = _linked_entries(source.directory, base, history_origin(conn, chain))
    last_seq = min(last_seq, base.seq)
    events: list[dict[str, Any]] = []
    anchoring = EventSealing(chain.keyed, False)  # archives start after a shoe's end: closed
    for entry in entries:
        if entry["last_seq"] < first_seq or entry["first_seq"] > last_seq:
            continue
        events += _read_checked(source.directory, entry, chain, anchoring, first_seq, last_seq,
                                set() if checked is None else checked)
    return events


def _linked_entries(directory: Path, base: ArchiveBase,
                    origin: tuple[str, int]) -> list[dict[str, Any]]:
    """The manifest's archives from record 1 (linked to ``origin``: the genesis hash and seq
    0, or the history the journal continues) to ``base``, checked to link up."""
    manifest = load_manifest(directory)
    if manifest is None:
        raise ArchiveError(f"{directory}: no archive manifest (records 1..{base.records} are "
                           "archived)")
    # Entries past the base are leftovers of an interrupted archive run (archive.py); an
    # entry without a whole range leaves a gap the linking below names.
    entries = sorted((e for e in manifest["archives"] if isinstance(e, dict)
                      and isinstance(e.get("last_record"), int)
                      and e["last_record"] <= base.records),
                     key=lambda e: e["first_record"] if isinstance(e.get("first_record"), int)
                     else 0)
    next_record, (prev_hash, next_seq) = 1, (origin[0], origin[1] + 1)
    for entry in entries:
        if entry.get("first_record") != next_record or entry.get("prev_hash") != prev_hash \
                or entry.get("first_seq") != next_seq:
            raise ArchiveError(f"{directory / MANIFEST_NAME}: {entry.get('file')} does not follow "
                               f"record {next_record - 1} of the archive before it")
        try:
            next_record = int(entry["last_record"]) + 1
            prev_hash = str(entry["last_hash"])
            next_seq = int(entry["last_seq"]) + 1
        except (KeyError, TypeError, ValueError):
            raise ArchiveError(f"{directory / MANIFEST_NAME}: {entry.get('file')}: its range "
                               "is incomplete") from None
    if (next_record - 1, prev_hash, next_seq - 1) != (base.records, base.hash, base.seq):
        raise ArchiveError(f"{directory / MANIFEST_NAME}: the archives end at record "
                           f"{next_record - 1}, the journal's archive base is record "
                           f"{base.records}")
    return entries


def _read_checked(directory: Path, entry: dict[str, Any], chain: ChainHash,
                  anchoring: EventSealing, first_seq: int, last_seq: int,
                  checked: set[str]) -> list[dict[str, Any]]:
    """One archive's events in ``first_seq``..``last_seq``, once all of it is checked."""
    name = str(entry.get("file"))
    path = directory / name
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ArchiveError(f"{path}: cannot read: {exc.strerror}") from None
    sha256 = hashlib.sha256(data).hexdigest()
    if sha256 != entry.get("sha256"):
        raise ArchiveError(f"{path}: damaged or edited: its SHA-256 differs from the manifest")
    # Walking the chain costs a JSON parse, an input check and a hash per record on the
    # delivery thread; bytes walked once (same SHA-256) hold the same records.
    walk = sha256 not in checked
    try:
        lines = gzip.decompress(data).decode("utf-8").splitlines()
        header = json.loads(lines[0])
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError, IndexError) as exc:
        raise ArchiveError(f"{path}: damaged: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != ARCHIVE_FORMAT or any(
            header.get(key) != entry.get(key) for key in _BOUNDARY):
        raise ArchiveError(f"{path}: its header does not match the manifest")
    walker = ChainWalker(entry["first_record"] - 1, entry["prev_hash"], entry["first_seq"] - 1,
                         chain)
    events = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            record = json.loads(line)
            row = tuple(record[column] for column in _COLUMNS)
        except (ValueError, KeyError, TypeError):
            raise ArchiveError(f"{path}: line {number} is not a record") from None
        problem = walker.check(*row) if walk else None
        if problem is not None:
            raise ArchiveError(f"{path}: record {row[0]}: {problem}")
        n, kind, seq, _written, body, _prev, digest = row
        if kind == "event":
            event = anchoring.add(json.loads(body), n, digest)
            if first_seq <= seq <= last_seq:
                events.append(event)
    if walk:
        if (walker.last_record, walker.prev, walker.last_seq) != (
                entry["last_record"], entry["last_hash"], entry["last_seq"]):
            raise ArchiveError(f"{path}: its records end at record {walker.last_record}, the "
                               f"manifest says {entry['last_record']}")
        checked.add(sha256)
    return events


class ResendReader:
    """A delivery thread's source of resent events: the archives below the live journal's
    base (read and checked once per resend), the live journal above it."""

    def __init__(self, source: ArchiveSource, transport: str):
        self.source = source
        self.transport = transport
        self._archived: deque[dict[str, Any]] = deque()
        self._checked: set[str] = set()  # archives (SHA-256) whose chain already held

    def start(self, conn: sqlite3.Connection, first: int, until: int) -> int:
        """A resend of ``first``..``until`` begins: load its archived part. Returns the first
        seq the resend can serve (past the archives when they cannot be read)."""
        self._archived.clear()
        continued = read_continuation(conn)
        if continued is not None and first <= continued.after_seq:
            # The table's history before it was continued is not on this PC: the backend
            # already holds it (it said so; docs/install.md, "A table whose history forked").
            log.warning("outbox %s: resend from seq %d asked; this journal continues the "
                        "table's history after seq %d, which only the backend holds; "
                        "resending from seq %d", self.transport, first, continued.after_seq,
                        continued.after_seq + 1)
            first = continued.after_seq + 1
        base = read_base(conn)
        if base is None or first > base.seq:
            return first
        try:
            self._archived.extend(archived_events(self.source, conn, first, until,
                                                  self._checked))
        except (JournalError, OSError) as exc:  # the live journal is still resent
            log.warning("outbox %s: resend from seq %d asked; events up to seq %d are archived "
                        "and cannot be read (%s); resending from seq %d (pokdeng-table journal "
                        "export --archives has them)", self.transport, first, base.seq, exc,
                        base.seq + 1)
            return base.seq + 1
        log.info("outbox %s: resending seq %d-%d from the archives (checked)", self.transport,
                 first, min(until, base.seq))
        return first

    def batch(self, conn: sqlite3.Connection, next_seq: int, until: int,
              limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` events from ``next_seq`` on, none past ``until``."""
        while self._archived and self._archived[0]["seq"] < next_seq:
            self._archived.popleft()
        if not self._archived:
            base = read_base(conn)
            if base is not None and next_seq <= base.seq:
                # Archived since the resend began (retention runs meanwhile): read them there.
                next_seq = self.start(conn, next_seq, until)
        if self._archived:
            return [event for _, event in zip(range(limit), self._archived)
                    if event["seq"] <= until]
        return [e for e in anchored_events_after(conn, next_seq - 1, limit) if e["seq"] <= until]
