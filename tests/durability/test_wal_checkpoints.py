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


#: a WAL allocated past what the tests' commits write (each commit ~25 KB of frames)
ALLOCATED = 1024 * 1024


def test_the_wal_is_kept_allocated_so_a_commit_never_grows_the_file(tmp_path):
    with Journal(tmp_path / "journal.db") as journal:
        journal.leave_checkpoints_to_background(ALLOCATED)
        checkpointer = WalCheckpointer(journal.path, wal_bytes=ALLOCATED,
                                       check_every_s=0.05).start()
        try:
            assert wait_until(lambda: wal_size(journal) == ALLOCATED, 10, "the WAL allocated")
            fill(journal, 10)  # about 60 frames (~250 KB): inside the allocated file
            assert wal_size(journal) == ALLOCATED
            # a TRUNCATE checkpoint (the archive's vacuum) cuts it to nothing: allocated again
            other = sqlite3.connect(journal.path)
            other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            other.close()
            assert wal_size(journal) == 0
            assert wait_until(lambda: wal_size(journal) == ALLOCATED, 10, "allocated again")
            written = fill(journal, 10)
        finally:
            checkpointer.stop()
        assert journal.verify().ok
        last = written[-1]["seq"]
    conn = sqlite3.connect(tmp_path / "journal.db")
    assert conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0] == last
    conn.close()


CRASHING_WRITER = """
import os, sys, time
sys.path[:0] = {paths!r}
from controller.durability.journal import Journal
from controller.durability.wal_checkpoints import WalCheckpointer
from support.journal_helpers import fill
journal = Journal({path!r})
journal.leave_checkpoints_to_background({wal_bytes})
checkpointer = WalCheckpointer(journal.path, wal_bytes={wal_bytes}, check_every_s=0.05).start()
while os.stat({path!r} + "-wal").st_size < {wal_bytes}:
    time.sleep(0.02)
written = fill(journal, 10)
print(written[-1]["seq"], flush=True)
os._exit(0)  # as a power cut leaves it: no checkpoint, no close, the WAL and its zeros stay
"""


def test_a_journal_cut_off_with_its_wal_allocated_recovers_every_commit(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    path = str(tmp_path / "journal.db")
    tests = str(Path(__file__).resolve().parents[1])
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", CRASHING_WRITER.format(
        paths=[root, tests], path=path, wal_bytes=ALLOCATED)],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    last = int(done.stdout.split()[-1])
    assert os.stat(f"{path}-wal").st_size == ALLOCATED
    os.unlink(f"{path}-shm")  # no wal-index to trust: SQLite recovers from the WAL's frames
    with Journal(path) as journal:
        assert journal.last_event_seq() == last
        assert journal.verify().ok
