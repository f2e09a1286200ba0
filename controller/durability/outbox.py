"""The outbox: one delivery thread per transport, reading journaled events in seq order.

The table loop only calls ``notify()`` after a journal append; it never waits on a network.
Each thread has its own SQLite connection, reads the events after its transport's delivered
position, hands them over in batches, and records the new position in the ``delivery`` table
of the same database once the transport has accepted them. A crash between delivery and that
write sends the batch again after restart (at least once; same ids, same bodies).

Failures: ``TransientError`` (and any unexpected exception) retries the same batch after a
capped exponential backoff with full jitter; ``PermanentError`` stops that transport with the
reason in ``status()`` and an ERROR log line; the other transports carry on.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from controller.durability.anchors import anchored_events_after
from controller.durability.journal import JournalError, connect, read_base
from controller.transports import PermanentError, TransientError, Transport

log = logging.getLogger("pokdeng.outbox")

#: how long an idle delivery thread sleeps without a notify (a safety net, not the trigger)
IDLE_POLL_S = 5.0
#: at most one "still failing" warning per transport this often
BACKLOG_LOG_EVERY_S = 10.0


class OutboxError(Exception):
    pass


def backoff_delay(attempt: int, initial: float, cap: float,
                  rand: Callable[[], float] = random.random) -> float:
    """Full-jitter backoff: uniform in [0, min(cap, initial * 2^(attempt-1))]."""
    ceiling = min(cap, initial * (2 ** min(attempt - 1, 30)))
    return rand() * ceiling


class _Worker:
    """Delivers to one transport; its thread is the only user of ``transport`` and ``conn``."""

    def __init__(self, outbox: Outbox, transport: Transport):
        self.outbox = outbox
        self.transport = transport
        self.name = transport.name
        self.wake = threading.Event()
        self.delivered_seq = 0
        self.state = "starting"
        self.last_error: str | None = None
        self.last_delivered_at: float | None = None
        self.failures = 0
        self.thread = threading.Thread(target=self._main, name=f"outbox-{self.name}",
                                       daemon=True)

    def _main(self) -> None:
        try:
            self._run()
        except Exception as exc:  # never die silently: the status says so
            log.exception("outbox %s: delivery thread crashed", self.name)
            self._set_state(f"stopped: internal error: {exc}", str(exc))

    def _set_state(self, state: str, error: str | None = None) -> None:
        with self.outbox._lock:
            self.state = state
            if error is not None:
                self.last_error = error
            self.outbox._changed.notify_all()

    def _run(self) -> None:
        stop = self.outbox._stop
        conn = connect(self.outbox.path, synchronous="NORMAL")
        try:
            self._set_state("ok")
            log.info("outbox %s: starting after seq %d", self.name, self.delivered_seq)
            last_warning = 0.0
            while not stop.is_set():
                self.wake.clear()
                # each with its journal record's anchor where sealing allows (anchors.py)
                events = anchored_events_after(conn, self.delivered_seq,
                                               self.transport.batch_max)
                if not events:
                    self.wake.wait(self.outbox.idle_poll_s)
                    continue
                try:
                    self.transport.deliver(events)
                except PermanentError as exc:
                    log.error("outbox %s: STOPPED, permanent delivery error at seq %d-%d: %s; "
                              "events from seq %d on wait until this is fixed and the daemon "
                              "restarted", self.name, events[0]["seq"], events[-1]["seq"], exc,
                              events[0]["seq"])
                    self._set_state(f"stopped: {exc}", str(exc))
                    return
                except Exception as exc:  # TransientError, or a transport bug: retry
                    self.failures += 1
                    retry_after = getattr(exc, "retry_after", None)
                    delay = backoff_delay(self.failures, self.transport.backoff_initial_s,
                                          self.transport.backoff_max_s, self.outbox._rand)
                    if retry_after is not None:
                        delay = max(delay, min(retry_after, self.transport.backoff_max_s))
                    text = str(exc) if isinstance(exc, TransientError) else \
                        f"{type(exc).__name__}: {exc}"
                    first_failure = self.state != "retrying"
                    self._set_state("retrying", text)
                    now = time.monotonic()
                    if first_failure or now - last_warning >= BACKLOG_LOG_EVERY_S:
                        last_warning = now
                        status = self.outbox.status().get(self.name, {})
                        log.warning(
                            "outbox %s: delivery failed (%s); retrying in %.1fs; backlog %s "
                            "events, oldest %.1fs old", self.name, text, delay,
                            status.get("backlog"), status.get("oldest_age_s") or 0.0,
                            exc_info=not isinstance(exc, TransientError))
                    stop.wait(delay)
                    continue
                self._delivered(conn, events[-1]["seq"])
        finally:
            conn.close()
            try:
                self.transport.close()
            except Exception:
                log.exception("outbox %s: closing the transport failed", self.name)

    def _delivered(self, conn: sqlite3.Connection, seq: int) -> None:
        recovered = self.state == "retrying"
        with self.outbox._lock:
            self.delivered_seq = seq
            self.last_delivered_at = time.time()
            self.outbox._changed.notify_all()
        self.failures = 0
        try:
            conn.execute("UPDATE delivery SET last_seq=?, updated=? WHERE transport=?",
                         (seq, time.time(), self.name))
        except sqlite3.Error as exc:
            # Delivered but not remembered: a restart would send these again (allowed).
            log.error("outbox %s: cannot record delivered seq %d: %s", self.name, seq, exc)
        if recovered:
            log.info("outbox %s: delivering again, now at seq %d", self.name, seq)
        self._set_state("ok")



class Outbox:
    """Delivery threads for a journal's events; ``notify()`` is the only call the loop makes."""

    def __init__(self, journal_path: str | Path, transports: Iterable[Transport], *,
                 idle_poll_s: float = IDLE_POLL_S, rand: Callable[[], float] = random.random):
        self.path = Path(journal_path)
        self.idle_poll_s = idle_poll_s
        self._rand = rand
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
                if added and start:
                    # The journal no longer holds them; a new backend that needs them gets
                    # them from `pokdeng-table journal export --archives`.
                    log.warning("outbox %s: new transport starts after seq %d: events 1-%d "
                                "are archived and are not sent", name, start, start)
                worker.delivered_seq = int(conn.execute(
                    "SELECT last_seq FROM delivery WHERE transport=?", (name,)).fetchone()[0])
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
        """New events are journaled: wake every delivery thread. Never blocks."""
        for worker in self._workers.values():
            worker.wake.set()

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
        """Per transport: delivered_seq, backlog, oldest_age_s, state, last_error."""
        with self._lock:
            snapshot = {name: (w.delivered_seq, w.state, w.last_error, w.last_delivered_at)
                        for name, w in self._workers.items()}
        last_seq, oldest = self._journal_figures([s[0] for s in snapshot.values()])
        now = time.time()
        out = {}
        for name, (delivered, state, error, delivered_at) in snapshot.items():
            written = oldest.get(delivered)
            out[name] = {
                "delivered_seq": delivered,
                "backlog": max(0, last_seq - delivered),
                "oldest_age_s": None if written is None else round(max(0.0, now - written), 3),
                "state": state,
                "last_error": error,
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
