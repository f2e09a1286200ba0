"""The health message: built from the sealed status only, valid by docs/health.schema.json,
and published retained on a real mosquitto by the real daemon (on start, on change, offline
by last will after SIGKILL and by the daemon itself after SIGTERM)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from controller.rules.cards import parse_card
from controller.service.control.client import ControlClient
from controller.service.telemetry.health import health_message, offline_message, what_changed
from controller.table.inputs import Button, CardScan, Supervisor
from controller.table.machine import MachineSettings, TableMachine
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    BURNS,
    FLIP,
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    edited_config,
    open_shoe,
    start_daemon,
    start_round,
    stop_daemon,
    wait_status,
)
from support.health_helpers import HealthSubscriber, health_validator
from support.sealing import Leaks
from support.waiting import wait_until

DEALT = ("8D", "KD", "QS", "JH")  # the round's burn and first hands: sealed

DELIVERY = {"file": {"delivered_seq": 3, "backlog": 2, "oldest_age_s": 1.5, "state": "running",
                     "last_error": None, "last_delivered_at": None}}


def machine_with_open_betting() -> tuple[TableMachine, dict]:
    machine = TableMachine(MachineSettings(table_id="T1", betting_seconds=60))
    t = 1.0
    for inp in [Button(t, "new_shoe"), *(CardScan(t, parse_card(c)) for c in (FLIP, *BURNS)),
                Button(t, "start_round"), *(CardScan(t, parse_card(c)) for c in DEALT)]:
        machine.handle(inp)
    return machine, machine.status()


def test_health_of_a_table_with_betting_open_is_valid_and_sealed() -> None:
    machine, status = machine_with_open_betting()
    assert status["betting_open"] and status["cards_dealt"] == len(DEALT)
    message = health_message(status, DELIVERY, {"bytes": 4096, "records": 12},
                             {"version": "0.1.0"})
    health_validator().validate(message)
    assert message["state"] == status["state"] and message["round"] == 1
    assert message["backlog"] == {"events": 2, "oldest_undelivered_age_s": 1.5,
                                  "transports": {"file": {"backlog": 2, "state": "running"}}}
    assert message["clock_sync"] == "unknown" and message["last_fault"] is None
    leaks = Leaks()
    for card in DEALT:
        leaks.add_card(card)
    leaks.check("health", message)
    # a pause while betting is open: the fault's code, never its words or evidence
    machine.handle(Supervisor(2.0, "pause"))
    paused = health_message(machine.status(), DELIVERY, {"bytes": 1, "records": 1})
    health_validator().validate(paused)
    assert paused["paused"] is True and paused["last_fault"]
    leaks.check("health", paused)


def test_clock_sync_is_read_from_the_status_when_it_has_it() -> None:
    _, status = machine_with_open_betting()
    message = health_message(dict(status, clock_sync={"state": "synchronized", "offset_s": 0.01}),
                             {}, {"bytes": 0, "records": 0})
    assert message["clock_sync"] == {"state": "synchronized", "offset_s": 0.01}
    health_validator().validate(message)


def test_offline_messages_and_what_counts_as_a_change() -> None:
    validator = health_validator()
    will = offline_message("T1", "connection lost", {"version": "0.1.0"})
    validator.validate(will)
    assert "time" not in will
    validator.validate(offline_message("T1", "shutdown", now=1_700_000_000.0))
    _, status = machine_with_open_betting()
    first = health_message(status, DELIVERY, {"bytes": 1, "records": 1}, now=1.0)
    older = dict(DELIVERY, file=dict(DELIVERY["file"], oldest_age_s=9.0))
    later = health_message(status, older, {"bytes": 1, "records": 1}, now=2.0)
    assert what_changed(first) == what_changed(later)  # time and age move on their own
    # every card moves the counts: not a change (the heartbeat carries them) ...
    more = health_message(status, {"file": dict(DELIVERY["file"], backlog=3)},
                          {"bytes": 9000, "records": 40})
    assert what_changed(first) == what_changed(more)
    # ... but a backlog appearing or clearing, or a transport's state, is
    cleared = health_message(status, {"file": dict(DELIVERY["file"], backlog=0)},
                             {"bytes": 1, "records": 1})
    failing = health_message(status, {"file": dict(DELIVERY["file"], state="retrying")},
                             {"bytes": 1, "records": 1})
    assert what_changed(first) != what_changed(cleared)
    assert what_changed(first) != what_changed(failing)
    with pytest.raises(Exception, match="offline"):
        validator.validate(dict(first, state="offline"))


class Recorded:
    """A health publisher that keeps what it was given (the MQTT one is tested below)."""

    def __init__(self) -> None:
        self.messages: list[dict] = []

    def publish(self, message: dict) -> None:
        self.messages.append(message)

    def close(self, offline: dict) -> None:
        self.messages.append(offline)


def test_a_burst_of_status_changes_is_one_health_message_after_it_settles() -> None:
    from controller.service.clock.table_clock import TableClock
    from controller.service.status_board import StatusBoard
    from controller.service.telemetry.health_reporter import HealthReporter
    from controller.service.telemetry.notify import Notifier

    board = StatusBoard(TableClock(), Notifier({}))
    board.publish({"table": "T1", "state": "ready", "paused": False})
    published = Recorded()
    reporter = HealthReporter("T1", board, published, delivery=lambda: DELIVERY,
                              journal=lambda: {"bytes": 1, "records": 1},
                              software={"version": "0.1.0"}, settle_s=0.3)
    reporter.start()
    try:
        wait_until(lambda: len(published.messages) == 1, 5, "the first health message")
        for n in range(20):  # a burst of cards: each changes the status
            board.publish({"table": "T1", "state": "dealing", "paused": False, "cards": n})
        board.publish({"table": "T1", "state": "betting_closed", "paused": False})
        wait_until(lambda: len(published.messages) == 2, 5, "the burst's health message")
        time.sleep(0.5)
        assert [m["state"] for m in published.messages] == ["ready", "betting_closed"]
    finally:
        reporter.stop()


def mqtt_config(config: Path, port: int) -> None:
    with edited_config(config) as data:
        data["transports"]["mqtt"] = {"host": "127.0.0.1", "port": port, "reconnect_min_s": 0.1,
                                      "reconnect_max_s": 0.5, "keepalive": 5}


@pytest.mark.slow
@pytest.mark.mosquitto
def test_the_daemon_publishes_its_health_retained(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty], mosquitto) -> None:
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=600)
    mqtt_config(config, mosquitto.port)
    notify = NotifyListener(short_dir / "notify")
    sock = str(short_dir / "control.sock")
    client = ControlClient(sock)
    validator = health_validator()
    watching = HealthSubscriber(mosquitto.port)
    proc = start_daemon(config, notify.path, short_dir / "daemon.log")
    leaks = Leaks()
    try:
        notify.wait_for("READY", "1")
        first = watching.wait_for(lambda m: m["state"] == "no_shoe")
        validator.validate(first)
        assert first["table"] == "T1" and first["software"]["version"]
        # a subscriber that comes later gets it retained
        late = HealthSubscriber(mosquitto.port)
        assert late.wait_for(lambda m: m["state"] == "no_shoe")
        assert late.messages[0][1] is True
        late.close()

        panel.wait_connected()
        wait_status(client, lambda s: s["devices"].get("shoe") is True)
        open_shoe(client, panel, shoe)
        start_round(client, panel)
        sealed_from = len(watching.messages)
        for card in DEALT:
            leaks.add_card(card)
            shoe.send_card(card)
        wait_status(client, lambda s: s["cards_dealt"] == len(DEALT))
        assert cli("supervisor", "--socket", sock, "pause").returncode == 0
        paused = watching.wait_for(lambda m: m["paused"] is True)
        validator.validate(paused)
        assert paused["state"] == "betting" and paused["round"] == 1
        assert paused["last_fault"] and paused["journal"]["records"] > 0
        assert paused["journal"]["bytes"] > 0 and paused["devices"]["shoe"] is True
        assert client.status()["betting_open"]
        for text in watching.texts[sealed_from:]:
            leaks.check("health topic", text)

        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        gone = watching.wait_for(lambda m: m["state"] == "offline", timeout=20)
        assert gone["reason"] == "connection lost"
        validator.validate(gone)

        # again, and an orderly stop says so itself
        proc = start_daemon(config, notify.path, short_dir / "daemon.log")
        back = watching.wait_for(lambda m: m["state"] != "offline")
        assert back["paused"] is True
        assert stop_daemon(proc) == 0
        stopped = watching.wait_for(lambda m: m["state"] == "offline")
        assert stopped["reason"] == "shutdown" and stopped["time"]
        validator.validate(stopped)
        for message in watching.messages:
            validator.validate(message[0])
    finally:
        stop_daemon(proc, signal.SIGKILL)
        watching.close()
        notify.close()
    assert "Traceback" not in (short_dir / "daemon.log").read_text()
