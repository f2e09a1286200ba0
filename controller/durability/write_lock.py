"""Write transactions on the journal: its lock taken without SQLite's sleeps.

SQLite's busy handler (``busy_timeout``) retries a locked database after sleeping 1, 2, 5, 10,
15, 20, 25 ... ms. A writer that held the lock for 0.3 ms costs the next writer 1.1 ms; 1.2 ms
costs 3.2 ms; 4 ms costs 8.3 ms (bench/write_lock_bench.py). On the card path that sleep is
the tail, so every write transaction on a journal begins here:

* Within one process, the writers to one journal file take one lock of the process's first
  (``writer_lock``). In the daemon these are the owner's appends and shoe-end checkpoints and
  each sender's delivery position. They queue on that lock and are handed it as soon as it is
  free; they never meet SQLite's busy handler against one another.
* Against another process, ``BEGIN`` is tried again every 0.1 ms for the first ~20 ms, then
  less often, for up to ``timeout_s``. Other processes are the housekeeping children's marks
  and cuts and an operator's ``journal`` command. A card then waits about as long as the
  other process holds the lock, not up to twice as long. That needs SQLite's own handler off
  on the writer's connection (``busy_timeout`` 0: ``journal.connect(..., busy_timeout_ms=0)``,
  ``Journal.retry_busy_in_short_steps``), set once when it opens: toggled around each
  ``BEGIN`` it cost the card path three statements more, and under load every statement is
  a chance to lose the interpreter lock for up to its switch interval. On a connection that
  keeps the handler each try waits in it, which is right for the housekeeping children.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from controller.durability.idle_child import writing_at_normal_priority

#: how long a writer waits for another process's write transaction before it gives up
TIMEOUT_S = 10.0
#: (attempts, pause): tries 0.1 ms apart for the first ~20 ms (a cut or a mark of another
#: process ends within that), then every 1 ms up to ~0.2 s, then every 5 ms; a try costs a
#: few microseconds
RETRY_STEPS = ((150, 0.0001), (180, 0.001))
LAST_PAUSE_S = 0.005

_SQLITE_BUSY = 5

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def writer_lock(path: str | Path) -> threading.Lock:
    """The lock this process's writers to the journal at ``path`` take before they begin."""
    key = os.path.realpath(path)
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def _pauses() -> Iterator[float]:
    for attempts, pause in RETRY_STEPS:
        for _ in range(attempts):
            yield pause
    while True:
        yield LAST_PAUSE_S


def _busy(exc: sqlite3.OperationalError) -> bool:
    return (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_BUSY


def begin(conn: sqlite3.Connection, *, timeout_s: float = TIMEOUT_S) -> None:
    """``BEGIN IMMEDIATE`` on ``conn``, tried again in short steps while another process holds
    the lock; ``sqlite3.OperationalError`` ("database is locked") after ``timeout_s``."""
    deadline = None
    for pause in _pauses():
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            now = time.monotonic()
            deadline = now + timeout_s if deadline is None else deadline
            if not _busy(exc) or now >= deadline:
                raise
        time.sleep(pause)


@contextmanager
def write_transaction(conn: sqlite3.Connection, *, lock: threading.Lock | None = None,
                      timeout_s: float = TIMEOUT_S) -> Iterator[None]:
    """One write transaction on ``conn``: committed when the block ends, rolled back when it
    raises. ``lock`` (``writer_lock(path)``) is held from before ``BEGIN`` until after the
    commit. A thread at idle priority holds the journal at the normal one (idle_child.py)."""
    with lock if lock is not None else nullcontext():
        begin(conn, timeout_s=timeout_s)
        with writing_at_normal_priority():
            try:
                yield
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
