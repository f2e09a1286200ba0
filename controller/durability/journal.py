"""The journal: every table input and the events it produced, hash-chained, in one SQLite file.

Layout (one row per record, inputs and events alike, in the order they happened)::

    records(n INTEGER PRIMARY KEY,   -- record number, 1, 2, 3 … with no gaps
            kind TEXT,               -- 'input' or 'event'
            event_seq INTEGER UNIQUE,-- the event's seq (NULL for inputs), for the outbox
            written REAL,            -- wall-clock time of the write (unix seconds)
            body TEXT,               -- canonical JSON of the input (script form) or the event
            prev_hash TEXT,          -- hash of record n-1 ('0' * 64 for record 1)
            hash TEXT)               -- sha256(n, kind, event_seq, written, prev_hash, body),
                                     -- or HMAC-SHA256 with the table's key (chain.py)
    head(id=1, records, last_hash)   -- the newest record, written in the same transaction
    delivery(transport, last_seq)    -- each transport's delivered position (outbox; not chained)
    meta('chain')                    -- plain or keyed, with the key check value (chain.py)

One ``append`` is one transaction: the input and all its events, committed with WAL and
``synchronous=FULL`` (the commit returns only after the WAL is fsynced). Any edited byte,
deleted or reordered record breaks the chain and ``verify`` names the first bad record; a
record cut from the end is caught by ``head``. See docs/durability.md for what this does and
does not protect against.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.bounds import MAX_EXTERNAL_NUMBER
from controller.durability.chain import ChainHash, ChainKeyProblem, chain_for
from controller.durability.disk import fsync_directory
from controller.durability.write_lock import write_transaction, writer_lock
from controller.table.inputs import Input, ScriptError, from_dict, to_dict

GENESIS_HASH = "0" * 64
SCHEMA_VERSION = 1
_FETCH_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    n INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    event_seq INTEGER UNIQUE,
    written REAL NOT NULL,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS head (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    records INTEGER NOT NULL,
    last_hash TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS delivery (
    transport TEXT PRIMARY KEY,
    last_seq INTEGER NOT NULL,
    updated REAL NOT NULL
);
-- recent_entries (the last supervisor actions at start) without reading every input
CREATE INDEX IF NOT EXISTS records_input_kind ON records(json_extract(body, '$.kind'))
    WHERE kind = 'input';
"""


class JournalError(Exception):
    """The journal cannot be opened or written; the message says which file and why."""


class JournalKeyError(JournalError):
    """The key given does not fit the journal's chain (missing, wrong, or a key for a plain
    journal); the message names the file and says which, never the key."""


class JournalCorrupt(JournalError):
    """The hash chain does not hold; ``result`` names the first bad record."""

    def __init__(self, path: str, result: VerifyResult):
        self.result = result
        super().__init__(f"{path}: {result.describe()}")


# One encoder for every body (json.dumps builds a new one per call when given options).
_CANONICAL_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                      allow_nan=False)


def canonical_json(obj: Any) -> str:
    """The one text form of a JSON value that the chain hashes: sorted keys, no spaces, UTF-8."""
    return _CANONICAL_ENCODER.encode(obj)


def record_hash(n: int, kind: str, event_seq: int | None, written: float, prev_hash: str,
                body: str) -> str:
    """SHA-256 over every column of a record except its own hash, fields separated by \\n
    (the plain chain; a keyed chain is an HMAC of the same text, ``ChainHash``)."""
    return ChainHash(None).digest(n, kind, event_seq, written, prev_hash, body)


def read_chain(conn: sqlite3.Connection, key: bytes | None, source: str | Path) -> ChainHash:
    """The chain of the journal on ``conn`` for a caller holding ``key`` (or None).
    Raises JournalKeyError naming ``source`` when the key does not fit."""
    row = conn.execute("SELECT value FROM meta WHERE key='chain'").fetchone()
    try:
        return chain_for(None if row is None else str(row[0]), key)
    except ChainKeyProblem as exc:
        raise JournalKeyError(f"{source}: {exc}") from None


def chain_kind(conn: sqlite3.Connection) -> str:
    """'hmac-sha256' or 'sha256' as the journal records it (no key needed: the outbox asks)."""
    from controller.durability.chain import parse_meta

    row = conn.execute("SELECT value FROM meta WHERE key='chain'").fetchone()
    try:
        return parse_meta(None if row is None else str(row[0]))[0]
    except ChainKeyProblem as exc:
        raise JournalError(str(exc)) from None


@dataclass(frozen=True)
class VerifyResult:
    ok: bool
    records: int                 # records checked
    events: int                  # event records among them
    bad_record: int | None = None  # number of the first bad record (None when ok)
    reason: str = ""

    def describe(self) -> str:
        if self.ok:
            return f"chain holds: {self.records} records, {self.events} events"
        where = f"record {self.bad_record}" if self.bad_record is not None else "journal"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class Entry:
    """One journaled input with the events it produced."""
    record: int
    input: Input
    events: list[dict[str, Any]]


@dataclass(frozen=True)
class JournaledEvent:
    """An event as its committed record holds it: what the outbox hands over in memory."""
    record: int
    seq: int
    body: str    # the canonical JSON the chain hashed
    hash: str
    type: Any    # the event's "type", as given (the outbox's sealing needs it, not the body)


@dataclass(frozen=True)
class ArchiveBase:
    """Where the live journal starts once older records were archived (meta ``archive_base``).

    Records 1..``records`` (events 1..``seq``) live in the archives; ``hash`` is the hash of
    record ``records`` (the next record's prev_hash); ``checkpoint`` is the table machine's
    state right after it, so recovery starts there instead of replaying the archives.
    """
    records: int
    hash: str
    seq: int
    checkpoint: dict[str, Any]

    def to_json(self) -> str:
        return canonical_json({"records": self.records, "hash": self.hash, "seq": self.seq,
                               "checkpoint": self.checkpoint})


def read_base(conn: sqlite3.Connection) -> ArchiveBase | None:
    """The journal's archive base, or None when nothing was ever archived.

    A continued journal (``Continuation``) starts with a base of record 0 at its origin: no
    record of it is archived yet, and its first event is the one after the backend's."""
    row = conn.execute("SELECT value FROM meta WHERE key='archive_base'").fetchone()
    if row is None:
        return None
    try:
        data = json.loads(row[0])
        base = ArchiveBase(int(data["records"]), str(data["hash"]), int(data["seq"]),
                           dict(data["checkpoint"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise JournalError(f"meta archive_base is not valid: {exc}") from None
    if base.records < 0 or base.seq < 0 or len(base.hash) != 64:
        raise JournalError(f"meta archive_base is not valid: {row[0][:200]}")
    if base.records == 0:
        continuation = read_continuation(conn)
        if continuation is None or continuation.after_seq != base.seq:
            raise JournalError("meta archive_base starts at record 0 but the journal does not "
                               "continue a history after that seq (meta continued)")
    return base


@dataclass(frozen=True)
class Continuation:
    """This journal continues a table's history after seq ``after_seq``, which its backend
    held (``sha256``: the digest of its event ``after_seq``, as ``source`` said) when no copy
    of the table's journal was as new (``pokdeng-table journal continue``). Its first record
    links to ``origin_hash``, not to the genesis hash, and its first event is ``after_seq + 1``.
    ``unconfirmed``: who continued it without a backend's confirmation, and why (``by``,
    ``reason``, and ``what`` was not confirmed); hashed into the origin with the rest, so it
    cannot be edited away. ``older_sha256``: the same event's digest in the older documented
    form (held.py), which a backend written before RFC 8785 holds instead (None: continued by
    a version that did not record it).
    """
    after_seq: int
    sha256: str
    source: str
    at: str
    unconfirmed: dict[str, str] | None = None
    older_sha256: str | None = None

    def to_json(self) -> str:
        data: dict[str, Any] = {"after_seq": self.after_seq, "sha256": self.sha256,
                                "source": self.source, "at": self.at}
        if self.unconfirmed is not None:
            data["unconfirmed"] = self.unconfirmed
        if self.older_sha256 is not None:
            data["older_sha256"] = self.older_sha256
        return canonical_json(data)

    def origin_hash(self, chain: ChainHash) -> str:
        """Where the chain starts: the continuation itself hashed with the chain's function,
        so a walk that reaches record 1 holds the journal to the backend's position."""
        fields: dict[str, Any] = {"kind": "continues", "after_seq": self.after_seq,
                                  "sha256": self.sha256}
        if self.unconfirmed is not None:
            fields["unconfirmed"] = {**self.unconfirmed, "at": self.at}
        text = canonical_json(fields)
        return chain.mac(text) or hashlib.sha256(text.encode()).hexdigest()


class ContinuationOutOfBounds(JournalError):
    """A journal continued after a seq beyond bounds.py's, which no backend can hold (made
    before ``journal continue`` bounded it): no start can append to it."""


def read_continuation(conn: sqlite3.Connection) -> Continuation | None:
    """The journal's continuation (meta ``continued``), or None for a history from seq 1."""
    row = conn.execute("SELECT value FROM meta WHERE key='continued'").fetchone()
    if row is None:
        return None
    try:
        data = json.loads(row[0])
        unconfirmed = data.get("unconfirmed")
        older = data.get("older_sha256")
        found = Continuation(int(data["after_seq"]), str(data["sha256"]), str(data["source"]),
                             str(data["at"]),
                             None if unconfirmed is None else
                             {"by": str(unconfirmed["by"]), "reason": str(unconfirmed["reason"]),
                              **({"what": str(unconfirmed["what"])}
                                 if "what" in unconfirmed else {})},
                             None if older is None else str(older))
    except (ValueError, KeyError, TypeError) as exc:
        raise JournalError(f"meta continued is not valid: {exc}") from None
    if found.after_seq < 1 or len(found.sha256) != 64:
        raise JournalError(f"meta continued is not valid: {row[0][:200]}")
    if found.after_seq > MAX_EXTERNAL_NUMBER:  # an old `journal continue` did not bound it
        raise ContinuationOutOfBounds(
            f"meta continued: the journal continues after seq {found.after_seq}, beyond "
            f"{MAX_EXTERNAL_NUMBER}, which no backend can hold: it was continued after an "
            "event that was not the backend's; run `pokdeng-table journal continue` again "
            "with the backend's last event (docs/install.md, \"A table whose history "
            "forked\")")
    return found


def history_origin(conn: sqlite3.Connection, chain: ChainHash) -> tuple[str, int]:
    """The hash record 1 links to and the seq before its first event: the genesis hash and
    0, or a continued journal's origin."""
    continuation = read_continuation(conn)
    if continuation is None:
        return GENESIS_HASH, 0
    return continuation.origin_hash(chain), continuation.after_seq


#: how long SQLite's busy handler lets a statement wait for another connection's lock
BUSY_TIMEOUT_MS = 10000


def connect(path: str | Path, *, synchronous: str = "FULL", check_same_thread: bool = True,
            new: bool = False, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """Open the journal database in WAL mode; autocommit, explicit transactions. ``new``: the
    file is being created, so it can still take incremental auto-vacuum (vacuum.py).
    ``busy_timeout_ms`` 0: SQLite's busy handler off, for a writer whose every transaction
    begins in write_lock.py (in WAL mode reads never wait for a writer)."""
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, timeout=10.0,
                               check_same_thread=check_same_thread)
        if new:  # before WAL mode and the first table: later it takes a whole VACUUM
            conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise JournalError(f"{path}: cannot switch to WAL mode (got {mode!r})")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"{path}: not a usable journal database: {exc}") from None
    return conn


def open_read_only(path: str | Path) -> sqlite3.Connection:
    """Open a journal file for reading only (verify, export, archive checks); never creates it.
    Raises JournalError when the file is missing or is not a journal."""
    path = Path(path)
    if not path.is_file():
        raise JournalError(f"{path}: no such journal file")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise JournalError(f"{path}: cannot open: {exc}") from None
    try:
        conn.execute("SELECT 1 FROM records LIMIT 1")
        conn.execute("SELECT 1 FROM meta LIMIT 1")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise JournalError(f"{path}: not a journal: {exc}") from None
    return conn


def group_entries(rows: Iterable[tuple[int, str, str]], source: str | Path) -> Iterator[Entry]:
    """Records (n, kind, body) in order -> each input with the events it produced."""
    current: Entry | None = None
    for n, kind, body in rows:
        if kind == "input":
            if current is not None:
                yield current
            current = Entry(n, _parse_input(n, body), [])
        elif kind == "event":
            if current is None:
                raise JournalError(f"{source}: record {n}: event before any input")
            current.events.append(json.loads(body))
        else:
            raise JournalError(f"{source}: record {n}: unknown kind {kind!r}")
    if current is not None:
        yield current


class Journal:
    """The table's journal. Owned and written by one thread (the daemon's loop).

    Opening checks the schema, the chain's key and the head record only; a full check is
    ``verify()`` (recovery runs it before replaying). ``key`` keys the chain of a new journal
    (HMAC-SHA256) and must be the key of a keyed one; without it a journal is plain.
    """

    def __init__(self, path: str | Path, key: bytes | None = None):
        self.path = Path(path)
        created = not self.path.exists()
        if not self.path.parent.is_dir():
            raise JournalError(f"{self.path}: directory {self.path.parent} does not exist")
        self._conn = connect(self.path, new=created)
        self._lock = threading.Lock()  # guards against accidental use from two threads
        #: taken by every writer to this file in this process (write_lock.py)
        self.writer_lock = writer_lock(self.path)
        try:
            self._conn.executescript(_SCHEMA)
            row = self._conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                self._conn.execute("INSERT INTO meta(key, value) VALUES ('schema', ?)",
                                   (str(SCHEMA_VERSION),))
            elif row[0] != str(SCHEMA_VERSION):
                raise JournalError(
                    f"journal schema {row[0]}, this version reads {SCHEMA_VERSION}")
            head = self._conn.execute("SELECT records, last_hash FROM head WHERE id=1").fetchone()
            last = self._conn.execute(
                "SELECT n, hash FROM records ORDER BY n DESC LIMIT 1").fetchone()
            seq = self._conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0]
            self._base = read_base(self._conn)
            if last is None and self._base is None:
                # A new journal takes the chain of the key it is first opened with.
                self._conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('chain', ?)",
                                   (ChainHash(key).meta_value(),))
            self._chain = read_chain(self._conn, key, self.path)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise JournalError(f"{self.path}: not a usable journal database: {exc}") from None
        except JournalKeyError:
            self._conn.close()
            raise
        except JournalError as exc:
            self._conn.close()
            raise JournalError(f"{self.path}: {exc}") from None
        if created:
            # The new file's name must survive a power cut too; a directory that cannot be
            # opened (some network filesystems) is not a reason to refuse the journal.
            with contextlib.suppress(OSError):
                fsync_directory(self.path.parent)
        # Archived records are gone from the table; numbering and the chain carry on from them.
        base_records, base_hash, base_seq = (0, GENESIS_HASH, 0) if self._base is None else (
            self._base.records, self._base.hash, self._base.seq)
        self._records = base_records if last is None else int(last[0])
        self._last_hash = base_hash if last is None else str(last[1])
        self._last_seq = base_seq if seq is None else int(seq)
        head_records = 0 if head is None else int(head[0])
        if head_records != self._records:
            # Do not write on top of a journal whose end is missing or was added to.
            self._conn.close()
            raise JournalCorrupt(str(self.path), VerifyResult(
                False, self._records, 0, _first_off_head(head_records, self._records),
                f"head says {head_records} records but the journal holds {self._records}"))
        self._appended: list[JournaledEvent] = []
        self._closed = False

    # -- writing ----------------------------------------------------------------------------
    def append(self, inp: Input, events: list[dict[str, Any]]) -> int:
        """Journal one input and the events it produced in one durable transaction.

        Events must carry ``seq`` numbers that continue the journal's by one each.
        Returns the input's record number. Nothing is written when this raises.
        """
        return self.append_many([(inp, events)])

    def append_many(self, entries: list[tuple[Input, list[dict[str, Any]]]]) -> int:
        """Journal several inputs, each followed by its events, in one durable transaction
        (group commit: a burst of frames pays for one fsync). Same rules as ``append``;
        returns the first input's record number; nothing is written when this raises."""
        if not entries:
            raise JournalError("nothing to journal: no inputs given")
        items: list[tuple[str, int | None, str]] = []  # (kind, event seq, body) in order
        types: list[Any] = []                           # each event's type, in order
        expected = self._last_seq + 1
        for inp, events in entries:
            items.append(("input", None, canonical_json(to_dict(inp))))
            for event in events:
                seq = event.get("seq") if isinstance(event, dict) else None
                if isinstance(seq, bool) or not isinstance(seq, int):
                    raise JournalError(f"event without an integer seq: {event!r:.200}")
                if seq != expected:
                    raise JournalError(f"event seq {seq} does not follow {expected - 1}")
                try:
                    items.append(("event", seq, canonical_json(event)))
                except (TypeError, ValueError) as exc:
                    raise JournalError(f"event seq {seq} is not JSON: {exc}") from None
                types.append(event.get("type"))
                expected += 1
        with self._lock:
            self._check_open()
            n, prev = self._records, self._last_hash
            rows: list[tuple[int, str, int | None, float, str, str, str]] = []
            appended: list[JournaledEvent] = []
            event_types = iter(types)
            written = time.time()
            for kind, seq, body in items:
                n += 1
                digest = self._chain.digest(n, kind, seq, written, prev, body)
                rows.append((n, kind, seq, written, body, prev, digest))
                if seq is not None:  # an event (inputs have no seq)
                    appended.append(JournaledEvent(n, seq, body, digest, next(event_types)))
                prev = digest
            try:
                with write_transaction(self._conn, lock=self.writer_lock):
                    self._conn.executemany(
                        "INSERT INTO records(n, kind, event_seq, written, body, prev_hash, hash)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
                    self._conn.execute(
                        "INSERT INTO head(id, records, last_hash) VALUES (1, ?, ?)"
                        " ON CONFLICT(id) DO UPDATE SET records=excluded.records,"
                        " last_hash=excluded.last_hash", (n, prev))
            except sqlite3.Error as exc:
                raise JournalError(f"{self.path}: write failed: {exc}") from exc
            first = self._records + 1
            self._records, self._last_hash = n, prev
            self._last_seq = expected - 1
            self._appended = appended
            return first

    def retry_busy_in_short_steps(self) -> None:
        """From here on a write waits for another process's lock in write_lock.py's short
        steps alone, not in SQLite's busy handler (1, 2, 5, 10 ms sleeps). For the daemon once
        recovery is done: in WAL mode nothing else on this connection waits for a lock, but
        for a recovery of the WAL's index, which only a start can meet."""
        self._check_open()
        self._conn.execute("PRAGMA busy_timeout=0")

    def leave_checkpoints_to_background(self, wal_bytes: int) -> None:
        """No WAL checkpoint from this connection's commits (wal_checkpoints.py runs them on
        another thread); a restarting WAL is truncated back to ``wal_bytes``."""
        self._check_open()
        self._conn.execute("PRAGMA wal_autocheckpoint=0")
        self._conn.execute(f"PRAGMA journal_size_limit={int(wal_bytes)}")

    def appended_events(self) -> list[JournaledEvent]:
        """The events of the last successful ``append`` or ``append_many``, as committed
        (record, seq, body, hash): handed to the outbox in memory, so its threads need not read
        them back."""
        return self._appended

    # -- reading ----------------------------------------------------------------------------
    def _rows(self, sql: str, params: tuple[object, ...] = ()) -> Iterator[tuple[Any, ...]]:
        self._check_open()
        cursor = self._conn.execute(sql, params)
        while True:
            chunk = cursor.fetchmany(_FETCH_CHUNK)
            if not chunk:
                return
            yield from chunk

    def entries(self) -> Iterator[Entry]:
        """Every journaled input with its events, in order (recovery compares them)."""
        yield from group_entries(self._rows("SELECT n, kind, body FROM records ORDER BY n"),
                                 self.path)

    def entries_after_event(self, event_type: str) -> Iterator[Entry]:
        """The entries after the input that caused the newest ``event_type`` event (none when
        the live journal has no such event). Reads backwards to that event, so the cost is
        what came after it, not the whole journal."""
        marker = f'"type":{json.dumps(event_type)}'
        found = None
        for n, body in self._rows("SELECT n, body FROM records WHERE kind='event' ORDER BY n DESC"):
            if marker in body and json.loads(body).get("type") == event_type:
                found = n
                break
        if found is None:
            return
        start = self._conn.execute("SELECT MIN(n) FROM records WHERE kind='input' AND n > ?",
                                   (found,)).fetchone()[0]
        if start is not None:
            yield from group_entries(self._rows(
                "SELECT n, kind, body FROM records WHERE n >= ? ORDER BY n", (start,)), self.path)

    def inputs(self) -> Iterator[Input]:
        """Every journaled input, in order."""
        for n, body in self._rows("SELECT n, body FROM records WHERE kind='input' ORDER BY n"):
            yield _parse_input(n, body)

    def last_input(self) -> Input | None:
        """The newest journaled input (its ``at`` is where the table clock stands)."""
        self._check_open()
        row = self._conn.execute(
            "SELECT n, body FROM records WHERE kind='input' ORDER BY n DESC LIMIT 1").fetchone()
        return None if row is None else _parse_input(row[0], row[1])

    def recent_entries(self, kind: str, limit: int) -> list[Entry]:
        """The newest ``limit`` journaled inputs of one kind with their events, oldest first."""
        self._check_open()
        inputs = self._conn.execute(
            "SELECT n, body FROM records WHERE kind='input' AND json_extract(body, '$.kind')=?"
            " ORDER BY n DESC LIMIT ?", (kind, limit)).fetchall()
        entries = []
        for n, body in reversed(inputs):
            # An input's events are the event records up to the next input.
            events = self._conn.execute(
                "SELECT body FROM records WHERE kind='event' AND n > ? AND n < COALESCE("
                "(SELECT MIN(n) FROM records WHERE kind='input' AND n > ?), n + 1) ORDER BY n",
                (n, n)).fetchall()
            entries.append(Entry(n, _parse_input(n, body), [json.loads(b) for (b,) in events]))
        return entries

    def events_after(self, seq: int, limit: int) -> list[dict[str, Any]]:
        """Events with seq greater than ``seq``, in seq order, at most ``limit``."""
        return read_events_after(self._conn, seq, limit)

    def last_event_seq(self) -> int:
        return self._last_seq

    @property
    def chain(self) -> ChainHash:
        """The chain's hash function (plain, or keyed with the table's key)."""
        return self._chain


    def record_count(self) -> int:
        """The number of the newest record (archived records included)."""
        return self._records

    def base(self) -> ArchiveBase | None:
        """Where the live journal starts (None when nothing was archived)."""
        self._check_open()
        return read_base(self._conn)

    def last_hash(self) -> str:
        """The chain hash of the newest record (archived records included)."""
        return self._last_hash

    def database(self) -> sqlite3.Connection:
        """The journal's connection, for the code that keeps its own table in the same file
        (checkpoints.py) and for recovery's one-pass read; the owner thread's only."""
        self._check_open()
        return self._conn

    def verify(self) -> VerifyResult:
        self._check_open()
        return verify_connection(self._conn, self._chain.key, self.path)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._conn.close()

    def _check_open(self) -> None:
        if self._closed:
            raise JournalError(f"{self.path}: journal is closed")

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_off_head(head_records: int, chain_records: int) -> int:
    """The first record where the chain and the head disagree."""
    if head_records > chain_records:
        return chain_records + 1       # records missing from the end
    if head_records < chain_records:
        return head_records + 1        # records added behind the journal's back
    return max(chain_records, 1)       # same count, different last hash


def _parse_input(n: int, body: str) -> Input:
    try:
        return from_dict(json.loads(body))
    except (ValueError, ScriptError) as exc:
        raise JournalError(f"record {n}: stored input is not valid: {exc}") from None


def read_events_after(conn: sqlite3.Connection, seq: int, limit: int) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT body FROM records WHERE event_seq > ? ORDER BY event_seq LIMIT ?",
        (seq, limit)).fetchall()
    return [json.loads(body) for (body,) in rows]


def verify_connection(conn: sqlite3.Connection, key: bytes | None = None,
                      source: str | Path = "journal") -> VerifyResult:
    """Walk the whole chain; stop at the first record that does not hold.

    Runs in one read transaction, so a journal being written meanwhile is checked as of one
    moment (records and head from the same snapshot). A keyed journal needs its ``key``;
    raises JournalKeyError when the key does not fit the journal's chain.
    """
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")
    try:
        try:
            chain = read_chain(conn, key, source)
        except sqlite3.DatabaseError as exc:
            return VerifyResult(False, 0, 0, None, f"database unreadable: {exc}")
        return _verify_snapshot(conn, chain)
    finally:
        if own_transaction and conn.in_transaction:
            conn.execute("ROLLBACK")


def link_problem(chain: ChainHash, next_n: int, prev: str, n: Any, kind: Any, event_seq: Any,
                 written: Any, body: Any, prev_hash: Any, digest: Any) -> str | None:
    """Why a record does not hold as the next link of the chain (None when it does): its
    number, its ``prev_hash``, its columns' types and its hash. The one rule the live journal,
    its archives and recovery share; what a record's body must say comes after it."""
    if n != next_n:
        return f"missing: the next record is {n}"
    if prev_hash != prev:
        return "prev_hash does not match the hash of the record before it"
    if not isinstance(body, str) or not isinstance(written, float) \
            or kind not in ("input", "event") or not isinstance(prev_hash, str):
        return "a column holds a value of the wrong type"
    if chain.digest(n, kind, event_seq, written, prev_hash, body) != digest:
        return "hash does not match the record's contents"
    return None


class ChainWalker:
    """Checks records one after another against the chain; shared by the live journal and its
    archives, so both are held to exactly the same rules.

    ``check`` returns None when the record holds, else the reason it does not.
    """

    def __init__(self, after_records: int = 0, after_hash: str = GENESIS_HASH,
                 after_seq: int = 0, chain: ChainHash | None = None):
        self.chain = chain or ChainHash(None)
        self.next_n = after_records + 1
        self.prev = after_hash
        self.next_seq = after_seq + 1
        self.records = 0
        self.events = 0
        # With records archived, the live journal starts on an input (archives end on one's
        # last event), so "an event before any input" only applies from genesis.
        self._seen_input = after_records > 0

    def check(self, n: Any, kind: Any, event_seq: Any, written: Any, body: Any,
              prev_hash: Any, digest: Any) -> str | None:
        problem = link_problem(self.chain, self.next_n, self.prev, n, kind, event_seq, written,
                               body, prev_hash, digest)
        if problem is not None:
            return problem
        try:
            obj = json.loads(body)
        except ValueError:
            return "body is not JSON"
        if kind == "input":
            if event_seq is not None:
                return "input record carries an event seq"
            try:
                from_dict(obj)
            except ScriptError as exc:
                return f"input is not valid: {exc}"
            self._seen_input = True
        else:
            if not self._seen_input:
                return "event before any input"
            if event_seq != self.next_seq or not isinstance(obj, dict) \
                    or obj.get("seq") != event_seq:
                return f"event seq {event_seq} where {self.next_seq} was expected"
            self.next_seq += 1
            self.events += 1
        self.prev = digest
        self.next_n += 1
        self.records += 1
        return None

    @property
    def last_record(self) -> int:
        return self.next_n - 1

    @property
    def last_seq(self) -> int:
        return self.next_seq - 1


def _verify_snapshot(conn: sqlite3.Connection, chain: ChainHash) -> VerifyResult:
    try:
        base = read_base(conn)
    except JournalError as exc:
        return VerifyResult(False, 0, 0, None, str(exc))
    except sqlite3.DatabaseError as exc:
        return VerifyResult(False, 0, 0, None, f"database unreadable: {exc}")
    if base is not None and base.records == 0 \
            and history_origin(conn, chain) != (base.hash, base.seq):
        return VerifyResult(False, 0, 0, None, "meta archive_base is not the origin of the "
                                               "history this journal continues (meta continued)")
    walker = walker_from(base, chain)
    try:
        cursor = conn.execute(
            "SELECT n, kind, event_seq, written, body, prev_hash, hash FROM records ORDER BY n")
        while True:
            chunk = cursor.fetchmany(_FETCH_CHUNK)
            if not chunk:
                break
            problem = check_rows(walker, base, chunk)
            if problem is not None:
                return problem
        problem = check_end(conn, walker)
    except sqlite3.DatabaseError as exc:
        return VerifyResult(False, walker.records, walker.events, walker.next_n,
                            f"database unreadable: {exc}")
    return problem or VerifyResult(True, walker.records, walker.events)


def walker_from(base: ArchiveBase | None, chain: ChainHash) -> ChainWalker:
    """A walker for the live journal: from record 1, or from the archive cut."""
    return ChainWalker(chain=chain) if base is None else ChainWalker(
        base.records, base.hash, base.seq, chain)


def check_rows(walker: ChainWalker, base: ArchiveBase | None,
               rows: Iterable[tuple[Any, ...]]) -> VerifyResult | None:
    """Walk ``rows`` (every column, in order) on ``walker``; the failure, or None."""
    for row in rows:
        # the archive cut, while the walk is at the live journal's first record
        cut = base if base is not None and walker.records == 0 else None
        problem = walker.check(*row)
        if problem is None:
            continue
        if cut is not None and row[0] == cut.records + 1 and row[5] != cut.hash:
            problem = ("prev_hash does not match the hash of the last archived record "
                       f"as the journal records it (meta archive_base {cut.hash[:12]}…)")
        elif cut is not None and row[0] != cut.records + 1:
            problem = (f"missing: records 1..{cut.records} are archived, so the live "
                       f"journal should start at {cut.records + 1}, not {row[0]}")
        return VerifyResult(False, walker.records, walker.events,
                            walker.next_n if problem.startswith("missing") else row[0], problem)
    return None


def check_end(conn: sqlite3.Connection, walker: ChainWalker) -> VerifyResult | None:
    """Once every record is walked: the head and the transports' positions agree with the
    chain's end (on the same snapshot); the failure, or None."""
    def bad(n: int | None, reason: str) -> VerifyResult:
        return VerifyResult(False, walker.records, walker.events, n, reason)

    head = conn.execute("SELECT records, last_hash FROM head WHERE id=1").fetchone()
    head_records, head_hash = (0, GENESIS_HASH) if head is None else head
    if head_records != walker.last_record or head_hash != walker.prev:
        return bad(_first_off_head(head_records, walker.last_record),
                   f"head says {head_records} records ending in hash {head_hash[:12]}…, "
                   f"the chain has {walker.last_record} ending in {walker.prev[:12]}…: "
                   "records were cut from the end or added without the journal")
    for transport, last_seq in conn.execute("SELECT transport, last_seq FROM delivery"):
        if last_seq > walker.last_seq:
            return bad(None, f"transport {transport!r} delivered up to seq {last_seq} but "
                             f"the journal ends at seq {walker.last_seq}")
    return None


def verify_file(path: str | Path, key: bytes | None = None) -> VerifyResult:
    """Verify a journal file without opening it for writing."""
    conn = open_read_only(path)
    try:
        return verify_connection(conn, key, path)
    finally:
        conn.close()


def export_events(path: str | Path) -> Iterator[str]:
    """Yield every event's stored canonical JSON text, in seq order."""
    conn = open_read_only(path)
    try:
        cursor = conn.execute("SELECT body FROM records WHERE kind='event' ORDER BY event_seq")
        while True:
            chunk = cursor.fetchmany(_FETCH_CHUNK)
            if not chunk:
                return
            for (body,) in chunk:
                yield body
    finally:
        conn.close()


def last_seq_of(conn: sqlite3.Connection) -> int:
    """The seq of the journal's last event: its newest record's, else (every record archived,
    or a continued journal not yet dealt on) its archive base's; 0 for an empty journal."""
    last = conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0]
    if last is not None:
        return int(last)
    base = read_base(conn)
    return 0 if base is None else base.seq


def last_event_seq_of_type(conn: sqlite3.Connection, event_type: str) -> int | None:
    """The seq of the newest journaled event of ``event_type`` (None when there is none)."""
    row = conn.execute(
        "SELECT MAX(event_seq) FROM records WHERE kind='event' "
        "AND json_extract(body, '$.type')=?", (event_type,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])
