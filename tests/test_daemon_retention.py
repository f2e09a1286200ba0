"""Journal retention in the real daemon: a shoe that ends is archived on a side thread, the
table plays on with the seq continuing, verify holds across archives, a restart recovers."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from controller.archive import archive_dir_for, verify_with_archives
from controller.commands.status import status_text
from controller.control import ControlClient
from controller.machine import MachineSettings
from controller.retention import JournalRetention, RetentionSettings
from drivers.sim_shoe import ShoeSimulator
from daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    start_daemon,
    stop_daemon,
    wait_status,
)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pdt-", dir="/tmp"))  # Unix socket paths are short
    yield path
    shutil.rmtree(path, ignore_errors=True)


def open_shoe(shoe: ShoeSimulator, panel: LinePanelPty, client: ControlClient,
              number: int) -> dict:
    panel.send("new_shoe")
    wait_status(client, lambda s: s["state"] == "awaiting_flip" and s["shoe"] == number)
    shoe.send_card("2H")  # flip a 2: burn two
    shoe.send_card("3C")
    shoe.send_card("4C")
    return wait_status(client, lambda s: s["state"] == "ready" and s["shoe"] == number)


def test_the_daemon_archives_an_ended_shoe_and_plays_on(short_dir: Path) -> None:
    shoe = ShoeSimulator(short_dir / "shoe", "beetek")
    shoe.start()
    panel = LinePanelPty()
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    data = yaml.safe_load(config.read_text())
    data["journal"] = {"retention_days": 0}
    config.write_text(yaml.safe_dump(data))
    journal = short_dir / "state" / "journal.sqlite"
    client = ControlClient(str(short_dir / "control.sock"))
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    proc = start_daemon(config, notify.path, log)
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        # the start-up run finds nothing to archive and says why
        first = wait_status(client, lambda s: s["journal_archive"]["runs"] >= 1)
        assert first["journal_archive"]["last_result"] == \
            "nothing archived: no closed shoe in the live journal"
        open_shoe(shoe, panel, client, 1)
        panel.send("end_shoe")
        archived = wait_status(client, lambda s: s["journal_archive"]["archived_records"] > 0)
        shoe1_end = archived["seq"]
        assert archived["journal_archive"]["last_error"] is None
        assert f"events 1-{shoe1_end}, shoe(s) 1)" in archived["journal_archive"]["last_result"]
        assert any("journal archive: archived records 1-" in line
                   for line in status_text(archived))
        assert len(list(archive_dir_for(journal).glob("records-*.jsonl.gz"))) == 1

        # the table plays on: shoe 2, the seq carrying on from the archived shoe
        second = open_shoe(shoe, panel, client, 2)
        assert second["seq"] > shoe1_end
        before = client.status()
        assert stop_daemon(proc) == 0

        check = cli("journal", "verify", str(journal))
        assert check.returncode == 0 and "1 archive(s)" in check.stdout, check.stderr

        # a restart recovers from the checkpoint at the cut plus the live records
        proc = start_daemon(config, notify.path, log)
        notify.wait_for("READY", "1", count=2)
        after = client.status()
        for key in ("state", "shoe", "seq", "cards_drawn", "cards_left"):
            assert after[key] == before[key], key
        panel.wait_connected(count=2)
        panel.send("end_shoe")
        wait_status(client, lambda s: s["state"] == "no_shoe"
                    and s["journal_archive"]["archived_records"] > 0)
        assert stop_daemon(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        notify.close()
        shoe.close(drain_timeout=0.2)
        panel.close()

    result = verify_with_archives(journal)
    assert result.ok, result.describe()
    assert len(list(archive_dir_for(journal).glob("records-*.jsonl.gz"))) == 2
    events = [json.loads(line) for line in (short_dir / "events.jsonl").read_text().splitlines()]
    seqs = sorted({event["seq"] for event in events})
    assert seqs == list(range(1, seqs[-1] + 1)) and result.events == seqs[-1]
    assert [e["shoe"] for e in events if e["type"] == "shoe_ended"] == [1, 2]
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    done = [line for line in lines if line.get("event") == "journal archived"]
    assert [line["shoes"] for line in done] == [[1], [2]]
    assert all(line["records"] > 0 and line["file"].endswith(".jsonl.gz") for line in done)


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

    probe = Probe(tmp_path / "j.sqlite", RetentionSettings(), MachineSettings(table_id="T1"),
                  wait_delivered=lambda seq, timeout: delivered.wait(timeout))
    probe.start()
    try:
        deadline = time.monotonic() + 5
        while len(runs) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        probe.shoe_ended(10)
        probe.shoe_ended(12)  # coalesces with the first: one run after delivery
        time.sleep(0.3)
        assert runs == [False]  # not archived yet: the shoe is not delivered
        delivered.set()
        while len(runs) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)
    finally:
        probe.stop()
    assert runs == [False, True] and not any(overlaps)
