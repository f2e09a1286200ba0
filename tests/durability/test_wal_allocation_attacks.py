"""The WAL kept allocated (wal_checkpoints.py) against a hostile state directory, a full disk
and another process holding the journal: real journals, real files, real processes."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from controller.durability.journal import Journal, connect
from controller.durability.wal_checkpoints import WAL_BYTES, WalCheckpointer
from support.journal_helpers import event, sample_inputs


def _journal_with_records(path: Path, count: int = 3) -> None:
    with Journal(path) as j:
        for i, inp in enumerate(sample_inputs(count)):
            j.append(inp, [event(i + 1)])


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "pokdeng.wal_checkpoints" and r.levelno >= logging.WARNING]


def test_a_wal_replaced_by_a_symlink_is_not_followed(tmp_path):
    """Someone who can write the state directory puts a link where the WAL was: the thread
    (root, in this run) must not write zeros into the file it points at."""
    path = tmp_path / "journal.db"
    _journal_with_records(path)
    victim = tmp_path / "elsewhere" / "victim.conf"
    victim.parent.mkdir()
    victim.write_bytes(b"keep me exactly as I am\n")
    journal = Journal(path)  # its connection holds the WAL open
    try:
        cp = WalCheckpointer(path)
        conn = connect(path)  # the thread's, opened when the daemon started
        wal = Path(f"{path}-wal")
        wal.rename(tmp_path / "moved-wal")
        wal.symlink_to(victim)
        try:
            cp._keep_allocated(conn)
        finally:
            conn.close()
        assert victim.read_bytes() == b"keep me exactly as I am\n"
        journal.append(sample_inputs(4)[3], [event(4)])  # the table goes on
    finally:
        journal.close()


def test_a_wal_replaced_by_a_fifo_does_not_hang_the_thread_holding_the_write_lock(tmp_path):
    """A FIFO where the WAL was: opening it for writing blocks until a reader comes, and the
    thread would wait there holding the process's writer lock and SQLite's, so no card is
    journaled again."""
    path = tmp_path / "journal.db"
    _journal_with_records(path)
    journal = Journal(path)
    cp = WalCheckpointer(path)
    conn = connect(path, check_same_thread=False)  # the thread's, opened at the daemon's start
    wal = Path(f"{path}-wal")
    wal.rename(tmp_path / "moved-wal")
    os.mkfifo(wal)
    worker = threading.Thread(target=cp._keep_allocated, args=(conn,), daemon=True)
    worker.start()
    worker.join(60)  # a hang guard, not a timing assertion
    hung = worker.is_alive()
    if hung:  # let the blocked open through so the thread and its lock can end
        cp._stop.set()
        fd = os.open(wal, os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(60)
    try:
        assert not hung, "the allocation thread blocked on a FIFO holding the write lock"
        journal.append(sample_inputs(4)[3], [event(4)])
    finally:
        conn.close()
        journal.close()


def test_a_wal_that_cannot_grow_is_warned_about_once_not_every_look(tmp_path):
    """A full disk (here: the file-size limit, EFBIG, a real error from the kernel) fails every
    step; the thread looks every second, and one WARNING a second fills the log of a table
    that is otherwise fine. Commits that fit go on."""
    path = tmp_path / "journal.db"
    _journal_with_records(path)
    script = textwrap.dedent(f"""
        import logging, resource, signal, sys
        sys.path.insert(0, {str(Path(__file__).parents[1])!r})
        from controller.durability.journal import Journal, connect
        from controller.durability.wal_checkpoints import WalCheckpointer
        from support.journal_helpers import event, sample_inputs
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024 * 1024, 1024 * 1024))
        path = {str(path)!r}
        journal = Journal(path)
        cp = WalCheckpointer(path)
        conn = connect(path)
        for _ in range(5):
            cp._keep_allocated(conn)
        journal.append(sample_inputs(4)[3], [event(4)])
        journal.close()
        conn.close()
        print("appended")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "appended" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1, done.stderr


def test_an_allocated_wal_is_left_alone_while_another_process_holds_the_journal(tmp_path,
                                                                                caplog):
    """With the WAL already at ``wal_bytes`` there is nothing to write: the thread must not
    queue for the write lock behind another process (an operator's archive, a housekeeping
    cut) every second, holding the process's writer lock, the table's cards behind it, for up
    to ten seconds and then warn."""
    path = tmp_path / "journal.db"
    _journal_with_records(path)
    journal = Journal(path)
    try:
        cp = WalCheckpointer(path)
        conn = connect(path)
        try:
            cp._keep_allocated(conn)
            assert os.stat(f"{path}-wal").st_size >= WAL_BYTES
            holder = subprocess.Popen(
                [sys.executable, "-c", textwrap.dedent(f"""
                    import sqlite3, sys
                    c = sqlite3.connect({str(path)!r}, isolation_level=None)
                    c.execute("BEGIN IMMEDIATE")
                    print("holding", flush=True)
                    sys.stdin.read()
                """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            try:
                assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
                with caplog.at_level(logging.WARNING, logger="pokdeng.wal_checkpoints"):
                    cp._keep_allocated(conn)
                assert _warnings(caplog) == []
            finally:
                holder.communicate("", timeout=60)
        finally:
            conn.close()
    finally:
        journal.close()
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT COUNT(*) FROM records").fetchone()[0] > 0


_WRITER = """
import sys
sys.path.insert(0, {tests!r})
from controller.durability.journal import Journal
from controller.durability.wal_checkpoints import WalCheckpointer
from support.journal_helpers import event, sample_inputs
journal = Journal({path!r})
journal.leave_checkpoints_to_background(4 * 1024 * 1024)
WalCheckpointer({path!r}, check_every_s=0.001, idle_s=0.0).start()
seq = journal.last_event_seq()
inputs = sample_inputs(100000)
i = 0
while True:
    seq += 1
    journal.append(inputs[i % len(inputs)], [event(seq)])
    print(seq, flush=True)
    i += 1
"""

_CUTTER = """
import sqlite3
c = sqlite3.connect({path!r}, isolation_level=None, timeout=10)
while True:
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
"""


def test_killed_while_allocating_and_cut_by_another_process_keeps_every_commit(tmp_path):
    """A daemon-like writer (commits, the checkpoint thread allocating at every look) beside
    another process cutting the WAL to nothing over and over (so allocation steps run all the
    time), killed at a moment of the scheduler's choosing; then the wal-index is deleted and the
    WAL's unsynced tail dropped, as a power cut might. Every acknowledged event is there and the
    chain holds."""
    import random
    import time

    from support.journal_helpers import wal_frames_end

    path = tmp_path / "journal.db"
    _journal_with_records(path, 1)
    tests = str(Path(__file__).parents[1])
    seed = int(os.environ.get("POKDENG_KILL_SEED", random.randrange(1 << 30)))
    print(f"POKDENG_KILL_SEED={seed}")
    rng = random.Random(seed)
    for _ in range(6):
        writer = subprocess.Popen([sys.executable, "-c", _WRITER.format(tests=tests,
                                                                         path=str(path))],
                                  stdout=subprocess.PIPE, text=True)
        cutter = subprocess.Popen([sys.executable, "-c", _CUTTER.format(path=str(path))])
        assert writer.stdout is not None
        acked = 0
        stop_after = rng.randint(5, 400)
        for line in writer.stdout:
            acked = int(line)
            if acked >= stop_after + 1:
                break
        time.sleep(rng.random() * 0.05)  # where the kill lands, not asserted on
        writer.kill()
        cutter.kill()
        writer.wait(60)
        cutter.wait(60)
        for line in writer.stdout:  # anything printed before the kill was acknowledged
            acked = int(line)
        writer.stdout.close()
        Path(f"{path}-shm").unlink(missing_ok=True)
        wal = Path(f"{path}-wal")
        if wal.exists():
            end = wal_frames_end(wal)
            size = wal.stat().st_size
            if size > end:  # the zeros past the frames were never synced by a commit
                os.truncate(wal, rng.randint(end, size))
        with Journal(path) as j:
            assert j.verify().ok
            assert j.last_event_seq() >= acked
            seqs = [ev["seq"] for e in j.entries() for ev in e.events]
            assert seqs == list(range(1, j.last_event_seq() + 1))


def test_a_backup_copy_with_its_zero_tailed_wal_verifies_and_exports_at_other_page_sizes(
        tmp_path):
    """Page sizes of 512 and 65536 bytes (frames of 536 and 65560), the WAL allocated, a
    checkpoint, the WAL restarting onto its old frames and the zeros, then the files copied
    while open (no wal-index, as a careless backup takes them): ``journal verify`` and
    ``export`` read every event from the copy, and a journal opened on it goes on."""
    for page_size in (512, 65536):
        d = tmp_path / f"ps{page_size}"
        d.mkdir()
        path = d / "journal.db"
        with sqlite3.connect(path) as c:
            c.execute(f"PRAGMA page_size={page_size}")
            c.execute("PRAGMA journal_mode=WAL")
        journal = Journal(path)
        journal.leave_checkpoints_to_background(WAL_BYTES)
        cp = WalCheckpointer(path)
        conn = connect(path)
        inputs = sample_inputs(40)
        try:
            for i, inp in enumerate(inputs[:20]):
                journal.append(inp, [event(i + 1)])
            cp._keep_allocated(conn)
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            for i, inp in enumerate(inputs[20:]):
                journal.append(inp, [event(i + 21)])
            cp._keep_allocated(conn)
            backup = d / "backup"
            backup.mkdir()
            for name in ("journal.db", "journal.db-wal"):
                (backup / name).write_bytes((d / name).read_bytes())
        finally:
            conn.close()
            journal.close()
        copy = backup / "journal.db"
        for action, expect in (("verify", "40 events"), ("export", None)):
            done = subprocess.run([sys.executable, "-m", "controller", "journal", action,
                                   str(copy)], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            if expect:
                assert expect in done.stdout
            else:
                assert len(done.stdout.splitlines()) == 40
        with Journal(copy) as j:  # the daemon's start on the copy: it goes on from event 40
            assert j.verify().ok and j.last_event_seq() == 40
            j.append(sample_inputs(41)[40], [event(41)])


def test_a_wal_hard_linked_to_another_file_is_not_written(tmp_path):
    """A second name of another file put where the WAL was (a hard link; no symlink to refuse):
    the thread, root in this run, leaves that file as it was."""
    path = tmp_path / "journal.db"
    _journal_with_records(path)
    victim = tmp_path / "victim.conf"
    victim.write_bytes(b"keep me\n")
    journal = Journal(path)
    try:
        cp = WalCheckpointer(path)
        conn = connect(path)
        try:
            wal = Path(f"{path}-wal")
            wal.rename(tmp_path / "moved-wal")
            os.link(victim, wal)
            cp._keep_allocated(conn)
        finally:
            conn.close()
        assert victim.read_bytes() == b"keep me\n"
    finally:
        journal.close()
