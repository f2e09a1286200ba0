"""WAL checkpoints on a thread of their own, off the table loop's commits.

SQLite's default checkpoints from whichever connection commits when the WAL passes 1,000
pages: with the journal that is the owner loop, which then copies the WAL into the database
and fsyncs it between one input and the next. The daemon turns that off on the journal's
connection (``Journal.leave_checkpoints_to_background``) and runs this thread instead: it
checkpoints (PASSIVE: it never makes a writer wait) once the WAL holds more than
``wal_bytes``, and anything pending every ``idle_s`` so the database file stays close to
the WAL. The journal's ``journal_size_limit`` truncates the WAL back to ``wal_bytes`` when it
restarts, so its size says how much is waiting.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

from controller.durability.journal import JournalError, connect

log = logging.getLogger("pokdeng.wal_checkpoints")

#: checkpoint once the WAL file is larger than this (SQLite's own threshold: 1,000 pages)
WAL_BYTES = 4 * 1024 * 1024
#: how often the WAL's size is looked at
CHECK_EVERY_S = 1.0
#: a WAL with anything in it is checkpointed at least this often
IDLE_CHECKPOINT_S = 30.0


class WalCheckpointer:
    def __init__(self, path: str | Path, *, wal_bytes: int = WAL_BYTES,
                 check_every_s: float = CHECK_EVERY_S, idle_s: float = IDLE_CHECKPOINT_S):
        self.path = Path(path)
        self.wal = Path(f"{self.path}-wal")
        self.wal_bytes = wal_bytes
        self.check_every_s = check_every_s
        self.idle_s = idle_s
        self.checkpoints = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-checkpoints", daemon=True)

    def start(self) -> WalCheckpointer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            conn = connect(self.path, synchronous="FULL")
        except JournalError as exc:
            log.error("WAL checkpoints: cannot open the journal: %s", exc)
            return
        try:
            last = time.monotonic()
            version = self._data_version(conn)
            while not self._stop.wait(self.check_every_s):
                changed = self._data_version(conn) != version
                due = changed and time.monotonic() - last >= self.idle_s
                if self._wal_size() > self.wal_bytes or due:
                    self._checkpoint(conn)
                    last, version = time.monotonic(), self._data_version(conn)
        finally:
            conn.close()

    def _wal_size(self) -> int:
        try:
            return os.stat(self.wal).st_size
        except OSError:
            return 0

    @staticmethod
    def _data_version(conn: sqlite3.Connection) -> int:
        return int(conn.execute("PRAGMA data_version").fetchone()[0])

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.checkpoints += 1
            log.debug("WAL checkpoint: %s of %s frames copied%s", copied, frames,
                      " (readers kept the rest)" if busy or copied < frames else "")
        except sqlite3.Error as exc:  # the next round tries again; the WAL just grows meanwhile
            log.warning("WAL checkpoint failed: %s", exc)
