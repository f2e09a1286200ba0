"""A real daemon against a real webhook that answers 404, 401, 500 and too slowly while the
table deals: delivery never stops, the table records the outage and the recovery, and the
backend ends with every event in order, repeated only by id, without a restart."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from controller.service.control.client import ControlClient
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
from support.waiting import wait_until
from testkit.backends import WebhookBackend

ROUND_CARDS = ("9S", "AS", "5H", "5D", "JC", "QD", "TH", "KS", "4C", "6C", "2H", "7D", "8H")


def play_round(shoe: ShoeSimulator, panel: LinePanelPty, client: ControlClient) -> None:
    before = client.status()["rounds_played"]
    panel.send("start_round")
    wait_status(client, lambda s: s["state"] == "betting")
    for card in ROUND_CARDS:
        shoe.send_card(card)
    wait_status(client, lambda s: s["rounds_played"] == before + 1, timeout=20)


def http_state(client: ControlClient) -> dict:
    return client.status()["backend"]["http"]


@pytest.mark.slow
def test_delivery_survives_404_401_500_and_slow_replies_without_a_restart(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty],
        webhook: WebhookBackend, webhook_secret: Path) -> None:
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=1)
    with edited_config(config) as data:
        data["transports"]["http"] = {
            "url": webhook.url, "secret_file": str(webhook_secret), "allow_insecure": True,
            "timeout_s": 0.5, "backoff_initial_s": 0.05, "backoff_max_s": 0.3,
            "unreachable_after_s": 1.0}
    notify = NotifyListener(short_dir / "notify")
    sock = str(short_dir / "control.sock")
    client = ControlClient(sock)
    proc = start_daemon(config, notify.path, short_dir / "daemon.log")
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        panel.send("new_shoe")
        wait_status(client, lambda s: s["state"] == "awaiting_flip")
        shoe.send_card("2H")
        for card in ("3C", "4C"):
            shoe.send_card(card)
        wait_status(client, lambda s: s["state"] == "ready")
        wait_status(client, lambda s: s["backend"]["http"]["backlog"] == 0)

        webhook.always = 404  # the finding: one 404 used to stop this transport for good
        play_round(shoe, panel, client)
        refused = wait_status(client, lambda s: s["backend"]["http"]["state"] == "refused")
        assert "404 Not Found" in refused["backend"]["http"]["last_error"]
        down = wait_status(client, lambda s: "http" in s["backends_unreachable"])
        assert "404" in down["backends_unreachable"]["http"]
        assert down["paused"] is False  # the table deals on
        notify.wait_for("STATUS", timeout=5)
        assert wait_until(lambda: any("BACKEND UNREACHABLE: http" in m.get("STATUS", "")
                                      for m in notify.messages), 5, "the STATUS= line")
        assert "BACKEND UNREACHABLE: http" in cli("watch", "--once", "--socket", sock).stdout
        text = cli("status", "--socket", sock).stdout
        assert "BACKEND UNREACHABLE: http: failing for 1s: POST" in text

        webhook.always = 401
        wait_status(client, lambda s: "check the secret" in
                    (s["backend"]["http"]["last_error"] or ""))
        webhook.always = 500
        wait_status(client, lambda s: s["backend"]["http"]["state"] == "retrying"
                    and "500" in (s["backend"]["http"]["last_error"] or ""))
        play_round(shoe, panel, client)
        # slower than timeout_s: the backend stores the batch, the table gives up and resends
        webhook.stall_s, webhook.always = 1.0, "stall"
        assert wait_until(lambda: webhook.repeats() > 0, 15, "a slow reply's batch again")
        webhook.always = None
        up = wait_status(client, lambda s: not s["backends_unreachable"]
                         and s["backend"]["http"]["backlog"] == 0, timeout=20)
        assert up["backend"]["http"]["state"] == "ok"
        assert up["backend"]["http"]["last_error"] is None  # cleared on recovery
        assert up["backend"]["http"]["last_error_at"] is not None
        assert "last error at " in cli("status", "--socket", sock).stdout
        play_round(shoe, panel, client)
        final = wait_status(client, lambda s: s["backend"]["http"]["backlog"] == 0
                            and s["backend"]["file"]["backlog"] == 0)
        assert stop_daemon(proc, signal.SIGTERM) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)
        notify.close()

    record = [json.loads(line) for line in (short_dir / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in record] == list(range(1, final["seq"] + 1))
    # every event once in its first-seen order, which is seq order; repeats only by id
    assert webhook.unique_ids() == [e["id"] for e in record]
    assert webhook.conflicts == [] and webhook.bad_signatures == 0
    assert webhook.repeats() > 0
    outage = [e for e in record if e["type"].startswith("backend_")]
    assert [(e["type"], e["data"]["transport"]) for e in outage] == [
        ("backend_unreachable", "http"), ("backend_restored", "http")]
    assert "404 Not Found" in outage[0]["data"]["reason"]
    assert sum(1 for e in record if e["type"] == "round_result") == 3
