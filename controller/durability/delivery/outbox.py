"""The outbox: one delivery thread per transport, delivering journaled events in seq order.

The table loop calls ``publish()`` with each append's events once they are committed (or
``notify()``); it never waits on a network. Each thread takes the events handed to it in
memory (handoff.py) and reads the journal on its own SQLite connection whenever those do not
follow on from its transport's delivered position (after a restart, a failure, a resend). It
hands them over in batches and records the new position in the ``delivery`` table of the same
database at most every ``POSITION_RECORD_S`` (and on stop), so the journal's commits rarely
wait behind that write. A crash before the position is recorded sends those events again
after restart (at least once; same ids, same bodies, same anchors). A transport whose
``window`` is above 1 (MQTT's ``in_flight_batches``) has that many batches on the way at once:
each is counted delivered when its settle call returns, oldest first, and a failure drops
them all and starts again after the delivered position.

Failures never stop a transport: every failure (``TransientError``, ``PermanentError`` such as
a 401 or 404, or an unexpected exception) retries the same batch after a capped exponential
backoff with full jitter, and the other transports carry on. A transport that comes back
(``Transport.came_back``: MQTT's connection is up again) ends the backoff at once: the backoff
paces failures, not a backend that is back. Against a connection that keeps coming and going,
the k-th early retry of one failing streak waits at least ``backoff_initial_s * 2^(k-2)`` after
its failure (the first none; capped at ``backoff_max_s``), never less than a ``Retry-After``,
so a flapping transport is paced as its backoff would pace it. ``status()`` says what is wrong
while it lasts ("refused" for a backend that refuses us) and clears it on recovery, keeping
``last_error_at``. A transport failing for its ``unreachable_after_s`` is reported once to
``on_backend_change`` (the daemon journals it as a table input, so the other transports and the
record have it), and again when it delivers.

A backend may ask for events again (``Transport.request_resend``): the outbox resends them
from the journal and, for archived shoes, from the checked archives (archives/archive_resend.py), at
most ``RESEND_MAX_EVENTS`` per request and one request per ``RESEND_MIN_INTERVAL_S``, and
never past what it had already delivered when asked (the published horizon), so a resend
can show nothing new.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from controller.bounds import external_count
from controller.durability.archives.archive_resend import ArchiveSource, ResendReader
from controller.durability.delivery.anchors import (
    EventSealing,
    anchored_events_after,
    sealing_after,
)
from controller.durability.delivery.handoff import HandedEvent, Handoff
from controller.durability.journal import JournaledEvent, JournalError, connect, read_base
from controller.durability.write_lock import write_transaction, writer_lock
from controller.transports import Transport, TransportError

log = logging.getLogger("pokdeng.outbox")

#: how long an idle delivery thread sleeps without a notify (a safety net, not the trigger)
IDLE_POLL_S = 5.0
#: a delivered position is written to the journal's database at most this often (a crash
#: repeats at most this long's worth of delivered events)
POSITION_RECORD_S = 0.5
#: at most one "still failing" warning per transport this often
BACKLOG_LOG_EVERY_S = 10.0
#: a backend's resend requests are served at most this often per transport
RESEND_MIN_INTERVAL_S = 5.0
#: at most this many events go out again for one resend request
RESEND_MAX_EVENTS = 10_000
#: longest error text handed to ``on_backend_change`` (it becomes a table event)
REASON_MAX_CHARS = 300

#: while a transport waits for its backend's word, it asks again this often
HELD_ASK_EVERY_S = 1.0
#: the state of a transport whose events wait until its backend has said where it stands
WAITING_FOR_WORD = "waiting for the backend to say where it stands"
#: in why a transport waits when its backend says it holds less than was delivered to it:
#: then a resend it asks for still goes (only events already delivered to it, as they were)
HOLDS_LESS = "but this table delivered up to seq"

#: ``(transport name, reachable, reason)``; called on a delivery thread, must not block
BackendListener = Callable[[str, bool, str], None]
#: ``(transport name)`` -> why its events must wait (``WAITING_FOR_WORD`` …), or None
DeliveryHold = Callable[[str], str | None]


class OutboxError(Exception):
    pass


def backoff_delay(attempt: int, initial: float, cap: float,
                  rand: Callable[[], float] = random.random) -> float:
    """Full-jitter backoff: uniform in [0, min(cap, initial * 2^(attempt-1))]."""
    ceiling = min(cap, initial * 2.0 ** min(attempt - 1, 30))
    return rand() * ceiling


class _Worker:
    """Delivers to one transport; its thread is the only user of ``transport`` and ``conn``."""

    def __init__(self, outbox: Outbox, transport: Transport):
        self.outbox = outbox
        self.transport = transport
        self.name = transport.name
        self.wake = threading.Event()
        transport.wake_outbox = self.wake.set
        # the transport came back since the last attempt started: a backoff ends early
        self.back = threading.Event()
        transport.back_outbox = self.back.set
        self.early_retries = 0      # backoffs ended early in this failing streak (pacing)
        self.handoff = Handoff()
        self.behind = True          # read the journal until it has nothing past the position
        self.journal_asked = False  # notify(): events were journaled without a hand-over
        self.delivered_seq = 0
        self.submitted_seq = 0      # the last event on its way (a window's batches), >= delivered
        self.recorded_seq = 0       # the position as the delivery table has it
        # batches submitted, not yet settled, oldest first: (events, settle, a resend's)
        self.in_flight: deque[tuple[list[dict[str, Any]], Callable[[], None], bool]] = deque()
        self.in_flight_peak = 0     # most batches on the way at once (benchmarks, tests)
        self.from_memory = 0        # events delivered from the handoff / read from the journal
        self.from_journal = 0
        self.record_due = 0.0       # monotonic time the position is next written
        self.state = "starting"
        self.last_error: str | None = None       # while failing; cleared on recovery
        self.last_error_at: float | None = None  # wall time of the latest failure, kept
        self.last_delivered_at: float | None = None
        self.failures = 0
        self.failing_since: float | None = None  # monotonic, while failing
        self.failing_since_wall: float | None = None
        self.unreachable = False                 # reported to on_backend_change
        self.pending_resend: int | None = None   # asked for, not yet started (rate limit)
        self.next_resend_at = 0.0
        self.resend_next: int | None = None      # resending seq resend_next..resend_until
        self.resend_until = 0
        self.resends = ResendReader(outbox.archives, self.name)
        self.next_ask_at = 0.0                   # waiting for the word: when to ask again
        self.word_came = outbox.hold is None     # sends from the start: nobody to ask
        self.thread = threading.Thread(target=self._main, name=f"outbox-{self.name}",
                                       daemon=True)

    def _main(self) -> None:
        try:
            self._run()
        except Exception as exc:  # never die silently: the status says so
            log.exception("outbox %s: delivery thread crashed", self.name)
            self._set_state(f"stopped: internal error: {exc}", str(exc))

    def _set_state(self, state: str, error: str | None = None, *,
                   clear_error: bool = False) -> None:
        with self.outbox._lock:
            self.state = state
            if error is not None:
                self.last_error = error
                self.last_error_at = time.time()
            elif clear_error:
                self.last_error = None
            self.outbox._changed.notify_all()

    def _run(self) -> None:
        stop = self.outbox._stop
        # busy_timeout 0: its one write, the delivered position, begins in write_lock.py
        conn = connect(self.outbox.path, synchronous="NORMAL", busy_timeout_ms=0)
        # Its commits hold the journal's writer_lock: a WAL checkpoint run from one of them
        # (SQLite's autocheckpoint) would hold the owner's next append behind it. The daemon
        # checkpoints on a thread of its own; without it, the journal's connection does.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        try:
            self._set_state("ok")
            log.info("outbox %s: starting after seq %d", self.name, self.delivered_seq)
            last_warning = 0.0
            while not stop.is_set():
                self.wake.clear()
                self._take_resend_request(conn)
                last_warning = self._turn(conn, last_warning)
        finally:
            self._record_position(conn)
            conn.close()
            try:
                self.transport.close()
            except Exception:
                log.exception("outbox %s: closing the transport failed", self.name)

    def _turn(self, conn: sqlite3.Connection, last_warning: float) -> float:
        """One turn: submit the next batch while the transport's window has room (a resend's
        go one at a time), else settle the oldest batch on the way, else wait for work. With
        a window of 1, ``submit`` delivers and the settle is nothing: one batch at a time.
        Returns the time of the last warning logged."""
        if self.outbox.hold is not None and not self._word_came():
            return last_warning
        window = self.transport.window
        if len(self.in_flight) < window and (self.resend_next is None or not self.in_flight):
            events = self._next_batch(conn)
            if events:
                resend = self.resend_next is not None
                self.back.clear()  # a comeback from here on may end this attempt's backoff
                try:
                    settle = self.transport.submit(events)
                except Exception as exc:  # every failure is retried: see the module doc
                    return self._batch_failed(events, exc, last_warning)
                self.in_flight.append((events, settle, resend))
                self.in_flight_peak = max(self.in_flight_peak, len(self.in_flight))
                if not resend:
                    self.submitted_seq = events[-1]["seq"]
                if len(self.in_flight) < window and not resend:
                    return last_warning  # more may be waiting: on their way first
        if not self.in_flight:
            self._record_position(conn, due_only=True)
            wait = self._idle_wait()
            if not self.wake.wait(wait) and wait >= self.outbox.idle_poll_s:
                self.behind = True  # the safety net: look at the journal itself
            return last_warning
        events, settle, resend = self.in_flight[0]
        try:
            settle()
        except Exception as exc:  # every failure is retried: see the module doc
            return self._batch_failed(events, exc, last_warning)
        self.in_flight.popleft()
        self._sent(conn, events[-1]["seq"], resend)
        self._record_position(conn, due_only=True)  # a busy table's positions too
        return last_warning

    def _word_came(self) -> bool:
        """Ask before you deliver: True once the backend's word on where it stands has passed
        the history check, asked before every batch: a later word that falls short of what
        was delivered holds the events back again. Until then nothing is sent, resends
        included, except to a backend that says it holds less than was delivered to it: the
        resend it asks for (never past the delivered position: events it was sent, as they
        were) lets it catch up to where its word is believed. The backend is asked
        again every HELD_ASK_EVERY_S (HTTP: an empty batch; MQTT's comes on connect), and a
        backend that cannot be asked for its unreachable_after_s is reported unreachable as
        a failing delivery would be."""
        assert self.outbox.hold is not None
        why = self.outbox.hold(self.name)
        if why is None:
            if not self.word_came:
                self.word_came = True
                log.info("outbox %s: the backend's word on where it stands holds; delivering "
                         "after seq %d", self.name, self.delivered_seq)
            return True
        if HOLDS_LESS in why and self.resend_next is not None:
            return True  # the resend a backend that lost events asked for: within delivered
        if self.word_came:
            self.word_came = False
            self.next_ask_at = 0.0
            log.warning("outbox %s: delivery held back after seq %d: %s", self.name,
                        self.delivered_seq, why)
        now = time.monotonic()
        if now >= self.next_ask_at:
            self.next_ask_at = now + self.outbox.held_ask_every_s
            try:
                self.transport.ask_held()
                problem = self.transport.problem()
            except Exception as exc:  # asked again in a second: the status says why meanwhile
                problem = str(exc) if isinstance(exc, TransportError) else \
                    f"{type(exc).__name__}: {exc}"
            if problem is not None and self.failing_since is None:
                self.failing_since, self.failing_since_wall = now, time.time()
            with self.outbox._lock:
                # the state says it waits; the error, why it has not answered (if known)
                self.state = WAITING_FOR_WORD
                self.last_error = problem or (None if why == WAITING_FOR_WORD else why)
                if problem is not None:
                    self.last_error_at = time.time()
                self.outbox._changed.notify_all()
            if problem is not None and not self.unreachable and \
                    now - (self.failing_since or now) >= self.transport.unreachable_after_s:
                self._report(False)
        self.wake.wait(max(0.0, self.next_ask_at - time.monotonic()))
        return False

    def _batch_failed(self, events: list[dict[str, Any]], exc: Exception,
                      last_warning: float) -> float:
        """Nothing on the way counts: start again after the delivered position, from the
        journal (the failed batches left the handoff)."""
        self.in_flight.clear()
        self.submitted_seq = self.delivered_seq
        self.behind = True
        return self._failed(events, exc, last_warning)

    def _idle_wait(self) -> float:
        wait = self.outbox.idle_poll_s
        if self.pending_resend is not None:
            wait = min(wait, self.next_resend_at - time.monotonic())
        if self.recorded_seq != self.delivered_seq:
            wait = min(wait, self.record_due - time.monotonic())
        return max(0.0, wait)

    def _next_batch(self, conn: sqlite3.Connection) -> list[dict[str, Any]]:
        """A resend's next events while one runs, else the events after the delivered seq;
        each with its journal record's anchor where sealing allows (anchors.py)."""
        if self.resend_next is not None:
            events = self.resends.batch(conn, self.resend_next, self.resend_until,
                                        self.transport.batch_max)
            if events:
                return events
            log.info("outbox %s: resend done up to seq %d", self.name, self.resend_until)
            self.resend_next = None
        if self.journal_asked:
            self.journal_asked = False  # cleared before the read: a later ask is kept
            self.behind = True
        if not self.behind:
            handed = self.handoff.take(self.submitted_seq, self.transport.batch_max)
            if handed is not None:
                self.from_memory += len(handed)
                return handed
        events = anchored_events_after(conn, self.submitted_seq, self.transport.batch_max)
        self.behind = bool(events)  # caught up: from here the handoff follows on
        self.from_journal += len(events)
        return events

    def _failed(self, events: list[dict[str, Any]], exc: Exception, last_warning: float) -> float:
        """Note a failed batch, back off, report the backend unreachable once it has failed
        long enough; returns the time of the last warning logged."""
        self.failures += 1
        retry_after = getattr(exc, "retry_after", None)
        initial, cap = self.transport.backoff_initial_s, self.transport.backoff_max_s
        delay = backoff_delay(self.failures, initial, cap, self.outbox._rand)
        # A comeback may end the wait early, but not before this (see the module doc).
        earliest = 0.0 if self.early_retries == 0 else \
            min(cap, initial * 2 ** min(self.early_retries - 1, 30))
        if retry_after is not None:
            delay = max(delay, min(retry_after, cap))
            earliest = max(earliest, min(retry_after, cap))
        known = isinstance(exc, TransportError)
        text = str(exc) if known else f"{type(exc).__name__}: {exc}"
        state = getattr(exc, "state", "retrying") if known else "retrying"
        now = time.monotonic()
        first_failure = self.failing_since is None
        if first_failure:
            self.failing_since, self.failing_since_wall = now, time.time()
        changed = state != self.state
        self._set_state(state, text)
        if first_failure or changed or now - last_warning >= BACKLOG_LOG_EVERY_S:
            last_warning = now
            status = self.outbox.status().get(self.name, {})
            log.log(logging.ERROR if state == "refused" else logging.WARNING,
                    "outbox %s: delivery failed at seq %d-%d (%s); retrying in %.1fs; backlog "
                    "%s events, oldest %.1fs old", self.name, events[0]["seq"],
                    events[-1]["seq"], text, delay, status.get("backlog"),
                    status.get("oldest_age_s") or 0.0, exc_info=not known)
        self._back_off(delay, earliest)
        return last_warning

    def _back_off(self, delay: float, earliest: float) -> None:
        """Wait ``delay``, or only ``earliest`` once the transport has come back, noticing on
        the way when the failure has lasted long enough."""
        stop = self.outbox._stop
        start = time.monotonic()
        deadline, early = start + delay, start + min(earliest, delay)
        while not stop.is_set():
            now = time.monotonic()
            unreachable_due = None
            if not self.unreachable and self.failing_since is not None:
                unreachable_due = self.failing_since + self.transport.unreachable_after_s
                if now >= unreachable_due:
                    self._report(False)
                    continue
            if now >= deadline:
                return
            back = self.back.is_set()
            if back and now >= early:
                self.early_retries += 1
                log.info("outbox %s: transport back, retrying now (%.1fs of backoff left)",
                         self.name, deadline - now)
                return
            until = min(deadline, early if back else deadline,
                        unreachable_due if unreachable_due is not None else deadline)
            # Back already: only time can end this wait (waiting on the set event would spin).
            (stop.wait if back else self.back.wait)(until - now)

    def _report(self, reachable: bool) -> None:
        """Tell the daemon the backend went unreachable, or delivers again."""
        self.unreachable = not reachable
        if reachable:
            reason = "delivering again"
            log.warning("outbox %s: backend reachable again, delivering", self.name)
        else:
            reason = (f"failing for {self.transport.unreachable_after_s:g}s: "
                      f"{self.last_error or 'unknown error'}")[:REASON_MAX_CHARS]
            log.error("outbox %s: backend unreachable: %s", self.name, reason)
        listener = self.outbox.on_backend_change
        if listener is not None:
            try:
                listener(self.name, reachable, reason)
            except Exception:
                log.exception("outbox %s: backend change listener failed", self.name)

    def _sent(self, conn: sqlite3.Connection, seq: int, resend: bool) -> None:
        """The transport took a batch ending at ``seq`` (a resend's, or new events)."""
        recovered = self.failing_since is not None
        self.failures = self.early_retries = 0
        self.failing_since = self.failing_since_wall = None
        self._set_state("ok", clear_error=True)  # before the position: waiters see both
        if resend:
            self.resend_next = seq + 1
        else:
            self._delivered(conn, seq)
        if recovered:
            log.info("outbox %s: delivering again, now at seq %d", self.name, seq)
        if self.unreachable:
            self._report(True)

    def _delivered(self, conn: sqlite3.Connection, seq: int) -> None:
        if self.recorded_seq == self.delivered_seq:
            # Not at once: the next events' commit is likely on its way. Within the interval.
            self.record_due = time.monotonic() + self.outbox.position_record_s
        with self.outbox._lock:
            self.delivered_seq = seq
            self.submitted_seq = max(self.submitted_seq, seq)
            self.last_delivered_at = time.time()
            self.outbox._changed.notify_all()

    def _record_position(self, conn: sqlite3.Connection, *, due_only: bool = False) -> None:
        """Write the delivered position to the delivery table (when due, with ``due_only``)."""
        seq = self.delivered_seq
        if seq == self.recorded_seq or (due_only and time.monotonic() < self.record_due):
            return
        try:
            with write_transaction(conn, lock=self.outbox.writer_lock):
                conn.execute("UPDATE delivery SET last_seq=?, updated=? WHERE transport=?",
                             (seq, time.time(), self.name))
            self.recorded_seq = seq
        except sqlite3.Error as exc:
            # Delivered but not remembered: a restart would send these again (allowed).
            log.error("outbox %s: cannot record delivered seq %d: %s", self.name, seq, exc)
            self.record_due = time.monotonic() + self.outbox.position_record_s

    # -- resend requests -----------------------------------------------------------------------
    def _take_resend_request(self, conn: sqlite3.Connection) -> None:
        """Start the resend a backend asked for, bounded and at most one per interval."""
        asked = self.transport.take_resend_request()
        if asked is not None:
            try:  # a number from outside: bounded before it meets SQLite or the arithmetic
                asked = external_count(asked, "the resend request's from_seq", minimum=1)
            except ValueError as exc:
                log.warning("outbox %s: the backend's resend request is refused: %s", self.name,
                            exc)
                asked = None
        if asked is not None:
            self.pending_resend = asked if self.pending_resend is None else \
                min(asked, self.pending_resend)
        now = time.monotonic()
        if self.pending_resend is None or now < self.next_resend_at:
            return
        from_seq, self.pending_resend = self.pending_resend, None
        self.next_resend_at = now + self.outbox.resend_interval_s
        horizon = self.delivered_seq  # what this transport already published: nothing past it
        if from_seq > horizon:
            log.info("outbox %s: resend from seq %d asked; nothing to resend: published up to "
                     "seq %d, the rest follows in order", self.name, from_seq, horizon)
            return
        # From where the backend asked (or a running resend's next seq, if lower), at most
        # resend_max_events: a backend catching up asks again from where this one stops.
        first = from_seq if self.resend_next is None else min(from_seq, self.resend_next)
        limit = self.outbox.resend_max_events
        first = self.resends.start(conn, first, min(horizon, first + limit - 1))
        self.resend_next, self.resend_until = first, min(horizon, first + limit - 1)
        if self.resend_until < horizon:
            log.warning("outbox %s: resend from seq %d asked; resending %d events, up to seq "
                        "%d (ask again from seq %d for more)", self.name, from_seq, limit,
                        self.resend_until, self.resend_until + 1)
        log.info("outbox %s: resending seq %d-%d as the backend asked", self.name, first,
                 self.resend_until)


class Outbox:
    """Delivery threads for a journal's events; ``publish()`` (or ``notify()``) is the only call
    the loop makes."""

    def __init__(self, journal_path: str | Path, transports: Iterable[Transport], *,
                 idle_poll_s: float = IDLE_POLL_S, rand: Callable[[], float] = random.random,
                 on_backend_change: BackendListener | None = None,
                 known_unreachable: Iterable[str] = (),
                 resend_interval_s: float = RESEND_MIN_INTERVAL_S,
                 resend_max_events: int = RESEND_MAX_EVENTS,
                 archives: ArchiveSource | None = None,
                 position_record_s: float = POSITION_RECORD_S,
                 hold: DeliveryHold | None = None,
                 held_ask_every_s: float = HELD_ASK_EVERY_S):
        """``known_unreachable``: transports the table last recorded as unreachable (before a
        restart); their next delivery is reported to ``on_backend_change`` as a recovery.
        ``archives``: where resends find archived shoes (default: beside the journal, plain
        chain; a keyed journal's needs its key). ``hold``: why a transport must not send yet
        (the history guard's ``waiting_for``): none of its events leave until it says None."""
        self.path = Path(journal_path)
        #: taken with the journal's other writers in this process (write_lock.py)
        self.writer_lock = writer_lock(self.path)
        self.archives = archives or ArchiveSource.beside(self.path)
        self.idle_poll_s = idle_poll_s
        self.on_backend_change = on_backend_change
        self.resend_interval_s = resend_interval_s
        self.resend_max_events = resend_max_events
        self.position_record_s = position_record_s
        self.hold = hold
        self.held_ask_every_s = held_ask_every_s
        self._rand = rand
        # publish(): the owner loop decides the anchors of the events it hands over
        self._sealing = EventSealing(False, None)
        self._next_seq = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._status_conn: sqlite3.Connection | None = None
        self._status_lock = threading.Lock()
        self._workers: dict[str, _Worker] = {}
        for transport in transports:
            if transport.name in self._workers:
                raise OutboxError(f"two transports named {transport.name!r}; give each a name")
            self._workers[transport.name] = _Worker(self, transport)
        for name in known_unreachable:
            if name in self._workers:
                self._workers[name].unreachable = True
        self._load_positions()
        self._started = False

    def _load_positions(self) -> None:
        """Each transport's delivered position; a new transport starts at the beginning."""
        conn = connect(self.path, synchronous="NORMAL")
        try:
            base = read_base(conn)
            start = 0 if base is None else base.seq
            for name, worker in self._workers.items():
                added = conn.execute(
                    "INSERT OR IGNORE INTO delivery(transport, last_seq, updated) "
                    "VALUES (?, ?, ?)", (name, start, time.time())).rowcount
                if added and start and base is not None and base.records == 0:
                    log.info("outbox %s: starts after seq %d: this journal continues the "
                             "table's history there", name, start)
                elif added and start:
                    # The journal no longer holds them; a new backend that needs them gets
                    # them from `pokdeng-table journal export --archives`.
                    log.warning("outbox %s: new transport starts after seq %d: events 1-%d "
                                "are archived and are not sent", name, start, start)
                worker.delivered_seq = worker.recorded_seq = worker.submitted_seq = int(
                    conn.execute("SELECT last_seq FROM delivery WHERE transport=?",
                                 (name,)).fetchone()[0])
            last_record, last_seq = conn.execute(
                "SELECT MAX(n), MAX(event_seq) FROM records").fetchone()
            if last_record is None:
                last_record = 0 if base is None else base.records
                last_seq = start
            self._sealing = sealing_after(conn, last_record)
            self._next_seq = int(last_seq or start) + 1
        except (sqlite3.Error, JournalError) as exc:
            raise OutboxError(f"{self.path}: cannot read delivery positions: {exc}") from None
        finally:
            conn.close()

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        for worker in self._workers.values():
            worker.thread.start()

    def notify(self) -> None:
        """New events are journaled (not handed over): every delivery thread looks at the
        journal. Never blocks."""
        for worker in self._workers.values():
            worker.journal_asked = True
            worker.wake.set()

    def publish(self, committed: list[JournaledEvent]) -> None:
        """Hand an append's events to every delivery thread once they are committed (the
        owner loop's call, in journal order), with the anchors the journal gives them; then
        wake the threads. Never blocks on a network or the disk."""
        if not committed:
            return
        if committed[0].seq != self._next_seq:
            # Events journaled without passing here: the window state may be stale until
            # the next round_opened or betting end settles it (the threads read the journal).
            self._sealing.betting_open = None
        handed = [HandedEvent(event.seq, event.body,
                              self._sealing.anchor(event.record, event.type, event.hash))
                  for event in committed]
        self._next_seq = committed[-1].seq + 1
        for worker in self._workers.values():
            worker.handoff.put(handed)
            worker.wake.set()

    def card_path_threads(self) -> list[tuple[str, threading.Thread]]:
        """Each delivery thread and its transport's network thread, if any, by role."""
        threads: list[tuple[str, threading.Thread]] = []
        for name, worker in self._workers.items():
            threads.append((f"delivery {name}", worker.thread))
            network = worker.transport.network_thread()
            if network is not None:
                threads.append((f"network {name}", network))
        return threads

    def sources(self) -> dict[str, tuple[int, int]]:
        """Per transport: events taken from memory and events read back from the journal
        (resends not counted), for the benchmarks and tests."""
        return {name: (w.from_memory, w.from_journal) for name, w in self._workers.items()}

    def in_flight_peaks(self) -> dict[str, int]:
        """Per transport: the most batches it had on the way at once (benchmarks, tests)."""
        return {name: w.in_flight_peak for name, w in self._workers.items()}

    def wait_delivered(self, seq: int, timeout: float) -> bool:
        """Wait until every running transport has delivered up to ``seq`` (shutdown drain)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                pending = [w for w in self._workers.values()
                           if w.delivered_seq < seq and not w.state.startswith("stopped")]
                if not pending:
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.5))

    def status(self) -> dict[str, dict[str, Any]]:
        """Per transport: delivered_seq, backlog, oldest_age_s, state, last_error (while it
        fails), last_error_at, failing_since, unreachable, resending."""
        with self._lock:
            snapshot = {name: (w.delivered_seq, w.state, w.last_error, w.last_delivered_at,
                               w.last_error_at, w.failing_since_wall, w.unreachable,
                               w.resend_next, w.resend_until)
                        for name, w in self._workers.items()}
        last_seq, oldest = self._journal_figures([s[0] for s in snapshot.values()])
        now = time.time()
        out = {}
        for name, (delivered, state, error, delivered_at, error_at, failing_since,
                   unreachable, resend_next, resend_until) in snapshot.items():
            if state in ("ok", WAITING_FOR_WORD):
                # The connection may be known down before the next delivery tries it.
                problem = self._workers[name].transport.problem()
                if problem:
                    state = "disconnected" if state == "ok" else state
                    error = problem
            written = oldest.get(delivered)
            out[name] = {
                "delivered_seq": delivered,
                "backlog": max(0, last_seq - delivered),
                "oldest_age_s": None if written is None else round(max(0.0, now - written), 3),
                "state": state,
                "last_error": error,
                "last_error_at": error_at,
                "failing_since": failing_since,
                "unreachable": unreachable,
                "resending": None if resend_next is None else [resend_next, resend_until],
                "last_delivered_at": delivered_at,
            }
        return out

    def _journal_figures(self, positions: list[int]) -> tuple[int, dict[int, float]]:
        """The last event seq, and for each position the write time of the next event."""
        with self._status_lock:
            try:
                if self._status_conn is None:
                    self._status_conn = connect(self.path, synchronous="NORMAL",
                                                check_same_thread=False)
                conn = self._status_conn
                last = conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0] or 0
                oldest = {}
                for pos in set(positions):
                    row = conn.execute("SELECT written FROM records WHERE event_seq > ? "
                                       "ORDER BY event_seq LIMIT 1", (pos,)).fetchone()
                    if row is not None:
                        oldest[pos] = row[0]
                return int(last), oldest
            except sqlite3.Error as exc:
                log.error("outbox: cannot read the journal for status: %s", exc)
                return 0, {}

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every delivery thread (after its current attempt) and close the transports."""
        self._stop.set()
        self.notify()
        for worker in self._workers.values():
            worker.back.set()  # ends a backoff now: the loop sees the stop
        deadline = time.monotonic() + timeout
        for worker in self._workers.values():
            if worker.thread.is_alive():
                worker.thread.join(max(0.0, deadline - time.monotonic()))
            if worker.thread.is_alive():
                log.warning("outbox %s: delivery thread did not stop within %.0fs",
                            worker.name, timeout)
            elif not self._started:
                worker.transport.close()
        with self._status_lock:
            if self._status_conn is not None:
                self._status_conn.close()
                self._status_conn = None

    def __enter__(self) -> Outbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
