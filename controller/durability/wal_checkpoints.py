"""WAL checkpoints on a thread of their own, off the table loop's commits.

SQLite's default checkpoints from whichever connection commits when the WAL passes 1,000
pages: with the journal that is the owner loop, which then copies the WAL into the database
and fsyncs it between one input and the next. The daemon turns that off on the journal's
connection (``Journal.leave_checkpoints_to_background``) and runs this thread instead: it
checkpoints (PASSIVE: it never makes a writer wait) once the WAL holds more than
``wal_bytes``, and anything pending every ``idle_s`` so the database file stays close to
the WAL. The journal's ``journal_size_limit`` truncates the WAL back to ``wal_bytes`` when it
restarts, so its size says how much is waiting.

It also keeps the WAL file **allocated** to ``wal_bytes``: zeros written past its end, in short
steps, each under the journal's write lock, when the thread starts and whenever the file is
shorter (a new WAL after a start, one cut to nothing by a TRUNCATE checkpoint). A commit that
writes inside the file's size leaves its size and blocks alone, so its ``fdatasync`` is the
data and the disk's flush; a commit that grows the file must also commit the file system's
journal (ext4's jbd2), and with ``data=ordered`` that commit first writes every other file's
new data, e.g. a broker's store saved by rename a moment before. Measured side by side on this
project's machine with such a writer beside it, 20 KB syncs at p99 went from 43-68 ms growing
the file to 6-8 ms writing inside it. SQLite reads a WAL's frames only up to the first one
whose salts do not match its header, so zeros past the last frame are never taken for data
(the same holds for the stale frames a restarted WAL leaves behind).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

from controller.durability.journal import JournalError, connect
from controller.durability.write_lock import write_transaction, writer_lock
from controller.regular_file import NotARegularFile, open_regular_in_place

log = logging.getLogger("pokdeng.wal_checkpoints")

#: checkpoint once the WAL file is larger than this (SQLite's own threshold: 1,000 pages)
WAL_BYTES = 4 * 1024 * 1024
#: how often the WAL's size is looked at
CHECK_EVERY_S = 1.0
#: a WAL with anything in it is checkpointed at least this often
IDLE_CHECKPOINT_S = 30.0
#: zeros written at a time to keep the WAL allocated, each step one short write transaction
#: (a card waiting for the lock waits for one step, a few milliseconds, not the whole file)
ALLOCATE_STEP = 512 * 1024


class WalCheckpointer:
    def __init__(self, path: str | Path, *, wal_bytes: int = WAL_BYTES,
                 check_every_s: float = CHECK_EVERY_S, idle_s: float = IDLE_CHECKPOINT_S):
        self.path = Path(path)
        self.wal = Path(f"{self.path}-wal")
        self.wal_bytes = wal_bytes
        self.check_every_s = check_every_s
        self.idle_s = idle_s
        self.checkpoints = 0
        self._failing: str | None = None  # the allocation's last failure, warned about once
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
            # SQLite's busy handler off: the allocation's BEGIN waits in write_lock.py's short
            # steps (the handler's 1-100 ms sleeps would hold this process's writer lock, and
            # the cards queued on it, past the other process's commit); a PASSIVE checkpoint
            # and PRAGMA data_version never wait on a lock at all
            conn = connect(self.path, synchronous="FULL", busy_timeout_ms=0)
        except JournalError as exc:
            log.error("WAL checkpoints: cannot open the journal: %s", exc)
            return
        try:
            self._keep_allocated(conn)
            last = time.monotonic()
            version = self._data_version(conn)
            while not self._stop.wait(self.check_every_s):
                try:
                    changed = self._data_version(conn) != version
                    due = changed and time.monotonic() - last >= self.idle_s
                    if self._wal_size() > self.wal_bytes or due:
                        self._checkpoint(conn)
                        last, version = time.monotonic(), self._data_version(conn)
                    self._keep_allocated(conn)
                except sqlite3.Error as exc:  # the thread carries on: a dead one never says so
                    self._warn_once(f"WAL checkpoints: {exc} (tried again every "
                                    f"{self.check_every_s:.0f} s)")
        finally:
            conn.close()

    def _keep_allocated(self, conn: sqlite3.Connection) -> None:
        """Zeros past the WAL's end up to ``wal_bytes``, a step at a time under the write lock
        (no other writer appends a frame meanwhile), each step synced. A WAL already that long
        takes no lock at all (it was looked at every second, queueing behind another process's
        transaction while holding this process's writer lock). A failure is warned about once
        until a step succeeds again (a full disk would otherwise log every second)."""
        if self._wal_size() >= self.wal_bytes:
            return
        lock = writer_lock(self.path)
        while not self._stop.is_set():
            try:
                with write_transaction(conn, lock=lock):
                    if not self._allocate_step():
                        return
                self._failing = None
            except (sqlite3.Error, OSError) as exc:  # tried again on the next look
                self._warn_once(f"WAL allocation: {exc} (warned once; tried again every "
                                f"{self.check_every_s:.0f} s)")
                return

    def _allocate_step(self) -> bool:
        """One step of zeros at the WAL's end; False when it is long enough, or not there, or
        not a plain file of its own: a link, a FIFO (opening it would wait for a reader with
        the write lock held), a device or a second name of another file is not the WAL SQLite
        made, and zeros are never written through it (the daemon may run as root)."""
        try:
            fd = open_regular_in_place(self.wal)
        except FileNotFoundError:  # SQLite makes it with the first connection; not ours to make
            return False
        except NotARegularFile as exc:
            self._warn_once(f"WAL allocation: not writing: {exc}")
            return False
        try:
            end = os.fstat(fd).st_size
            if end >= self.wal_bytes:
                return False
            os.pwrite(fd, bytes(min(ALLOCATE_STEP, self.wal_bytes - end)), end)
            os.fdatasync(fd)
            return True
        finally:
            os.close(fd)

    def _warn_once(self, message: str) -> None:
        """A WARNING, unless it is the one given last: a full disk or a planted file would
        otherwise be logged every second until a step succeeds again."""
        if self._failing != message:
            log.warning("%s", message)
            self._failing = message

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
