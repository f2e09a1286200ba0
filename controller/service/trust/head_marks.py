"""The head file written off the owner loop, at every round's end and shoe's end.

Start-up refuses a journal that ends before its head file (``durability/head_file.py``): the
more often the file moves, the less of a lost journal tail (a cut WAL, a restored copy) goes
unseen. At every round's end it costs a temporary file, two fsyncs and a rename: milliseconds
on a busy disk, which the owner loop must not spend between a card and the next. So the owner
takes the mark (where the journal stands: numbers it keeps in memory, all committed) and this
thread writes it. Marks handed over faster than they are written are skipped for the newest,
which says more; a mark is never ahead of the journal, whose commit came first.
"""

from __future__ import annotations

import threading
import time

import structlog

from controller.durability.head_file import HeadMark, head_path, mark_of, write_head
from controller.durability.journal import Journal

log = structlog.get_logger("pokdeng.journal")


class HeadMarks:
    def __init__(self, journal: Journal):
        self._path = head_path(journal.path)
        self._chain = journal.chain
        self._changed = threading.Condition()
        self._next: HeadMark | None = None
        self._stopping = False
        self.written = 0
        self._thread = threading.Thread(target=self._main, name="head-file", daemon=True)

    def start(self) -> HeadMarks:
        self._thread.start()
        return self

    def mark(self, journal: Journal) -> None:
        """Where ``journal`` stands now, to be written (the owner thread; never waits)."""
        mark = mark_of(journal, time.time())
        with self._changed:
            self._next = mark
            self._changed.notify()

    def stop(self, timeout: float = 5.0) -> None:
        """Write the mark still waiting, then stop."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _main(self) -> None:
        while True:
            with self._changed:
                while self._next is None and not self._stopping:
                    self._changed.wait()
                mark, self._next = self._next, None
                if mark is None:
                    return  # stopping, nothing left to write
            try:
                write_head(self._path, mark, self._chain)
                self.written += 1
            except OSError as exc:
                # The journal is intact; only the check at the next start is weaker.
                log.error("cannot write the journal head file", file=str(self._path),
                          error=str(exc))
