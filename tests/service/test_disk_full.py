"""Disk safety on a really full (and a read-only) file system, with the real daemon.

The daemon's state directory (its journal) is a tmpfs of 8 MiB (not less: SQLite's WAL grows
by a few 4 KiB pages per journaled input until its 1000-page auto-checkpoint, so a journal
needs ~4 MiB of headroom to keep running once space is back). The test plays a round with a
simulated shoe on a pty and a line panel on a pty, fills the file system with a ballast file
and keeps dealing until the journal cannot be written. Then: the daemon is still up, says the
journal is unwritable and how many inputs it holds, the table is stopped, and no event of a
held input reached the backend. Deleting the ballast lets the daemon journal the
``journal_unwritable`` pause and then the held inputs, in order; the supervisor resumes and
the round is played to its result.

A read-only remount is not tested: Linux refuses ``mount -o remount,ro`` (EBUSY) while the
daemon holds the journal open for writing, which is also why a live table only meets it when
the kernel forces it after I/O errors; the daemon takes any write error the same way.
Needs root (mount); skipped with the reason otherwise. CI runs as root.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.service.control.client import ControlClient
from drivers.sim.shoe import ShoeSimulator, shuffled_shoe
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    start_daemon,
    stop_daemon,
    wait_status,
)

TMPFS_SIZE = "8m"


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    mount_point = tmp_path / "state"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0755",
                           "tmpfs", str(mount_point)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(directory: Path) -> Path:
    """Fill the file system with a ballast file until it refuses another byte."""
    ballast = directory / "ballast"
    with open(ballast, "wb", buffering=0) as f:
        chunk = b"\0" * 4096
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0")
        except OSError:
            pass
    return ballast


def sink_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Table:
    """Deals the shoe's cards in order as the daemon asks for them."""

    def __init__(self, shoe: ShoeSimulator, client: ControlClient, seed: int):
        self.shoe = shoe
        self.client = client
        self.cards = [c.code for c in shuffled_shoe(seed, 8)]

    def status(self) -> dict[str, Any]:
        return self.client.status()

    def deal_one(self) -> dict[str, Any]:
        drawn = self.status()["cards_drawn"]
        self.shoe.send_card(self.cards[drawn])
        return wait_status(self.client, lambda s: s["cards_drawn"] == drawn + 1
                           or s.get("storage_fault") or s.get("paused"))

    def deal_until(self, predicate) -> dict[str, Any]:
        for _ in range(60):
            status = self.status()
            if predicate(status):
                return status
            self.deal_one()
        raise AssertionError(f"never reached; last status {self.status()}")


@pytest.mark.slow
def test_a_full_journal_holds_inputs_and_the_table_carries_on(
        tmp_path: Path, small_fs: Path) -> None:
    shoe_link = tmp_path / "shoe.pty"
    panel = LinePanelPty()
    shoe = ShoeSimulator(shoe_link, "beetek", decks=8, seed=3).start()
    config = daemon_config(tmp_path, shoe_link, panel.path, betting_seconds=1)
    text = config.read_text().replace(str(tmp_path / "state"), str(small_fs))
    # the WAL is kept allocated as a reserve the journal writes into on a full disk: 64 KiB
    # here (a few inputs), not the 4 MiB default (hundreds), so the dealing below meets the
    # full disk within the round
    config.write_text(text + "journal:\n  wal_kib: 64\n")
    events_path = tmp_path / "events.jsonl"
    notify = NotifyListener(tmp_path / "notify.sock")
    proc = start_daemon(config, notify.path, tmp_path / "daemon.log")
    client = ControlClient(str(tmp_path / "control.sock"))
    table = Table(shoe, client, seed=3)
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        panel.send("new_shoe")
        wait_status(client, lambda s: s["state"] == "awaiting_flip")
        table.deal_until(lambda s: s["state"] == "ready")
        panel.send("start_round")
        wait_status(client, lambda s: s["state"] == "betting")
        table.deal_one()

        # -- disk full --------------------------------------------------------------------
        ballast = fill(small_fs)
        status = table.deal_until(lambda s: s.get("storage_fault"))
        assert proc.poll() is None, "the daemon must stay up on a full disk"
        journaled_seq = status["seq"]
        for _ in range(3):  # cards physically drawn while the journal cannot be written
            shoe.send_card(table.cards[status["cards_drawn"]])
            status["cards_drawn"] += 1
        status = wait_status(client, lambda s: s.get("held_inputs", 0) >= 4)
        assert status["journal"] == "unwritable" and "full" in status["storage_fault"]
        assert status["paused"] is True
        assert status["fault"]["code"] == "journal_unwritable"
        notify.wait_for("STATUS", None)
        assert any("STORAGE FAULT" in m.get("STATUS", "") and "inputs held" in m["STATUS"]
                   for m in notify.messages)
        shown = cli("status", "--socket", str(tmp_path / "control.sock"))
        assert "STORAGE FAULT" in shown.stdout, shown.stdout
        assert f"{status['held_inputs']} inputs held" in shown.stdout, shown.stdout
        time.sleep(0.5)
        # Nothing unjournaled left the table: the sink has no event past the journal's end.
        assert max(e["seq"] for e in sink_events(events_path)) <= journaled_seq
        held = status["held_inputs"]

        # -- space again: the pause is journaled, then the held inputs in order -------------
        ballast.unlink()
        status = wait_status(client, lambda s: s.get("journal") == "ok"
                             and s["held_inputs"] == 0, timeout=20)
        assert status["paused"] is True and status["storage_fault"] is None
        wait_status(client, lambda s: s["backend"]["file"]["backlog"] == 0)
        events = [e for e in sink_events(events_path) if e["seq"] > journaled_seq]
        pauses = [e["data"]["code"] for e in events if e["type"] == "paused"]
        assert pauses[0] == "journal_unwritable", pauses
        assert pauses.count("card_while_paused") == held, pauses  # every held card, in order
        assert not [e for e in events if e["type"] in ("card_dealt", "round_result")]

        answer = cli("supervisor", "--socket", str(tmp_path / "control.sock"), "resume")
        assert answer.returncode == 0, answer.stdout + answer.stderr
        status = table.deal_until(lambda s: s["state"] in ("ready", "no_shoe")
                                  or s.get("next_target") is None)
        status = wait_status(client, lambda s: s["state"] == "ready", timeout=10)
        assert status["rounds_played"] == 1

    finally:
        exit_status = stop_daemon(proc)
        shoe.close(drain_timeout=0.2)
        panel.close()
        notify.close()
    assert exit_status == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    verify = cli("journal", "verify", str(small_fs / "journal.sqlite"))
    assert verify.returncode == 0, verify.stdout + verify.stderr
