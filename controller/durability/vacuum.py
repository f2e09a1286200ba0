"""Giving the space of archived records back to the file system, a little at a time.

SQLite keeps the pages of deleted rows in the file for reuse: without this the live journal
stays as large as it ever was (478 MB after 30 days without archiving stays 478 MB). A journal
with ``auto_vacuum=INCREMENTAL`` (every journal created since, ``journal.py``) moves its free
pages to the end and truncates them with ``PRAGMA incremental_vacuum(N)``; each call here is
its own short write transaction of ``STEP_PAGES`` pages, so the owner loop's appends never wait
long. SQLite makes each step atomic: a crash in the middle of one leaves the file as before it.

An older journal (``auto_vacuum=NONE``) can only be switched by a whole ``VACUUM``, which
rewrites the file under an exclusive lock: never while the daemon runs. ``compact`` does it,
for ``pokdeng-table journal compact`` with the table stopped; until then the freed pages are
reused by new records, so such a file stops growing once retention runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from controller.durability.idle_child import writing_at_normal_priority

#: pages per step (4 KiB pages: 2 MiB), one short write transaction each
STEP_PAGES = 512
INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL


def incremental(conn: sqlite3.Connection) -> bool:
    return int(conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == INCREMENTAL


def free_pages(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA freelist_count").fetchone()[0])


def release_free_pages(conn: sqlite3.Connection, step_pages: int = STEP_PAGES,
                       between_steps: Callable[[], None] | None = None) -> int:
    """Truncate the file's free pages, ``step_pages`` per write transaction (``between_steps``
    is called after each); returns the pages released (0 on a journal that is not
    incremental). ``conn`` must not be in a transaction."""
    if not incremental(conn):
        return 0
    released = 0
    while True:
        before = free_pages(conn)
        if before == 0:
            return released
        # executescript steps the pragma to its end (execute() would free a single page)
        with writing_at_normal_priority():  # each step is a write transaction of its own
            conn.executescript(f"PRAGMA incremental_vacuum({int(step_pages)});")
        after = free_pages(conn)
        if after >= before:
            return released  # nothing moved (a reader holds the pages): the next run goes on
        released += before - after
        if between_steps is not None:
            between_steps()


class JournalInUse(Exception):
    """Another process has the journal open (the daemon?): it cannot be rewritten now."""


def hold_exclusively(conn: sqlite3.Connection, path: Path) -> None:
    """Take the journal on ``conn`` for this process alone (SQLite's exclusive locking mode,
    kept until ``conn`` closes); JournalInUse at once when another process has it open."""
    conn.execute("PRAGMA busy_timeout=0")
    conn.execute("PRAGMA locking_mode=EXCLUSIVE")
    try:
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("COMMIT")
    except sqlite3.OperationalError:
        raise JournalInUse(f"{path}: the journal is open in another process (is the table "
                           "running? stop it first)") from None


def compact(path: str | Path) -> tuple[int, int]:
    """Rewrite a journal nobody else has open: ``VACUUM``, switching it to incremental
    auto-vacuum. Returns its size before and after (bytes); JournalInUse when another
    connection has it open (a VACUUM would hold the daemon's appends for its whole length)."""
    from controller.durability.journal import JournalError, connect
    from controller.regular_file import refuse_unless_regular_or_absent

    path = Path(path)
    before = path.stat().st_size
    for companion in (f"{path}-wal", f"{path}-shm"):
        # SQLite fails on a FIFO or device there with a bare "disk I/O error"
        refuse_unless_regular_or_absent(companion)
    conn = connect(path)
    try:
        hold_exclusively(conn, path)
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"{path}: not compacted: {exc}") from None
    finally:
        conn.close()
    return before, path.stat().st_size
