"""A backend's resend request while betting is open, against a real daemon and broker: the
table resends only what it had already published, so nothing sealed leaves the table on the
resend path either (events, log lines)."""

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
    daemon_config,
    edited_config,
    open_shoe,
    start_daemon,
    start_round,
    stop_daemon,
    wait_status,
)
from support.sealing import Leaks
from support.waiting import wait_until
from testkit.backends import Mosquitto, MqttReceiver

pytestmark = pytest.mark.mosquitto

FLIP, BURNS = "3H", ("2S", "2C", "2D")
SEALED = ("KD", "QS", "9C")  # dealt while betting is open


def logged_since(log: Path, offset: int) -> str:
    """What the daemon wrote to ``log`` after its first ``offset`` bytes."""
    return log.read_bytes()[offset:].decode()


@pytest.mark.slow
def test_a_resend_during_open_betting_sends_nothing_new(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty],
        mosquitto: Mosquitto) -> None:
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=600)
    with edited_config(config) as data:
        data["transports"]["mqtt"] = {"host": "127.0.0.1", "port": mosquitto.port, "protocol": "5",
                                      "backoff_initial_s": 0.05, "backoff_max_s": 0.3}
    receiver = MqttReceiver(mosquitto.port, "T1")
    receiver.connect()
    wait_until(lambda: receiver.sessions, 5, "the receiver to connect")
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    client = ControlClient(str(short_dir / "control.sock"))
    proc = start_daemon(config, notify.path, log)
    leaks = Leaks()
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        open_shoe(client, panel, shoe, (FLIP, *BURNS))
        start_round(client, panel)
        for card in SEALED:
            leaks.add_card(card)
            shoe.send_card(card)
        published = wait_status(client, lambda s: s["cards_dealt"] == len(SEALED)
                                and s["backend"]["mqtt"]["backlog"] == 0)
        horizon = published["backend"]["mqtt"]["delivered_seq"]
        wait_until(lambda: len(receiver.stored) == horizon, 10, "the published events")
        log_from = len(log.read_bytes())
        before = len(receiver.payloads)

        for ask in (horizon + 1, 1):  # past the horizon: nothing; from the start: all of it
            receiver.client.publish(receiver.resend_topic, json.dumps({"from_seq": ask}),
                                    qos=1).wait_for_publish(2)
            # Served after log_from: the receiver asks by itself on connect, and an ask
            # within the rate limit of that would be merged with the next one.
            wait_until(lambda a=ask: f"resend from seq {a} asked" in logged_since(log, log_from)
                       or f"resending seq {a}-" in logged_since(log, log_from), 15,
                       f"resend {ask} served")
        wait_until(lambda: len(receiver.payloads) == before + horizon, 15, "the resend")
        during = client.status()
        assert during["betting_open"] and during["cards_dealt"] == len(SEALED)
        assert stop_daemon(proc, signal.SIGTERM) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)
        notify.close()
        receiver.close()

    resent = [json.loads(p) for p in receiver.payloads[before:]]
    assert [e["seq"] for e in resent] == list(range(1, horizon + 1))  # nothing past it
    assert resent == receiver.stored[:horizon]  # the same events, again
    found = [f for payload in receiver.payloads
             for f in leaks.found_in("an MQTT event (resent or not)", payload.decode())]
    log_lines = logged_since(log, log_from).splitlines()
    found += [f for line in log_lines if line.startswith("{")
              and json.loads(line).get("level") not in ("debug",)
              for f in leaks.found_in("a daemon log line during the resend", line)]
    assert not found, found
    assert any("nothing to resend" in line for line in log_lines)
