"""The real daemon answers a late backend from its journal and its archives: with a keyed
journal and retention_days 0, shoe 1 is archived when it ends; a backend that connects
afterwards without a session asks from seq 1 (docs/backend.md's receiver) and gets every
event, in order, the very bytes an early backend got the first time."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from controller.durability.archives.archive import archive_dir_for
from controller.service.control.client import ControlClient
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    daemon_config,
    edited_config,
    start_daemon,
    stop_daemon,
    wait_status,
)
from support.waiting import wait_until
from testkit.backends import Mosquitto, MqttReceiver

pytestmark = pytest.mark.mosquitto


def open_shoe(shoe: ShoeSimulator, panel: LinePanelPty, client: ControlClient,
              number: int) -> None:
    panel.send("new_shoe")
    wait_status(client, lambda s: s["state"] == "awaiting_flip" and s["shoe"] == number)
    for card in ("2H", "3C", "4C"):  # flip a 2: burn two
        shoe.send_card(card)
    wait_status(client, lambda s: s["state"] == "ready" and s["shoe"] == number)


@pytest.mark.slow
def test_a_late_backend_gets_the_archived_shoe_from_the_daemon(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty],
        mosquitto: Mosquitto) -> None:
    shoe, panel = devices
    key_file = short_dir / "journal.key"
    key_file.write_text("0123456789abcdef0123456789abcdef\n")
    key_file.chmod(0o600)
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    with edited_config(config) as data:
        data["journal"] = {"retention_days": 0, "key_file": str(key_file)}
        data["transports"]["mqtt"] = {"host": "127.0.0.1", "port": mosquitto.port, "protocol": "5",
                                      "backoff_initial_s": 0.05, "backoff_max_s": 0.3}
    early = MqttReceiver(mosquitto.port, "T1", client_id="backend-early")
    late = MqttReceiver(mosquitto.port, "T1", client_id="backend-late")
    early.connect()
    wait_until(lambda: early.sessions, 5, "the early backend to connect")
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    client = ControlClient(str(short_dir / "control.sock"))
    proc = start_daemon(config, notify.path, log)
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        open_shoe(shoe, panel, client, 1)
        panel.send("end_shoe")
        wait_status(client, lambda s: s["journal_archive"]["archived_records"] > 0)
        open_shoe(shoe, panel, client, 2)
        published = wait_status(client, lambda s: s["backend"]["mqtt"]["backlog"] == 0)
        horizon = published["backend"]["mqtt"]["delivered_seq"]
        wait_until(lambda: len(early.stored) == horizon, 10, "the first delivery")

        late.connect()  # no session: the receiver asks from seq 1
        wait_until(lambda: len(late.stored) == horizon, 20, "the late backend",
                   details=lambda: f"stored {len(late.stored)}, asked {late.asked}")
        assert stop_daemon(proc) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)  # a no-op when it already stopped
        notify.close()
        early.close()
        late.close()

    archives = list(archive_dir_for(short_dir / "state" / "journal.sqlite").glob("*.jsonl.gz"))
    assert len(archives) == 1
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert any("from the archives (checked)" in str(line.get("event")) for line in lines), \
        "the resend did not read the archive"
    assert late.asked == [1]
    assert [e["seq"] for e in late.stored] == list(range(1, horizon + 1))
    first_payloads = {json.loads(p)["id"]: p for p in reversed(early.payloads)}
    assert all(first_payloads[json.loads(p)["id"]] == p for p in late.payloads)
    assert all("anchor" in e for e in late.stored)  # a keyed chain anchors every event
