"""The daemon as a real subprocess: simulated shoe on a pty, line panel on a pty, a real
NOTIFY_SOCKET, the control socket, SIGTERM, restart and recovery."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from controller.commands.status import status_text
from controller.durability.archives.archive import archive_dir_for, verify_with_archives
from controller.durability.journal import verify_file
from controller.service.control.client import ControlClient
from controller.table.events import validate_event
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    edited_config,
    start_daemon,
    stop_daemon,
    wait_status,
)

SEALED_CARDS = ("KD", "QS")  # dealt while betting is open: must appear nowhere


@pytest.mark.slow
def test_daemon_lifecycle(short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=2)
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    sock = str(short_dir / "control.sock")
    client = ControlClient(sock)
    proc = start_daemon(config, notify.path, log, WATCHDOG_USEC="400000")
    try:
        ready = notify.wait_for("READY", "1")[0]
        assert "no_shoe" in ready.get("STATUS", "")
        notify.wait_for("WATCHDOG", "1", count=3, timeout=5)  # every 0.2 s from the loop
        panel.wait_connected()

        status = json.loads(cli("status", "--json", "--socket", sock).stdout)
        assert status["table"] == "T1" and status["state"] == "no_shoe"
        assert "file" in status["backend"]
        text = cli("status", "--config", str(config))
        assert text.returncode == 0 and "table T1" in text.stdout and "state no_shoe" in text.stdout

        panel.send("new_shoe")
        wait_status(client, lambda s: s["state"] == "awaiting_flip")
        shoe.send_card("5H")
        wait_status(client, lambda s: s["state"] == "burning" and s["burn_remaining"] == 5)
        for card in ("2C", "3C", "4C", "6C", "7C"):
            shoe.send_card(card)
        wait_status(client, lambda s: s["state"] == "ready")
        notify.wait_for("STATUS", "ready; shoe 1; 410 cards left")

        # Supervisor actions are answered once the table loop handled them.
        paused = cli("supervisor", "--socket", sock, "pause")
        assert paused.returncode == 0 and "paused" in paused.stdout, paused.stderr
        assert client.status()["paused"] is True
        resumed = cli("supervisor", "--socket", sock, "resume")
        assert resumed.returncode == 0 and "resumed" in resumed.stdout
        again = cli("supervisor", "--socket", sock, "resume")
        assert again.returncode == 1 and again.stderr.startswith("refused: ")
        bad_card = cli("supervisor", "--socket", sock, "enter-card", "ZZ")
        assert bad_card.returncode == 1 and "not a card code" in bad_card.stderr
        assert "ZZ" not in bad_card.stderr  # what the supervisor typed is never echoed
        no_card = cli("supervisor", "--socket", sock, "enter-card")
        assert no_card.returncode == 2

        panel.send("start_round")
        wait_status(client, lambda s: s["state"] == "betting" and s["betting_open"])
        shoe.send_card("8D")  # the round's burn card
        for card in SEALED_CARDS:
            shoe.send_card(card)
        during = wait_status(client, lambda s: s["cards_dealt"] == 3)
        assert during["next_target"] == "P3" and during["betting_open"]
        view = cli("watch", "--once", "--socket", sock)
        assert "deal card 3 of 12: Player 3" in view.stdout and "betting closes in" in view.stdout
        # The loop's own timer closes betting; no input needed.
        after = wait_status(client, lambda s: not s["betting_open"], timeout=10)
        assert after["state"] == "dealing"

        rc = stop_daemon(proc, signal.SIGTERM)
        assert rc == 0
        notify.wait_for("STOPPING", "1")
    finally:
        stop_daemon(proc, signal.SIGKILL)  # a no-op when it already stopped
        notify.close()

    log_text = log.read_text()
    lines = [json.loads(line) for line in log_text.splitlines() if line.startswith("{")]
    assert any(line.get("event") == "stopped" for line in lines)
    dealt = [line for line in lines if line.get("event") == "card_dealt"]
    assert dealt and all(line["table"] == "T1" and line["shoe"] == 1 and line["round"] == 1
                         for line in dealt)
    events_text = (short_dir / "events.jsonl").read_text()
    for card in SEALED_CARDS:  # sealed: betting closed, but no hand was revealed yet
        assert f'"{card}"' not in log_text and f'"{card}"' not in events_text
    assert verify_file(short_dir / "state" / "journal.sqlite").ok


def assert_recovered(notify: NotifyListener, client: ControlClient, before: dict,
                     keys: tuple[str, ...]) -> None:
    """The restarted daemon is READY with the status it had before the stop."""
    notify.wait_for("READY", "1", count=2)
    after = client.status()
    for key in keys:
        assert after[key] == before[key], key


@pytest.mark.slow
def test_daemon_restart_recovers_and_stops_on_sigint(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=30)
    client = ControlClient(str(short_dir / "control.sock"))
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    try:
        proc = start_daemon(config, notify.path, log)
        notify.wait_for("READY", "1")
        panel.wait_connected()
        panel.send("new_shoe")
        wait_status(client, lambda s: s["state"] == "awaiting_flip")
        shoe.send_card("AH")
        shoe.send_card("2D")
        wait_status(client, lambda s: s["state"] == "ready")
        panel.send("start_round")
        wait_status(client, lambda s: s["state"] == "betting")
        shoe.send_card("3D")
        before = wait_status(client, lambda s: s["cards_dealt"] == 1)
        assert stop_daemon(proc, signal.SIGINT) == 0

        proc = start_daemon(config, notify.path, log)
        assert_recovered(notify, client, before,
                         ("state", "shoe", "round", "seq", "cards_drawn", "next_target"))
        panel.wait_connected(count=2)
        shoe.send_card("4D")  # the restarted daemon carries on with the same round
        wait_status(client, lambda s: s["cards_dealt"] == 2 and s["next_target"] == "P2")
        assert stop_daemon(proc) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)  # a no-op when it already stopped
        notify.close()
    events = [json.loads(line) for line in (short_dir / "events.jsonl").read_text().splitlines()]
    by_seq = {event["seq"]: event for event in events}  # delivery is at least once
    assert sorted(by_seq) == list(range(1, max(by_seq) + 1))
    for event in by_seq.values():
        validate_event(event)
        assert event["id"] == f"T1:{event['seq']}"


@pytest.mark.parametrize("option", ["group", "supervisor_group"])
def test_daemon_refuses_a_missing_control_group(short_dir: Path, option: str) -> None:
    config = daemon_config(short_dir, short_dir / "shoe", "/dev/null", **{option: "no-such-grp"})
    result = cli("run", "--config", str(config))
    assert result.returncode == 78
    assert f"control.{option}: no group named 'no-such-grp'" in result.stdout + result.stderr


def open_shoe(shoe: ShoeSimulator, panel: LinePanelPty, client: ControlClient,
              number: int) -> dict:
    panel.send("new_shoe")
    wait_status(client, lambda s: s["state"] == "awaiting_flip" and s["shoe"] == number)
    shoe.send_card("2H")  # flip a 2: burn two
    shoe.send_card("3C")
    shoe.send_card("4C")
    return wait_status(client, lambda s: s["state"] == "ready" and s["shoe"] == number)


@pytest.mark.slow
def test_the_daemon_archives_an_ended_shoe_and_plays_on(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    """retention_days 0: a shoe that ends is archived on the side thread, the table plays on
    with the seq continuing, verify holds across archives, a restart recovers."""
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    with edited_config(config) as data:
        data["journal"] = {"retention_days": 0}
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
        assert_recovered(notify, client, before, ("state", "shoe", "seq", "cards_drawn",
                                                  "cards_left"))
        panel.wait_connected(count=2)
        panel.send("end_shoe")
        wait_status(client, lambda s: s["state"] == "no_shoe"
                    and s["journal_archive"]["archived_records"] > 0)
        assert stop_daemon(proc) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)  # a no-op when it already stopped
        notify.close()

    result = verify_with_archives(journal)
    assert result.ok, result.describe()
    assert len(list(archive_dir_for(journal).glob("records-*.jsonl.gz"))) == 2
    events = [json.loads(line) for line in (short_dir / "events.jsonl").read_text().splitlines()]
    by_seq = {event["seq"]: event for event in events}  # delivery is at least once
    assert sorted(by_seq) == list(range(1, len(by_seq) + 1)) and result.events == len(by_seq)
    assert [e["shoe"] for e in by_seq.values() if e["type"] == "shoe_ended"] == [1, 2]
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    done = [line for line in lines if line.get("event") == "journal archived"]
    assert [line["shoes"] for line in done] == [[1], [2]]
    assert all(line["records"] > 0 and line["file"].endswith(".jsonl.gz") for line in done)
