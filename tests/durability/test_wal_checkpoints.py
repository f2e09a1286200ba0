"""WAL checkpoints off the table loop: the journal's commits leave the WAL alone, the
checkpoint thread copies it into the database once it passes its size, and a restarting WAL
is cut back to that size."""

from __future__ import annotations

import os
import sqlite3
import time

from controller.durability.journal import Journal
from controller.durability.wal_checkpoints import WalCheckpointer
from support.journal_helpers import fill
from support.waiting import wait_until

WAL_BYTES = 256 * 1024


def wal_size(journal: Journal) -> int:
    return os.stat(f"{journal.path}-wal").st_size


def test_the_journal_commits_without_checkpointing_and_the_thread_does_it(tmp_path):
    with Journal(tmp_path / "journal.db") as journal:
        journal.leave_checkpoints_to_background(WAL_BYTES)
        fill(journal, 1500)  # well past SQLite's own 1,000-page checkpoint
        grown = wal_size(journal)
        assert grown > 2 * 1000 * 4096  # past twice SQLite's threshold: the commits did not
        checkpointer = WalCheckpointer(journal.path, wal_bytes=WAL_BYTES,
                                       check_every_s=0.05).start()
        try:
            assert wait_until(lambda: checkpointer.checkpoints >= 1, 10, "a checkpoint")
            fill(journal, 5)  # the next commit restarts the WAL and truncates it
            assert wal_size(journal) <= WAL_BYTES
        finally:
            checkpointer.stop()
        written = journal.last_event_seq()
        assert journal.verify().ok
    conn = sqlite3.connect(tmp_path / "journal.db")
    assert conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0] == written
    conn.close()


def test_a_quiet_journal_is_checkpointed_after_the_idle_interval(tmp_path):
    with Journal(tmp_path / "journal.db") as journal:
        journal.leave_checkpoints_to_background(WAL_BYTES)
        checkpointer = WalCheckpointer(journal.path, wal_bytes=WAL_BYTES, check_every_s=0.05,
                                       idle_s=0.2).start()
        try:
            time.sleep(0.5)
            assert checkpointer.checkpoints == 0  # nothing written since it started
            fill(journal, 3)
            assert wait_until(lambda: checkpointer.checkpoints >= 1, 10, "an idle checkpoint")
        finally:
            checkpointer.stop()
