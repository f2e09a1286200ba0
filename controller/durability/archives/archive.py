"""Journal retention: move closed, delivered shoes out of the live journal into gzip archives.

A table writes ~400 records per shoe for months; the live journal keeps only what the table
still needs. ``archive_closed_shoes`` cuts the journal after the last shoe that

* is closed (its ``shoe_ended`` event is journaled) and older than the retention age, and
* was delivered by every transport in the ``delivery`` table (archiving never takes an event
  the outbox still has to send),

writes records 1..N (or the previous cut+1..N) to ``<journal>.archive/records-<a>-<b>.jsonl.gz``
and removes them from the live journal in one transaction that also stores the cut in meta
``archive_base``: the record count, the chain hash of record N, the last event seq, and the
table machine's checkpoint right after record N, so recovery starts from that checkpoint and
replays only the live records.

Archive file (gzip, JSON Lines): a header line, then one line per record with every column::

    {"format": "pokdeng-journal-archive", "v": 1, "first_record": a, "last_record": b,
     "first_seq": …, "last_seq": …, "prev_hash": <hash of record a-1>, "last_hash": <hash of b>,
     "records": …, "events": …, "shoes": [...], "checkpoint": {...}, "created": "…Z"}
    {"n": a, "kind": "input", "event_seq": null, "written": …, "body": "…", "prev_hash": …,
     "hash": …}

``manifest.json`` in the same directory lists every archive with the same boundary hashes and
the SHA-256 of the file. ``verify_with_archives`` walks archives and live journal as one chain.

Crash safety: the archive file and the manifest are written to a temporary name, fsynced and
renamed before the live records are deleted. A crash between the two leaves an archive whose
records are still live; it is ignored by verify (reported as a note) and replaced by the next
archive run.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.durability import chain_check, vacuum
from controller.durability.chain import ChainHash
from controller.durability.disk import write_durably
from controller.durability.journal import (
    GENESIS_HASH,
    ArchiveBase,
    ChainWalker,
    JournalError,
    VerifyResult,
    canonical_json,
    check_rows,
    connect,
    group_entries,
    history_origin,
    open_read_only,
    read_base,
    read_chain,
    verify_connection,
    walker_from,
)
from controller.durability.recovery import RecoveryError, replay
from controller.durability.write_lock import write_transaction

if TYPE_CHECKING:
    from controller.table.records import MachineSettings

ARCHIVE_FORMAT = "pokdeng-journal-archive"
MANIFEST_FORMAT = "pokdeng-journal-archive-manifest"
MANIFEST_NAME = "manifest.json"
_ARCHIVE_NAME = re.compile(r"^records-(\d+)-(\d+)\.jsonl\.gz$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_RECORD_COLUMNS = ("n", "kind", "event_seq", "written", "body", "prev_hash", "hash")


class ArchiveError(JournalError):
    """Archiving cannot go ahead; the message says which file and why. Nothing was removed
    by the cut that failed (cuts before it in the same run stand: each is whole)."""


def parse_duration(text: str) -> float:
    """``7d``, ``12h``, ``30m``, ``90s``, ``2w`` or plain seconds -> seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"not a duration: {text!r} (use e.g. 7d, 12h, 30m, 90s)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def archive_dir_for(journal_path: str | Path) -> Path:
    """Where a journal's archives live by default: ``<journal>.archive/`` next to it."""
    path = Path(journal_path)
    return path.with_name(path.name + ".archive")


def archive_name(first_record: int, last_record: int) -> str:
    return f"records-{first_record:012d}-{last_record:012d}.jsonl.gz"


@dataclass(frozen=True)
class ArchiveResult:
    archived: bool
    reason: str                      # what was archived, or why nothing was
    file: Path | None = None
    first_record: int = 0
    last_record: int = 0
    first_seq: int = 0
    last_seq: int = 0
    shoes: tuple[int, ...] = ()
    files: int = 1                   # archive files written (one per cut)

    @property
    def records(self) -> int:
        return self.last_record - self.first_record + 1 if self.archived else 0

    def describe(self) -> str:
        if not self.archived:
            return f"nothing archived: {self.reason}"
        shoes = ", ".join(str(s) for s in self.shoes)
        return (f"archived records {self.first_record}-{self.last_record} (events "
                f"{self.first_seq}-{self.last_seq}, shoe(s) {shoes}) to {self.file}"
                + (f" and {self.files - 1} archive(s) before it" if self.files > 1 else ""))


# --- archiving ---------------------------------------------------------------------------------

#: records removed per write transaction at most (a cut never splits a shoe, so one shoe may go
#: over): a cut holds SQLite's write lock, and the owner loop's next append waits for it
CUT_RECORDS = 2_000
#: records read per statement while looking for the shoes to archive
SCAN_RECORDS = 10_000


@dataclass(frozen=True)
class _ShoeEnd:
    """The end of the entry holding a shoe's ``shoe_ended``: where a cut may go."""
    last_record: int
    last_seq: int


@dataclass
class _Cut:
    last_record: int
    last_hash: str
    last_seq: int
    shoes: list[int]
    checkpoint: dict[str, Any]


def archive_closed_shoes(journal_path: str | Path, older_than_s: float,
                         now: float | None = None, *, settings: MachineSettings | None = None,
                         archive_dir: str | Path | None = None,
                         key: bytes | None = None, trust_mark: bool = False,
                         cut_records: int = CUT_RECORDS,
                         between_cuts: Callable[[], None] | None = None) -> ArchiveResult:
    """Archive every closed, delivered shoe whose ``shoe_ended`` is older than ``older_than_s``.

    ``settings`` are the table's ``MachineSettings`` (needed to replay the journal for the
    checkpoint); without them they are read from the journal's events (table id, betting
    seconds) with defaults for the rest, and a journal they do not reproduce is refused.
    Safe to call while the daemon writes the journal: it reads in short read transactions and
    removes records in cuts of about ``cut_records`` (each one archive file and one short
    write transaction; ``between_cuts`` is called after each), then returns the freed pages
    to the file system in short steps (``vacuum.py``; ``between_cuts`` after each step too).
    A keyed journal needs its ``key``.

    The chain is checked first: from the archive cut to the head, or with ``trust_mark``
    only after the verified mark (``chain_check.py``); either way every record archived is
    checked again as it is read. Raises ArchiveError when it cannot archive safely; returns
    ``archived=False`` with the reason when there is nothing to archive.
    """
    journal_path = Path(journal_path)
    if not journal_path.is_file():
        raise ArchiveError(f"{journal_path}: no such journal file")
    directory = Path(archive_dir) if archive_dir is not None else archive_dir_for(journal_path)
    now = time.time() if now is None else float(now)
    cutoff = now - float(older_than_s)
    # NORMAL: a cut's commit is not fsynced while it holds the write lock. A cut lost in a
    # power cut comes back as live records (their archive is then a leftover, redone next
    # run); WAL commits are kept in order, so no later commit survives without it.
    conn = connect(journal_path, synchronous="NORMAL")
    try:
        chain = read_chain(conn, key, journal_path)
        _check_chain(conn, chain, journal_path, trust_mark)
        base = read_base(conn)
        _drop_leftovers(directory, base)
        ends, reason = _closed_shoe_ends(conn, base, cutoff)
        if not ends:
            return ArchiveResult(False, reason)
        cutter = _Cutter(conn, journal_path, directory, base, chain, settings, now)
        for end in _group(ends, base, cut_records):
            cutter.cut(end)
            if between_cuts is not None:
                between_cuts()
        vacuum.release_free_pages(conn, between_steps=between_cuts)
        return cutter.result()
    except sqlite3.Error as exc:
        raise ArchiveError(f"{journal_path}: {exc}") from None
    finally:
        conn.close()


def _check_chain(conn: sqlite3.Connection, chain: ChainHash, journal_path: Path,
                 trust_mark: bool) -> None:
    """The live chain holds (from the mark, or from the cut); the mark moves to its end."""
    start = chain_check.load_mark(conn, chain)[0] if trust_mark else None
    result, mark = chain_check.verify_in_steps(conn, chain, start)
    if not result.ok or mark is None:
        raise ArchiveError(f"{journal_path}: the chain does not hold, nothing archived: "
                           f"{result.describe()}")
    chain_check.store_mark(conn, mark, chain)


def _closed_shoe_ends(conn: sqlite3.Connection, base: ArchiveBase | None,
                      cutoff: float) -> tuple[list[_ShoeEnd], str]:
    """The shoe ends a cut may go after, oldest first: each closes a shoe older than
    ``cutoff`` and delivered by every transport. Reads forward from the archive cut and stops
    at the first shoe that is not (so its cost is what gets archived, plus one shoe)."""
    delivered = [int(s) for (s,) in conn.execute("SELECT last_seq FROM delivery")]
    limit_seq = min(delivered) if delivered else None
    last = conn.execute("SELECT MAX(n) FROM records").fetchone()[0]
    ends: list[_ShoeEnd] = []
    reason = "no closed shoe in the live journal"
    after = 0 if base is None else base.records
    while last is not None and after < last:
        found = conn.execute(
            "SELECT n, written FROM records WHERE n > ? AND n <= ? AND kind='event' AND "
            "json_extract(body, '$.type')='shoe_ended' ORDER BY n",
            (after, after + SCAN_RECORDS)).fetchall()
        after += SCAN_RECORDS
        for n, written in found:
            if written > cutoff:
                return ends, reason if ends else "no closed shoe is older than the retention age"
            end = _entry_end(conn, n)
            if limit_seq is not None and end.last_seq > limit_seq:
                return ends, (f"the oldest closed shoe ends at seq {end.last_seq} but a "
                              f"transport has delivered only up to {limit_seq}")
            ends.append(end)
            reason = "ok"
    return ends, reason


def _entry_end(conn: sqlite3.Connection, n: int) -> _ShoeEnd:
    """The last record (and its event seq) of the entry that record ``n`` belongs to."""
    row = conn.execute("SELECT MIN(n) FROM records WHERE n > ? AND kind='input'",
                       (n,)).fetchone()
    if row[0] is None:
        last_n = conn.execute("SELECT MAX(n) FROM records").fetchone()[0]
    else:
        last_n = row[0] - 1
    # backwards from the entry's end to its last event: a few rows, whatever the journal's size
    seq = conn.execute("SELECT event_seq FROM records WHERE n <= ? AND event_seq IS NOT NULL "
                       "ORDER BY n DESC LIMIT 1", (last_n,)).fetchone()[0]
    return _ShoeEnd(int(last_n), int(seq))


def _group(ends: list[_ShoeEnd], base: ArchiveBase | None,
           cut_records: int) -> Iterator[_ShoeEnd]:
    """The cuts: as many whole shoes as fit in ``cut_records`` records, at least one."""
    start = 0 if base is None else base.records
    for i, end in enumerate(ends):
        following = ends[i + 1] if i + 1 < len(ends) else None
        if following is None or following.last_record - start > cut_records:
            yield end
            start = end.last_record


class _Cutter:
    """Cuts the journal one group of shoes at a time: reads and checks the records, replays
    them to the checkpoint at the cut, writes the archive, removes them."""

    def __init__(self, conn: sqlite3.Connection, journal_path: Path, directory: Path,
                 base: ArchiveBase | None, chain: ChainHash, settings: MachineSettings | None,
                 now: float):
        from controller.table.machine import TableMachine

        self.conn, self.journal_path, self.directory = conn, journal_path, directory
        self.base, self.chain, self.now = base, chain, now
        self.settings = settings if settings is not None else _settings_from_events(conn)
        try:
            self.machine = (TableMachine(self.settings) if base is None
                            else TableMachine.from_checkpoint(self.settings, base.checkpoint))
        except (ValueError, KeyError, TypeError) as exc:
            raise ArchiveError(f"{journal_path}: the journal's checkpoint does not load: "
                               f"{exc}") from None
        self.first_base = base
        self.files: list[Path] = []
        self.shoes: list[int] = []

    def cut(self, end: _ShoeEnd) -> None:
        start = 0 if self.base is None else self.base.records
        rows = self.conn.execute(
            "SELECT n, kind, event_seq, written, body, prev_hash, hash FROM records "
            "WHERE n > ? AND n <= ? ORDER BY n", (start, end.last_record)).fetchall()
        walker = walker_from(self.base, self.chain)
        problem = check_rows(walker, self.base, rows)
        if problem is None and walker.last_record != end.last_record:
            problem = VerifyResult(False, walker.records, walker.events, walker.next_n,
                                   "missing: the records to archive end early")
        if problem is not None:
            raise ArchiveError(f"{self.journal_path}: the chain does not hold, nothing "
                               f"more archived: {problem.describe()}")
        checkpoint, shoes = self._replay([(r[0], r[1], r[4]) for r in rows], end.last_record)
        cut = _Cut(end.last_record, rows[-1][6], end.last_seq, shoes, checkpoint)
        first_seq = (0 if self.base is None else self.base.seq) + 1
        header = {
            "format": ARCHIVE_FORMAT, "v": 1,
            "first_record": start + 1, "last_record": cut.last_record,
            "first_seq": first_seq, "last_seq": cut.last_seq,
            "prev_hash": GENESIS_HASH if self.base is None else self.base.hash,
            "last_hash": cut.last_hash,
            "records": cut.last_record - start,
            "events": cut.last_seq - first_seq + 1,
            "shoes": cut.shoes, "checkpoint": cut.checkpoint,
            "created": datetime.fromtimestamp(self.now, UTC).isoformat().replace(
                "+00:00", "Z"),
        }
        self.files.append(_write_archive(self.directory, header, rows))
        self.base = _commit_cut(self.conn, self.journal_path, self.base, cut)
        self.shoes.extend(shoes)

    def _replay(self, rows: list[tuple[int, str, str]],
                last_n: int) -> tuple[dict[str, Any], list[int]]:
        """Replay the cut's records on the machine and take its checkpoint there.

        Every recomputed event must equal the journaled one, and the checkpoint must rebuild a
        machine whose status is the replayed one: otherwise recovery from it would differ from
        recovery by replay, and nothing more is archived."""
        from controller.table.machine import TableMachine

        entries = list(group_entries(rows, self.journal_path))
        try:
            replay(self.machine, entries)
        except RecoveryError as exc:
            raise ArchiveError(f"{self.journal_path}: {exc}; pass the table's settings "
                               "(--config)") from None
        shoes = [int(event["shoe"]) for entry in entries for event in entry.events
                 if event.get("type") == "shoe_ended"]
        try:
            checkpoint = self.machine.checkpoint()
        except ValueError as exc:
            raise ArchiveError(f"{self.journal_path}: record {last_n}: no checkpoint: "
                               f"{exc}") from None
        rebuilt = TableMachine.from_checkpoint(self.settings, checkpoint)
        if rebuilt.status() != self.machine.status():
            raise ArchiveError(f"{self.journal_path}: record {last_n}: the checkpoint does "
                               "not rebuild the table's status; nothing more archived")
        return checkpoint, shoes

    def result(self) -> ArchiveResult:
        assert self.base is not None and self.files
        first = self.first_base
        return ArchiveResult(True, "ok", self.files[-1],
                             1 if first is None else first.records + 1, self.base.records,
                             (0 if first is None else first.seq) + 1, self.base.seq,
                             tuple(self.shoes), len(self.files))


def _settings_from_events(conn: sqlite3.Connection) -> MachineSettings:
    from controller.table.machine import MachineSettings

    table = conn.execute("SELECT json_extract(body, '$.table') FROM records "
                         "WHERE kind='event' LIMIT 1").fetchone()
    seconds = conn.execute("SELECT json_extract(body, '$.data.betting_seconds') FROM records "
                           "WHERE kind='event' AND json_extract(body, '$.type')='round_opened' "
                           "LIMIT 1").fetchone()
    kwargs: dict[str, Any] = {}
    if table and table[0]:
        kwargs["table_id"] = table[0]
    if seconds and seconds[0] is not None:
        kwargs["betting_seconds"] = float(seconds[0])
    return MachineSettings(**kwargs)


def _write_archive(directory: Path, header: dict[str, Any], rows: list[tuple[Any, ...]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    # mtime=0: the same records always give the same bytes (and the same SHA-256).
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz:
        gz.write((canonical_json(header) + "\n").encode())
        for row in rows:
            gz.write((canonical_json(dict(zip(_RECORD_COLUMNS, row))) + "\n").encode())
    data = buffer.getvalue()
    name = archive_name(header["first_record"], header["last_record"])
    write_durably(directory / name, data)
    manifest = load_manifest(directory) or {"format": MANIFEST_FORMAT, "v": 1, "archives": []}
    entries = [a for a in manifest["archives"] if a.get("file") != name]
    entries.append({key: header[key] for key in (
        "first_record", "last_record", "first_seq", "last_seq", "prev_hash", "last_hash",
        "records", "events")} | {"file": name, "sha256": hashlib.sha256(data).hexdigest(),
                                 "bytes": len(data)})
    entries.sort(key=lambda a: a["first_record"])
    manifest["archives"] = entries
    write_durably(directory / MANIFEST_NAME,
                   (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return directory / name


def _commit_cut(conn: sqlite3.Connection, journal_path: Path, base: ArchiveBase | None,
                cut: _Cut) -> ArchiveBase:
    """Delete the archived records and record the new base, in one transaction; returns
    the new base."""
    with write_transaction(conn):
        if read_base(conn) != base:
            raise ArchiveError(f"{journal_path}: another archive run moved the journal's base; "
                               "nothing removed")
        for transport, last_seq in conn.execute("SELECT transport, last_seq FROM delivery"):
            if last_seq < cut.last_seq:  # positions only grow; checked again under the lock
                raise ArchiveError(f"{journal_path}: transport {transport!r} is at seq "
                                   f"{last_seq}, below the cut at {cut.last_seq}")
        new_base = ArchiveBase(cut.last_record, cut.last_hash, cut.last_seq, cut.checkpoint)
        conn.execute("DELETE FROM records WHERE n <= ?", (cut.last_record,))
        conn.execute("INSERT INTO meta(key, value) VALUES ('archive_base', ?) "
                     "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                     (new_base.to_json(),))
    return new_base


def _drop_leftovers(directory: Path, base: ArchiveBase | None) -> None:
    """Remove archives an interrupted run wrote for records that are still live."""
    manifest = load_manifest(directory)
    if manifest is None:
        return
    archived = 0 if base is None else base.records
    keep = [a for a in manifest["archives"] if a["last_record"] <= archived]
    if len(keep) == len(manifest["archives"]):
        return
    for entry in manifest["archives"]:
        if entry not in keep:
            (directory / entry["file"]).unlink(missing_ok=True)
    manifest["archives"] = keep
    write_durably(directory / MANIFEST_NAME,
                   (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


# --- reading and verifying -----------------------------------------------------------------------

def load_manifest(directory: Path) -> dict[str, Any] | None:
    path = directory / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())  # checked just below
        if manifest.get("format") != MANIFEST_FORMAT or not isinstance(
                manifest.get("archives"), list):
            raise ValueError("not an archive manifest")
        return manifest
    except (OSError, ValueError, AttributeError) as exc:
        raise ArchiveError(f"{path}: cannot read the archive manifest: {exc}") from None


def read_archive(path: Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """An archive's header and an iterator over its records (dicts with every column)."""
    gz = gzip.open(path, "rt", encoding="utf-8")
    try:
        header = json.loads(gz.readline())
    except (OSError, EOFError, ValueError, zlib.error) as exc:
        gz.close()
        raise ArchiveError(f"{path.name}: damaged: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != ARCHIVE_FORMAT:
        gz.close()
        raise ArchiveError(f"{path.name}: not a journal archive (no header)")

    def records() -> Iterator[dict[str, Any]]:
        with gz:
            number = 1
            while True:
                try:
                    line = gz.readline()
                except (OSError, EOFError, zlib.error) as exc:
                    raise ArchiveError(f"{path.name}: damaged after line {number}: {exc}") \
                        from None
                if not line:
                    return
                number += 1
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise ArchiveError(f"{path.name}: line {number} is not JSON: {exc}") \
                        from None

    return header, records()


@dataclass(frozen=True)
class ChainResult:
    """The whole chain, archives and live journal together."""
    ok: bool
    records: int                     # records checked, archives included
    events: int
    archives: int                    # archive files checked
    bad_record: int | None = None
    archive: str | None = None       # the archive file at fault, when one is
    reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        if self.ok:
            return (f"chain holds: {self.records} records, {self.events} events "
                    f"({self.archives} archive(s) and the live journal)")
        where = []
        if self.archive:
            where.append(f"archive {self.archive}")
        if self.bad_record is not None:
            where.append(f"record {self.bad_record}")
        return f"{', '.join(where) or 'journal'}: {self.reason}"


def verify_with_archives(journal_path: str | Path, archive_dir: str | Path | None = None,
                         key: bytes | None = None) -> ChainResult:
    """Check the archives and the live journal as one unbroken chain from record 1.

    A keyed journal needs its ``key``: JournalKeyError (a JournalError) says when the key
    is missing or wrong, or given for a plain journal."""
    journal_path = Path(journal_path)
    directory = Path(archive_dir) if archive_dir is not None else archive_dir_for(journal_path)
    conn = open_read_only(journal_path)
    try:
        conn.execute("BEGIN")  # base and live records from one snapshot
        try:
            live = verify_connection(conn, key, journal_path)
            chain = read_chain(conn, key, journal_path)
            base = read_base(conn) if live.ok else None
            origin = history_origin(conn, chain)
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"{journal_path}: not a journal: {exc}") from None
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    finally:
        conn.close()
    if not live.ok:
        return ChainResult(False, live.records, live.events, 0, live.bad_record, None,
                           f"live journal: {live.reason}")
    return _verify_archives(directory, base, live, chain, origin)


def _verify_archives(directory: Path, base: ArchiveBase | None, live: VerifyResult,
                     chain: ChainHash, origin: tuple[str, int]) -> ChainResult:
    archived = 0 if base is None else base.records
    # archived records keep the journal's chain, from its genesis or the history it continues
    walker = ChainWalker(0, origin[0], origin[1], chain)
    notes: list[str] = []
    checked = 0

    def bad(reason: str, archive: str | None = None, record: int | None = None) -> ChainResult:
        return ChainResult(False, walker.records, walker.events, checked, record, archive,
                           reason, tuple(notes))

    try:
        manifest = load_manifest(directory)
    except ArchiveError as exc:
        return bad(str(exc))
    entries = [] if manifest is None else sorted(manifest["archives"],
                                                 key=lambda a: a.get("first_record", 0))
    listed = {e.get("file") for e in entries}
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            if _ARCHIVE_NAME.match(path.name) and path.name not in listed:
                notes.append(f"{path.name} is not in the manifest (left by an interrupted "
                             "archive run?); not part of the chain")
    for entry in entries:
        if entry.get("last_record", 0) > archived:
            notes.append(f"{entry.get('file')} holds records that are still live (left by an "
                         "interrupted archive run); the next archive run replaces it")
    entries = [e for e in entries if e.get("last_record", 0) <= archived]
    if archived and manifest is None:
        return bad(f"records 1..{archived} are archived but {directory / MANIFEST_NAME} is "
                   "missing", record=1)
    for entry in entries:
        name = str(entry.get("file"))
        first = entry.get("first_record")
        if first != walker.next_n:
            if isinstance(first, int) and first > walker.next_n:
                return bad(f"records {walker.next_n}..{first - 1} are missing: no archive in "
                           f"the manifest holds them", record=walker.next_n)
            return bad(f"overlaps the archive before it (starts at record {first})", name,
                       walker.next_n)
        path = directory / name
        if not path.is_file():
            return bad(f"missing (records {first}..{entry.get('last_record')})", name, first)
        data = path.read_bytes()
        damaged = hashlib.sha256(data).hexdigest() != entry.get("sha256")
        problem = _check_archive(path, entry, walker)
        checked += 1
        if problem is not None:
            reason, record = problem
            if damaged:
                reason += " (the file's SHA-256 differs from the manifest: damaged or edited)"
            return bad(reason, name, record)
        if damaged:
            return bad("damaged or edited: the file's SHA-256 differs from the manifest",
                       name, first)
    if walker.last_record != archived or (base is not None and (
            walker.prev != base.hash or walker.last_seq != base.seq)):
        if base is None:
            return bad(f"the archives end at record {walker.last_record} but the journal says "
                       "nothing is archived", record=1)
        if walker.last_record < archived:
            return bad(f"records {walker.last_record + 1}..{archived} are missing: no archive "
                       "in the manifest holds them", record=walker.last_record + 1)
        return bad(f"the archives end at record {walker.last_record} (seq {walker.last_seq}, "
                   f"hash {walker.prev[:12]}…) but the journal's archive base says record "
                   f"{archived} (seq {base.seq}, hash {base.hash[:12]}…)", record=archived)
    return ChainResult(True, walker.records + live.records, walker.events + live.events,
                       checked, notes=tuple(notes))


def _check_archive(path: Path, entry: dict[str, Any],
                   walker: ChainWalker) -> tuple[str, int | None] | None:
    """Walk one archive's records on ``walker``; (reason, record) of the first problem."""
    first = entry.get("first_record")
    try:
        header, records = read_archive(path)
    except ArchiveError as exc:
        return str(exc).split(": ", 1)[-1], first
    for key in ("first_record", "last_record", "first_seq", "last_seq", "prev_hash",
                "last_hash"):
        if header.get(key) != entry.get(key):
            return (f"{key} is {header.get(key)!r} in the archive header but "
                    f"{entry.get(key)!r} in the manifest"), first
    if entry.get("prev_hash") != walker.prev:
        return (f"boundary hash: the archive says the record before it ends in "
                f"{str(entry.get('prev_hash'))[:12]}…, the chain has {walker.prev[:12]}…"), first
    try:
        for record in records:
            try:
                row = tuple(record[c] for c in _RECORD_COLUMNS)
            except (KeyError, TypeError):
                return "a record line lacks a column", walker.next_n
            problem = walker.check(*row)
            if problem is not None:
                return problem, row[0] if isinstance(row[0], int) else walker.next_n
    except (ArchiveError, OSError, EOFError) as exc:
        return f"damaged: {str(exc).split(': ', 1)[-1]}", walker.next_n
    if walker.last_record != entry.get("last_record"):
        return (f"holds records up to {walker.last_record}, the manifest says "
                f"{entry.get('last_record')}"), walker.next_n
    if walker.prev != entry.get("last_hash") or walker.last_seq != entry.get("last_seq"):
        return (f"boundary hash: the manifest says the range ends in hash "
                f"{str(entry.get('last_hash'))[:12]}… (seq {entry.get('last_seq')}), its "
                f"records end in {walker.prev[:12]}… (seq {walker.last_seq})"), \
            walker.last_record
    return None


def archived_event_records(journal_path: str | Path, directory: Path,
                           *, require_manifest: bool = True) -> Iterator[dict[str, Any]]:
    """The archived event records of a journal (``n``, ``event_seq``, ``body``, ``hash``…), in
    order, from the archives its ``archive_base`` says it has. ``require_manifest``: a
    missing manifest is an error (else: no archived events)."""
    conn = open_read_only(journal_path)
    try:
        base = read_base(conn)
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"{journal_path}: not a journal: {exc}") from None
    finally:
        conn.close()
    archived = 0 if base is None else base.records
    manifest = load_manifest(directory) if archived else None
    if archived and manifest is None and require_manifest:
        raise ArchiveError(f"records 1..{archived} are archived but "
                           f"{directory / MANIFEST_NAME} is missing")
    entries = [] if manifest is None else sorted(
        (a for a in manifest["archives"] if a["last_record"] <= archived),
        key=lambda a: a["first_record"])
    for entry in entries:
        _header, records = read_archive(directory / entry["file"])
        for record in records:
            if record.get("kind") == "event":
                yield record


def export_with_archives(journal_path: str | Path,
                         archive_dir: str | Path | None = None) -> Iterator[str]:
    """Every event's canonical JSON text, archived ones first, in seq order."""
    from controller.durability.journal import export_events

    journal_path = Path(journal_path)
    directory = Path(archive_dir) if archive_dir is not None else archive_dir_for(journal_path)
    for record in archived_event_records(journal_path, directory):
        yield record["body"]
    yield from export_events(journal_path)
