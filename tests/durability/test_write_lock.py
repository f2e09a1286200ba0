"""Write transactions on the journal (write_lock.py): writers of one process take turns on the
process's lock and never meet SQLite's busy handler; against another process's transaction,
``begin`` waits about as long as that transaction lasts and gives up after its timeout."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from controller.durability.journal import Journal, connect
from controller.durability.write_lock import begin, write_transaction, writer_lock
from testkit.journal_lock import HoldingProcess, HoldingThread


@pytest.fixture
def journal_path(tmp_path: Path) -> Path:
    path = tmp_path / "journal.sqlite"
    Journal(path).close()
    return path


def test_writers_of_one_process_take_turns_on_its_lock(journal_path: Path) -> None:
    # timeout_s=0: the second writer's BEGIN must succeed at its first try, which it can only
    # do if it waited on the process's lock while the first one held SQLite's
    first = HoldingThread(journal_path, 0.2, writer_lock(journal_path))
    conn = connect(journal_path, busy_timeout_ms=0)
    try:
        began = time.monotonic()
        with write_transaction(conn, lock=writer_lock(journal_path), timeout_s=0):
            conn.execute("INSERT INTO meta(key, value) VALUES ('second', 'writer')")
        assert time.monotonic() - began >= 0.1  # it waited for the first writer
        assert conn.execute("SELECT value FROM meta WHERE key='second'").fetchone() == (
            "writer",)
    finally:
        first.join()
        conn.close()


def test_without_the_lock_the_second_writer_meets_the_first(journal_path: Path) -> None:
    # the same two writers without the process's lock: SQLite says the journal is locked
    first = HoldingThread(journal_path, 0.2)
    conn = connect(journal_path, busy_timeout_ms=0)
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            with write_transaction(conn, timeout_s=0):
                conn.execute("INSERT INTO meta(key, value) VALUES ('second', 'writer')")
        assert not conn.in_transaction
    finally:
        first.join()
        conn.close()


def test_one_lock_per_journal_file_however_it_is_named(journal_path: Path,
                                                       tmp_path: Path) -> None:
    link = tmp_path / "link.sqlite"
    link.symlink_to(journal_path)
    other = tmp_path / "other.sqlite"
    assert writer_lock(link) is writer_lock(journal_path)
    assert writer_lock(str(journal_path)) is writer_lock(journal_path)
    assert writer_lock(other) is not writer_lock(journal_path)
    assert Journal(journal_path).writer_lock is writer_lock(link)


def test_another_process_s_lock_is_waited_for_until_the_timeout(journal_path: Path) -> None:
    holder = HoldingProcess(journal_path)
    holder.hold(3.0)
    conn = connect(journal_path, busy_timeout_ms=0)
    try:
        began = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            begin(conn, timeout_s=0.3)
        assert time.monotonic() - began >= 0.3
        assert not conn.in_transaction
        assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()  # reads go on
    finally:
        holder.close()
        conn.close()


def test_the_wait_ends_soon_after_the_other_process_commits(journal_path: Path) -> None:
    # 335 ms: SQLite's busy handler, sleeping 100 ms at a time by then, would try again only
    # at 428 ms, ~90 ms after the commit; begin tries every 5 ms at that point
    holder = HoldingProcess(journal_path)
    holder.hold(0.335)
    conn = connect(journal_path, busy_timeout_ms=0)
    try:
        with write_transaction(conn):
            got_it = time.monotonic()
            conn.execute("INSERT INTO meta(key, value) VALUES ('after', 'holder')")
        committed = holder.committed()
        assert 0 <= got_it - committed < 0.06, f"{(got_it - committed) * 1000:.1f} ms late"
    finally:
        holder.close()
        conn.close()


def test_a_failed_block_is_rolled_back_and_leaves_the_lock_free(journal_path: Path) -> None:
    lock = writer_lock(journal_path)
    conn = connect(journal_path)
    try:
        with pytest.raises(RuntimeError):
            with write_transaction(conn, lock=lock):
                conn.execute("INSERT INTO meta(key, value) VALUES ('lost', 'row')")
                raise RuntimeError("the block failed")
        assert not conn.in_transaction and not lock.locked()
        assert conn.execute("SELECT 1 FROM meta WHERE key='lost'").fetchone() is None
    finally:
        conn.close()

