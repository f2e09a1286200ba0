"""Another writer holding a journal's write lock, for the tests and the bench of write_lock.py.

A thread of this process (``HoldingThread``) or a whole other process (``HoldingProcess``)
takes the lock, holds it for the seconds asked, commits and says when, on ``time.monotonic()``
(CLOCK_MONOTONIC: one clock for every process on Linux).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from controller.durability.journal import connect
from controller.durability.write_lock import write_transaction

#: for each line "S" on its stdin: takes the lock, says "held", holds it S seconds, commits
#: and prints the time of its commit
_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
for line in sys.stdin:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("UPDATE head SET records = records")
    print("held", flush=True)
    time.sleep(float(line))
    conn.execute("COMMIT")
    print(time.monotonic(), flush=True)
"""


class HoldingProcess:
    """Another process writing to the journal at ``path``, one ``hold()`` at a time."""

    def __init__(self, path: Path):
        self._proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)], text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def hold(self, seconds: float) -> None:
        """Returns once the other process holds the lock; it lets go after ``seconds``."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(f"{seconds}\n")
        self._proc.stdin.flush()
        assert self._proc.stdout.readline().strip() == "held"

    def committed(self) -> float:
        """When the last ``hold()`` committed (waits for it)."""
        assert self._proc.stdout is not None
        return float(self._proc.stdout.readline())

    def close(self) -> None:
        self._proc.kill()
        self._proc.wait()


class HoldingThread:
    """A thread of this process in a write transaction on its own connection to ``path`` for
    ``seconds`` (taking ``lock`` first, when given); started holding SQLite's lock."""

    def __init__(self, path: Path, seconds: float, lock: threading.Lock | None = None):
        self.committed = 0.0
        self._held = threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(path, seconds, lock))
        self._thread.start()
        assert self._held.wait(10), "the holding thread never got the lock"

    def _hold(self, path: Path, seconds: float, lock: threading.Lock | None) -> None:
        conn = connect(path, check_same_thread=False)
        try:
            with write_transaction(conn, lock=lock):
                conn.execute("UPDATE head SET records = records")
                self._held.set()
                time.sleep(seconds)
            self.committed = time.monotonic()
        finally:
            conn.close()

    def join(self) -> None:
        self._thread.join()
