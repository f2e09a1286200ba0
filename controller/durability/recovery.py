"""Rebuild the table from its journal: replay the journaled inputs through a table machine.

The machine is pure and deterministic, so replaying the journaled inputs must give exactly
the journaled events (same seq, same id, same body). Each recomputed event is checked against
the stored one; any difference means the journal and the rules in this build disagree, and
the table must not carry on as if nothing happened. The replay starts from the newest
trustworthy point: the checkpoint stored at the last shoe end (controller/durability/
checkpoints.py), else the one stored at the archive cut (controller/durability/archives/archive.py),
else record 1; so a start costs at most one shoe's replay whatever the journal's size.
Nothing is appended here: the caller decides what happens next (for example a tick at the
current time, which closes a betting window that ran out while the process was down).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol

from controller.durability import checkpoints
from controller.durability.canonical_form import same_json
from controller.durability.chain import ChainHash
from controller.durability.journal import (
    GENESIS_HASH,
    ArchiveBase,
    Entry,
    Journal,
    JournalCorrupt,
    JournalError,
    VerifyResult,
    canonical_json,
    link_problem,
    read_base,
    verify_connection,
)
from controller.table.inputs import Input, ScriptError, from_dict

FETCH_CHUNK = 500
PROGRESS_RECORDS = 5000  # a long replay reports progress this often (EXTEND_TIMEOUT_USEC=)


class RecoveryError(JournalError):
    """Replaying the journal did not reproduce it; the message says where and how."""


def _first_difference(expected: Any, got: Any, path: str = "") -> str:
    if isinstance(expected, dict) and isinstance(got, dict):
        for key in sorted(set(expected) | set(got)):
            if key not in got:
                return f"{path}{key}: journaled, not recomputed"
            if key not in expected:
                return f"{path}{key}: recomputed, not in the journal"
            if not same_json(expected[key], got[key]):
                return _first_difference(expected[key], got[key], f"{path}{key}.")
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        for i, (a, b) in enumerate(zip(expected, got)):
            if not same_json(a, b):
                return _first_difference(a, b, f"{path}{i}.")
    return f"{path.rstrip('.') or 'value'}: journal has {canonical_json(expected)[:120]}, " \
           f"replay gives {canonical_json(got)[:120]}"


class InputHandler(Protocol):
    """What a replay feeds: the table machine (``TableMachine.handle``)."""

    def handle(self, inp: Input) -> list[dict[str, Any]]: ...


#: the first differing field of two events (also `journal verify --against`)
first_difference = _first_difference


@dataclass(frozen=True)
class RecoveryReport:
    """What ``recover_report`` did, for the one summary line the daemon logs."""
    machine: Any
    start: str                     # where the replay began: checkpoint, archive cut, record 1
    records: int                   # records read (and checked) after that point
    inputs: int                    # inputs replayed
    shoes_ended: int               # shoe_ended events among the replayed ones
    refused: str | None            # why the stored checkpoint was not used, if it was refused
    seconds: float


def recover(journal: Journal, settings: Any, *, verify: bool = True,
            machine_factory: Callable[[Any], Any] | None = None,
            progress: Callable[[int], None] | None = None) -> Any:
    """A table machine in the state the journal leaves it in (see ``recover_report``)."""
    return recover_report(journal, settings, verify=verify, machine_factory=machine_factory,
                          progress=progress).machine


def recover_report(journal: Journal, settings: Any, *, verify: bool = True,
                   machine_factory: Callable[[Any], Any] | None = None,
                   progress: Callable[[int], None] | None = None) -> RecoveryReport:
    """Rebuild the table from its last trustworthy starting point and replay what follows.

    The start is the newest of: the shoe-end checkpoint (checkpoints.py), once it matches the
    chain; the archive cut's checkpoint; a fresh machine at record 1. The records after it are
    read once, in one read transaction: each is checked against the chain (``verify``: numbers,
    prev_hash, hash, inputs valid, event seqs) and its input replayed, and every recomputed
    event must equal the journaled one byte for byte. A refused checkpoint is not an error:
    the replay then starts further back and ``refused`` says why.

    Raises JournalCorrupt naming the first bad record, RecoveryError at the first input whose
    recomputed events differ from the journal. ``progress(records)`` is called now and then
    during a long replay.
    """
    started = time.monotonic()
    if machine_factory is None:
        from controller.table.machine import TableMachine
        machine_factory = TableMachine
    conn = journal.database()
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")  # one snapshot: the checkpoint, the records and the head agree
    try:
        archive_base = read_base(conn)
        from_checkpoint = getattr(machine_factory, "from_checkpoint", None)
        machine, start, refused = None, archive_base, None
        if from_checkpoint is not None:
            try:
                machine, start = _from_shoe_checkpoint(conn, settings, from_checkpoint,
                                                       archive_base, journal.chain)
            except checkpoints.CheckpointRefused as exc:
                refused = str(exc)
        if machine is None:
            start = archive_base
            machine = _from_archive_base(journal, settings, machine_factory, archive_base)
        if start is None:
            where = "record 1"
        elif start is archive_base:
            where = f"the archive cut after record {start.records}"
        else:
            where = f"the checkpoint after {checkpoints.describe(start)}"
        tail = _Tail(journal, start, verify, progress, full=start is archive_base)
        with quiet_machine_logs():
            tail.replay(machine)
    finally:
        if own_transaction and conn.in_transaction:
            conn.execute("ROLLBACK")
    return RecoveryReport(machine, where, tail.records, tail.inputs, tail.shoes_ended, refused,
                          time.monotonic() - started)


def _from_shoe_checkpoint(conn: Any, settings: Any, from_checkpoint: Callable[..., Any],
                          archive_base: ArchiveBase | None,
                          chain: ChainHash) -> tuple[Any, ArchiveBase | None]:
    """The machine at the stored shoe-end checkpoint, or (None, None) when there is none newer
    than the archive cut. Raises CheckpointRefused when it does not match the chain."""
    stored = checkpoints.latest(conn, chain)
    if stored is None or (archive_base is not None and stored.records <= archive_base.records):
        return None, None
    checkpoints.check_against_chain(conn, stored, chain)
    try:
        return from_checkpoint(settings, stored.checkpoint), stored
    except (ValueError, KeyError, TypeError) as exc:
        raise checkpoints.CheckpointRefused(
            f"the checkpoint after record {stored.records} does not load: {exc}") from None


def _from_archive_base(journal: Journal, settings: Any, machine_factory: Callable[[Any], Any],
                       base: ArchiveBase | None) -> Any:
    if base is None:
        return machine_factory(settings)
    # Older shoes were archived: start from the checkpoint taken at the archive cut.
    from_checkpoint = getattr(machine_factory, "from_checkpoint", None)
    if from_checkpoint is None:
        raise RecoveryError(f"{journal.path}: records 1..{base.records} are archived and "
                            f"{machine_factory!r} cannot start from a checkpoint")
    try:
        return from_checkpoint(settings, base.checkpoint)
    except (ValueError, KeyError, TypeError) as exc:
        raise RecoveryError(f"{journal.path}: the checkpoint at archived record "
                            f"{base.records} does not load: {exc}") from None


class _Tail:
    """The records after the start, read once: checked against the chain, grouped into
    entries (an input and its events) and replayed as each entry completes.

    The checks are ChainWalker's (journal.py), made in the same pass as the replay. Event
    bodies are not decoded: each is compared as text with the canonical JSON of the event the
    replay gives, which also proves it is JSON with the right seq."""

    def __init__(self, journal: Journal, start: ArchiveBase | None, verify: bool,
                 progress: Callable[[int], None] | None, full: bool):
        self.journal = journal
        self.after = 0 if start is None else start.records
        self.next_n = self.after + 1
        self.prev = GENESIS_HASH if start is None else start.hash
        self.next_seq = (0 if start is None else start.seq) + 1
        self.verify = verify
        self.progress = progress
        self.full = full  # from the archive base or record 1: verify's own words on failure
        self.records = self.inputs = self.shoes_ended = 0

    def replay(self, machine: InputHandler) -> None:
        conn = self.journal.database()
        cursor = conn.execute(
            "SELECT n, kind, event_seq, written, body, prev_hash, hash FROM records"
            " WHERE n > ? ORDER BY n", (self.after,))
        entry: tuple[int, Input, list[str]] | None = None
        while True:
            chunk = cursor.fetchmany(FETCH_CHUNK)
            if not chunk:
                break
            for n, kind, event_seq, written, body, prev_hash, digest in chunk:
                if self.verify:
                    problem = self._check(n, kind, event_seq, written, body, prev_hash, digest)
                    if problem is not None:
                        self._corrupt(n, problem)
                if kind == "input":
                    if entry is not None:
                        self._replay_entry(machine, *entry)
                    entry = (n, self._parse_input(n, body), [])
                elif entry is None:
                    self._corrupt(n, "event before any input")
                else:
                    entry[2].append(body)
                self.records += 1
                if self.progress is not None and self.records % PROGRESS_RECORDS == 0:
                    self.progress(self.records)
        if entry is not None:
            self._replay_entry(machine, *entry)
        if self.verify:
            self._check_end(conn)

    def _check(self, n: Any, kind: Any, event_seq: Any, written: Any, body: Any,
               prev_hash: Any, digest: Any) -> str | None:
        problem = link_problem(self.journal.chain, self.next_n, self.prev, n, kind, event_seq,
                               written, body, prev_hash, digest)
        if problem is not None:
            return problem
        if kind == "input":
            if event_seq is not None:
                return "input record carries an event seq"
        else:
            if event_seq != self.next_seq:
                return f"event seq {event_seq} where {self.next_seq} was expected"
            self.next_seq += 1
        self.prev = digest
        self.next_n += 1
        return None

    def _check_end(self, conn: Any) -> None:
        head = conn.execute("SELECT records, last_hash FROM head WHERE id=1").fetchone()
        head_records, head_hash = (0, GENESIS_HASH) if head is None else head
        last = self.next_n - 1
        if head_records != last or head_hash != self.prev:
            self._corrupt(None, f"head says {head_records} records ending in hash "
                                f"{str(head_hash)[:12]}…, the chain has {last} ending in "
                                f"{self.prev[:12]}…: records were cut from the end or added "
                                "without the journal")
        for transport, last_seq in conn.execute("SELECT transport, last_seq FROM delivery"):
            if last_seq > self.next_seq - 1:
                self._corrupt(None, f"transport {transport!r} delivered up to seq {last_seq} "
                                    f"but the journal ends at seq {self.next_seq - 1}")

    def _corrupt(self, n: int | None, reason: str) -> NoReturn:
        result = None
        if self.full:
            # From the start of the live journal: the full check's own words (it also names
            # a break at the archive cut the way `journal verify` does).
            result = verify_connection(self.journal.database(), self.journal.chain.key,
                                       self.journal.path)
        if result is None or result.ok:
            result = VerifyResult(False, self.records, 0, n, reason)
        raise JournalCorrupt(str(self.journal.path), result)

    def _parse_input(self, n: int, body: str) -> Input:
        try:
            obj = json.loads(body)
        except ValueError:
            self._corrupt(n, "body is not JSON")
        try:
            inp = from_dict(obj)
        except ScriptError as exc:
            if self.verify:
                self._corrupt(n, f"input is not valid: {exc}")
            raise JournalError(f"record {n}: stored input is not valid: {exc}") from None
        self.inputs += 1
        return inp

    def _replay_entry(self, machine: InputHandler, record: int, inp: Input,
                      bodies: list[str]) -> None:
        events = _handle(machine, record, inp)
        recomputed = [canonical_json(event) for event in events]
        if recomputed == bodies:
            self.shoes_ended += sum(1 for event in events if event.get("type") == "shoe_ended")
            return
        journaled = []
        for offset, body in enumerate(bodies, start=1):
            try:
                journaled.append(json.loads(body))
            except ValueError:
                self._corrupt(record + offset, "body is not JSON")
        if same_json(journaled, events):  # an older table's 15.0 is this one's 15
            self.shoes_ended += sum(1 for event in events if event.get("type") == "shoe_ended")
            return
        _disagree(record, inp, journaled, events)


def replay(machine: InputHandler, entries: Iterable[Entry]) -> None:
    """Feed each journaled input to ``machine`` and compare what it gives with the journal.

    Raises RecoveryError at the first input that fails or whose recomputed events differ from
    the journaled ones; the message names the record and kinds, never a card value.
    """
    with quiet_machine_logs():
        for entry in entries:
            events = _handle(machine, entry.record, entry.input)
            if canonical_json(events) != canonical_json(entry.events) \
                    and not same_json(events, entry.events):
                _disagree(entry.record, entry.input, entry.events, events)


def _handle(machine: InputHandler, record: int, inp: Input) -> list[dict[str, Any]]:
    try:
        return machine.handle(inp)
    except Exception as exc:
        # The input and the exception's text may name a card of a round whose betting is
        # open: this message reaches the log at ERROR, so it names the record and kinds.
        raise RecoveryError(
            f"record {record}: replaying its {inp.kind} input (at "
            f"{inp.at}) failed with {type(exc).__name__}; `pokdeng-table journal "
            f"export` shows the record"
        ) from exc


def _disagree(record: int, inp: Input, journaled_events: list[dict[str, Any]],
              events: list[dict[str, Any]]) -> NoReturn:
    journaled = [e.get("seq") for e in journaled_events]
    recomputed = [e.get("seq") if isinstance(e, dict) else None for e in events]
    if len(events) != len(journaled_events):
        detail = (f"the journal has {len(journaled_events)} event(s) (seq {journaled}), "
                  f"replay gives {len(events)} "
                  f"({', '.join(str(e.get('type')) for e in events) or 'none'})")
    else:
        index = next(i for i, (a, b) in enumerate(zip(journaled_events, events))
                     if not same_json(a, b))
        detail = f"event seq {journaled[index]}: " + \
            _first_difference(journaled_events[index], events[index])
    raise RecoveryError(
        f"record {record} ({inp.kind} at {inp.at}): the journal and "
        f"the rules disagree: {detail}; recomputed seqs {recomputed}")


class _DuringReplay(logging.Filter):
    """Drops the table machine's log lines on a thread that is replaying the past."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_replaying, "active", False)


_replaying = threading.local()
logging.getLogger("controller.table.machine").addFilter(_DuringReplay())


@contextlib.contextmanager
def quiet_machine_logs() -> Iterator[None]:
    """Replaying is not news: the pauses and rejections it re-lives were logged when they
    happened, so the machine's log lines are dropped on this thread meanwhile (the caller
    logs one summary)."""
    previous = getattr(_replaying, "active", False)
    _replaying.active = True
    try:
        yield
    finally:
        _replaying.active = previous
