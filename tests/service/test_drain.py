"""Draining for an upgrade, through the real control socket of a real daemon: the open round
finishes, the dealer's next start_round is refused ("draining: safe to stop"), `supervisor
drain --wait` says when it is safe to stop, the drain survives a restart (it is journaled)
until `supervisor resume`; and a SIGTERM mid-round loses nothing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from controller.durability.journal import verify_file
from controller.service.control.client import ControlClient
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    cli,
    daemon_config,
    open_shoe,
    start_daemon,
    start_round,
    stop_daemon,
    wait_status,
)
from support.waiting import wait_until

ROUND = ("8D", "KD", "QS", "JH", "9C", "2D", "3H", "4S", "5C", "6D", "7H", "8S", "TC")


def events_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
def test_drain_finishes_the_round_refuses_the_next_and_survives_a_restart(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=2)
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    sock = str(short_dir / "control.sock")
    client = ControlClient(sock)
    events_file = short_dir / "events.jsonl"
    proc = start_daemon(config, notify.path, log)
    waiter: subprocess.Popen | None = None
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        wait_status(client, lambda s: s["devices"].get("shoe") is True)
        open_shoe(client, panel, shoe)
        start_round(client, panel)
        for card in ROUND[:3]:
            shoe.send_card(card)
        wait_status(client, lambda s: s["cards_dealt"] == 3)

        # drain mid-round: the command waits, saying what it waits for
        waiter = subprocess.Popen(
            [sys.executable, "-m", "controller", "supervisor", "--socket", sock, "drain",
             "--wait", "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        status = wait_status(client, lambda s: s["draining"])
        assert status["drained"] is False and status["round"] == 1
        assert waiter.poll() is None  # the round is still open
        # the round plays on to its result
        for card in ROUND[3:]:
            shoe.send_card(card)
        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 0, err
        assert "draining: waiting for round 1 of shoe 1" in out
        assert out.strip().endswith("drained: safe to stop")
        status = client.status()
        assert status["drained"] and status["round"] is None
        assert status["prompt"] == "draining: safe to stop"
        assert any(e["type"] == "round_result" for e in events_of(events_file))
        notify.wait_for("STATUS", None)
        assert any("drained: safe to stop" in m.get("STATUS", "") for m in notify.messages)
        assert "dealer: draining: safe to stop" in cli("status", "--socket", sock).stdout

        # the dealer's next start is refused with the reason, and nothing starts
        panel.send("start_round")
        wait_until(lambda: any(e["type"] == "input_rejected" and e["data"]["code"] == "draining"
                               for e in events_of(events_file)), 10, "the refusal")
        assert client.status()["round"] is None
        again = cli("supervisor", "--socket", sock, "drain")
        assert again.returncode == 1 and "already draining" in again.stderr
        assert stop_daemon(proc) == 0

        # the drain is journaled: the upgraded daemon starts drained
        proc = start_daemon(config, notify.path, log)
        notify.wait_for("READY", "1", count=2)
        status = wait_status(client, lambda s: s["state"] == "ready")
        assert status["draining"] and status["drained"]
        released = cli("supervisor", "--socket", sock, "--json", "resume")
        assert released.returncode == 0 and json.loads(released.stdout)["events"] == [
            "drain_ended"]
        status = client.status()
        assert not status["draining"] and status["prompt"] != "draining: safe to stop"
        panel.send("start_round")
        wait_status(client, lambda s: s["round"] == 2 and s["betting_open"])

        # a SIGTERM mid-round: the restarted daemon has the round as it was
        for card in ROUND[:3]:
            shoe.send_card(card)
        wait_status(client, lambda s: s["cards_dealt"] == 3)
        before = client.status()
        assert stop_daemon(proc, signal.SIGTERM) == 0
        proc = start_daemon(config, notify.path, log)
        notify.wait_for("READY", "1", count=3)
        after = wait_status(client, lambda s: s["round"] == 2)
        assert after["cards_dealt"] == 3 and after["seq"] >= before["seq"]
        assert after["shoe"] == before["shoe"] and after["cards_drawn"] == before["cards_drawn"]
        assert stop_daemon(proc) == 0
    finally:
        if waiter is not None and waiter.poll() is None:
            waiter.kill()
        stop_daemon(proc, signal.SIGKILL)
        notify.close()
    assert verify_file(short_dir / "state" / "journal.sqlite").ok
    types = [e["type"] for e in events_of(events_file)]
    assert types.count("drain_started") == 1 and types.count("drain_ended") == 1
    started = next(e for e in events_of(events_file) if e["type"] == "drain_started")
    assert started["data"]["round_open"] is True and started["round"] == 1
    assert started["data"]["by"]["uid"] >= 0


def test_wait_goes_with_drain_only(short_dir: Path) -> None:
    result = cli("supervisor", "--socket", str(short_dir / "none.sock"), "pause", "--wait")
    assert result.returncode == 2 and "--wait goes with drain only" in result.stderr
