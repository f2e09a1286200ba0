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
