"""The daemon's retention thread: errors are logged and shown, runs wait for delivery and
never overlap. (The real daemon archiving a shoe: tests/service/test_daemon.py.)"""

from __future__ import annotations

from pathlib import Path

from controller.commands.status import status_text
from controller.durability.archives.retention import JournalRetention, RetentionSettings
from controller.table.machine import MachineSettings


def test_an_archive_error_is_logged_and_shown_not_raised(tmp_path: Path) -> None:
    retention = JournalRetention(tmp_path / "missing.sqlite", RetentionSettings(retention_days=0),
                                 MachineSettings(table_id="T1"))
    retention.run_once()
    status = retention.status()
    assert status["runs"] == 1 and not status["running"] and status["last_result"] is None
    assert "ArchiveError" in status["last_error"] and "no such journal file" in status["last_error"]
    assert any(line.startswith("journal archive: FAILED: ArchiveError")
               for line in status_text({"journal_archive": status}))


def test_runs_after_a_shoe_end_wait_for_delivery_and_never_overlap(tmp_path: Path) -> None:
    """The thread: one run at start, one per shoe end (after delivery), none at once."""
    import threading
    import time

    from support.waiting import wait_until

    delivered = threading.Event()
    running = 0
    overlaps = []
    runs = []

    class Probe(JournalRetention):
        def run_once(self) -> None:
            nonlocal running
            running += 1
            overlaps.append(running > 1)
            runs.append(delivered.is_set())
            time.sleep(0.05)
            running -= 1

    asked: list[int] = []  # the seqs the thread waited on delivery for, once per wait

    def wait_delivered(seq: int, timeout: float) -> bool:
        asked.append(seq)
        return delivered.wait(timeout)

    probe = Probe(tmp_path / "j.sqlite", RetentionSettings(), MachineSettings(table_id="T1"),
                  wait_delivered=wait_delivered)
    probe.start()
    try:
        wait_until(lambda: len(runs) >= 1 and running == 0, 5, "the start-up run")
        probe.shoe_ended(10)
        probe.shoe_ended(12)  # coalesces with the first: one run after delivery
        wait_until(lambda: asked, 5, "the thread to wait for delivery")
        assert runs == [False]  # not archived yet: the shoe is not delivered
        delivered.set()
        wait_until(lambda: len(runs) >= 2 and running == 0, 5, "the run after delivery")
    finally:
        probe.stop()
    assert runs == [False, True] and not any(overlaps)


def test_the_first_run_waits_for_the_full_check_which_leaves_the_mark(tmp_path: Path) -> None:
    """Two walks of the whole journal never run at once: retention's first run waits for the
    check after READY, and starts from the verified mark that check left at the head."""
    import threading
    import time

    from controller.durability.chain_check import load_mark
    from controller.durability.journal import Journal, connect
    from controller.service.trust.journal_check import JournalCheck
    from controller.table.inputs import DeviceStatus
    from support.waiting import wait_until

    path = tmp_path / "j.sqlite"
    with Journal(path) as journal:
        for at in (1.0, 2.0):
            journal.append(DeviceStatus(at=at, name="panel", connected=True), [])
        chain = journal.chain
    finished = threading.Event()
    runs: list[bool] = []

    class Probe(JournalRetention):
        def run_once(self) -> None:
            runs.append(finished.is_set())

    probe = Probe(path, RetentionSettings(), MachineSettings(table_id="T1"),
                  start_after=finished)
    probe.start()
    try:
        time.sleep(0.7)
        assert runs == []  # still waiting for the check
        check = JournalCheck(path, finished=finished)
        check.start()
        check.join(30)
        assert check.status()["state"] == "ok"
        wait_until(lambda: runs, 5, "the first retention run")
    finally:
        probe.stop()
    assert runs == [True]
    conn = connect(path)
    try:
        mark, why = load_mark(conn, chain)
    finally:
        conn.close()
    assert mark is not None and mark.records == 2, why


def test_after_the_full_check_failed_no_run_moves_the_mark_and_status_says_why(
        tmp_path: Path) -> None:
    """A record edited behind the verified mark: the full check finds it; the retention run
    after it walks only from the mark, where the chain still holds, so it would have moved
    the mark on over the edit. It leaves the mark where it was, and says why."""
    import sqlite3
    import threading

    from controller.durability.chain_check import load_mark
    from controller.durability.journal import Journal, connect
    from controller.service.trust.journal_check import JournalCheck
    from controller.table.inputs import DeviceStatus

    path = tmp_path / "j.sqlite"

    def append(times: range) -> None:
        with Journal(path) as journal:
            for at in times:
                journal.append(DeviceStatus(at=float(at), name="panel", connected=at % 2 == 0),
                               [])

    def stored_mark() -> int | None:
        with Journal(path) as journal:
            chain = journal.chain
        conn = connect(path)
        try:
            mark, _why = load_mark(conn, chain)
        finally:
            conn.close()
        return None if mark is None else mark.records

    append(range(1, 6))
    first = JournalCheck(path)
    first.start()
    first.join(30)
    assert first.status()["state"] == "ok" and stored_mark() == 5  # the mark at the head
    append(range(6, 9))  # journaled since: records 6..8
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET written = written + 1 WHERE n = 2")  # behind the mark
    conn.commit()
    conn.close()

    finished = threading.Event()
    check = JournalCheck(path, finished=finished)
    retention = JournalRetention(path, RetentionSettings(retention_days=0),
                                 MachineSettings(table_id="T1"), start_after=finished,
                                 check_failure=check.failure)
    check.start()
    check.join(30)
    assert check.status() == {**check.status(), "state": "failed",
                              "reason": "record 2: hash does not match the record's contents"}
    retention.run_once()  # as the thread does once `finished` is set

    assert stored_mark() == 5  # not moved over the edited record
    status = retention.status()
    assert status["runs"] == 1 and status["last_result"] is None
    assert "the full journal check failed (record 2: hash does not match" in \
        status["last_error"]
    lines = status_text({"journal_archive": status, "journal_check": check.status()})
    assert "journal check: FAILED: record 2: hash does not match the record's contents" in lines
    assert any(line.startswith("journal archive: FAILED: ArchiveError: not run: the full "
                               "journal check failed (record 2") for line in lines), lines
