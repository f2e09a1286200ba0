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
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller.durability.chain import ChainHash
from controller.durability.disk import write_durably
from controller.durability.journal import (
    GENESIS_HASH,
    ArchiveBase,
    ChainWalker,
    JournalError,
    VerifyResult,
    canonical_json,
    connect,
    group_entries,
    open_read_only,
    read_base,
    read_chain,
    verify_connection,
)
from controller.durability.recovery import RecoveryError, replay

ARCHIVE_FORMAT = "pokdeng-journal-archive"
MANIFEST_FORMAT = "pokdeng-journal-archive-manifest"
MANIFEST_NAME = "manifest.json"
_ARCHIVE_NAME = re.compile(r"^records-(\d+)-(\d+)\.jsonl\.gz$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_RECORD_COLUMNS = ("n", "kind", "event_seq", "written", "body", "prev_hash", "hash")


class ArchiveError(JournalError):
    """Archiving cannot go ahead; the message says which file and why. Nothing was removed."""


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

    @property
    def records(self) -> int:
        return self.last_record - self.first_record + 1 if self.archived else 0

    def describe(self) -> str:
        if not self.archived:
            return f"nothing archived: {self.reason}"
        shoes = ", ".join(str(s) for s in self.shoes)
        return (f"archived records {self.first_record}-{self.last_record} (events "
                f"{self.first_seq}-{self.last_seq}, shoe(s) {shoes}) to {self.file}")


# --- archiving ---------------------------------------------------------------------------------

@dataclass
class _Cut:
    last_record: int
    last_hash: str
    last_seq: int
    written: float
    shoes: list[int]
    checkpoint: dict[str, Any]


def archive_closed_shoes(journal_path: str | Path, older_than_s: float,
                         now: float | None = None, *, settings: Any = None,
                         archive_dir: str | Path | None = None,
                         key: bytes | None = None) -> ArchiveResult:
    """Archive every closed, delivered shoe whose ``shoe_ended`` is older than ``older_than_s``.

    ``settings`` are the table's ``MachineSettings`` (needed to replay the journal for the
    checkpoint); without them they are read from the journal's events (table id, betting
    seconds) with defaults for the rest, and a journal they do not reproduce is refused.
    Safe to call while the daemon writes the journal (it takes SQLite's write lock only for
    the final delete). A keyed journal needs its ``key`` (its chain is checked first).
    Raises ArchiveError when it cannot archive safely; returns
    ``archived=False`` with the reason when there is nothing to archive.
    """
    journal_path = Path(journal_path)
    if not journal_path.is_file():
        raise ArchiveError(f"{journal_path}: no such journal file")
    directory = Path(archive_dir) if archive_dir is not None else archive_dir_for(journal_path)
    now = time.time() if now is None else float(now)
    cutoff = now - float(older_than_s)
    conn = connect(journal_path)
    try:
        base, cut, rows, reason = _plan(conn, journal_path, cutoff, settings, key)
        _drop_leftovers(directory, base)
        if cut is None:
            return ArchiveResult(False, reason)
        first_record = 1 if base is None else base.records + 1
        first_seq = (0 if base is None else base.seq) + 1
        prev_hash = GENESIS_HASH if base is None else base.hash
        header = {
            "format": ARCHIVE_FORMAT, "v": 1,
            "first_record": first_record, "last_record": cut.last_record,
            "first_seq": first_seq, "last_seq": cut.last_seq,
            "prev_hash": prev_hash, "last_hash": cut.last_hash,
            "records": cut.last_record - first_record + 1,
            "events": cut.last_seq - first_seq + 1,
            "shoes": cut.shoes, "checkpoint": cut.checkpoint,
            "created": datetime.fromtimestamp(now, UTC).isoformat().replace(
                "+00:00", "Z"),
        }
        file = _write_archive(directory, header, rows)
        _commit_cut(conn, journal_path, base, cut)
        return ArchiveResult(True, "ok", file, first_record, cut.last_record, first_seq,
                             cut.last_seq, tuple(cut.shoes))
    except sqlite3.Error as exc:
        raise ArchiveError(f"{journal_path}: {exc}") from None
    finally:
        conn.close()


def _plan(conn: sqlite3.Connection, journal_path: Path, cutoff: float, settings: Any,
          key: bytes | None) -> tuple[ArchiveBase | None, _Cut | None, list[tuple], str]:
    """Find the cut and read the records to archive, from one snapshot of the journal.
    Returns (base, cut, rows, reason); cut is None (and reason says why) when there is none."""
    conn.execute("BEGIN")
    try:
        result = verify_connection(conn, key, journal_path)
        if not result.ok:
            raise ArchiveError(f"{journal_path}: the chain does not hold, nothing archived: "
                               f"{result.describe()}")
        base = read_base(conn)
        delivered = [int(s) for (s,) in conn.execute("SELECT last_seq FROM delivery")]
        limit_seq = min(delivered) if delivered else None
        ends = conn.execute(
            "SELECT n, event_seq, written FROM records WHERE kind='event' AND "
            "json_extract(body, '$.type')='shoe_ended' ORDER BY n").fetchall()
        if not ends:
            return base, None, [], "no closed shoe in the live journal"
        old = [e for e in ends if e[2] <= cutoff]
        if not old:
            return base, None, [], "no closed shoe is older than the retention age"
        # The cut goes after the whole entry (input + all its events) holding shoe_ended.
        candidates = []
        for n, _seq, written in old:
            last_n, last_seq = _entry_end(conn, n)
            candidates.append((last_n, last_seq, written))
        if limit_seq is not None:
            deliverable = [c for c in candidates if c[1] <= limit_seq]
            if not deliverable:
                return base, None, [], (f"the oldest closed shoe ends at seq {candidates[0][1]} "
                                    f"but a transport has delivered only up to {limit_seq}")
            candidates = deliverable
        last_n, last_seq, written = candidates[-1]
        rows = conn.execute(
            "SELECT n, kind, event_seq, written, body, prev_hash, hash FROM records "
            "WHERE n <= ? ORDER BY n", (last_n,)).fetchall()
        checkpoint, shoes = _checkpoint_at(conn, journal_path, base, last_n, settings)
        return base, _Cut(last_n, rows[-1][6], last_seq, written, shoes, checkpoint), rows, "ok"
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _entry_end(conn: sqlite3.Connection, n: int) -> tuple[int, int]:
    """The last record (and its event seq) of the entry that record ``n`` belongs to."""
    row = conn.execute("SELECT MIN(n) FROM records WHERE n > ? AND kind='input'",
                       (n,)).fetchone()
    if row[0] is None:
        last_n = conn.execute("SELECT MAX(n) FROM records").fetchone()[0]
    else:
        last_n = row[0] - 1
    seq = conn.execute("SELECT MAX(event_seq) FROM records WHERE n <= ?", (last_n,)).fetchone()[0]
    return int(last_n), int(seq)


def _settings_from_events(conn: sqlite3.Connection) -> Any:
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


def _checkpoint_at(conn: sqlite3.Connection, journal_path: Path, base: ArchiveBase | None,
                   last_n: int, settings: Any) -> tuple[dict[str, Any], list[int]]:
    """Replay the live journal up to record ``last_n`` and take the machine's checkpoint.

    Every recomputed event must equal the journaled one, and the checkpoint must rebuild a
    machine whose status is the replayed one: otherwise recovery from it would differ from
    recovery by replay, and nothing is archived.
    """
    from controller.table.machine import TableMachine

    if settings is None:
        settings = _settings_from_events(conn)
    try:
        machine = (TableMachine(settings) if base is None
                   else TableMachine.from_checkpoint(settings, base.checkpoint))
    except (ValueError, KeyError, TypeError) as exc:
        raise ArchiveError(f"{journal_path}: the journal's checkpoint does not load: {exc}") \
            from None
    rows = conn.execute("SELECT n, kind, body FROM records WHERE n <= ? ORDER BY n",
                        (last_n,)).fetchall()
    entries = list(group_entries(rows, journal_path))
    try:
        replay(machine, entries)
    except RecoveryError as exc:
        raise ArchiveError(f"{journal_path}: {exc}; pass the table's settings (--config)") \
            from None
    shoes = [event.get("shoe") for entry in entries for event in entry.events
             if event.get("type") == "shoe_ended"]
    try:
        checkpoint = machine.checkpoint()
    except ValueError as exc:
        raise ArchiveError(f"{journal_path}: record {last_n}: no checkpoint: {exc}") from None
    rebuilt = TableMachine.from_checkpoint(settings, checkpoint)
    if rebuilt.status() != machine.status():
        raise ArchiveError(f"{journal_path}: record {last_n}: the checkpoint does not rebuild "
                           "the table's status; nothing archived")
    return checkpoint, shoes


def _write_archive(directory: Path, header: dict[str, Any], rows: list[tuple]) -> Path:
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
                cut: _Cut) -> None:
    """Delete the archived records and record the new base, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
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
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


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
        manifest = json.loads(path.read_text())
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
    return _verify_archives(directory, base, live, chain)


def _verify_archives(directory: Path, base: ArchiveBase | None,
                     live: VerifyResult, chain: ChainHash) -> ChainResult:
    archived = 0 if base is None else base.records
    walker = ChainWalker(chain=chain)  # archived records keep the journal's chain
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
