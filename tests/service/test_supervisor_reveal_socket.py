"""Supervisor ``reveal`` over the real control socket of a real daemon: a button-reveal table
loses its panel after the round's cards are dealt; the supervisor reveals the hands, each
action answered, journaled with who took it, and refused (naming the state) where the panel's
reveal would be refused."""

from __future__ import annotations

import json
import os
import pwd
import signal
import sqlite3
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
    open_shoe,
    start_daemon,
    start_round,
    stop_daemon,
    wait_status,
)

SETUP = ("3H", "2S", "2C", "2D")  # flip 3H orders three burns
ROUND = ("9S", "AS", "5H", "5D", "JC", "QD", "TH", "KS", "4C", "6C", "2H", "7D", "8H")


@pytest.mark.slow
def test_supervisor_reveals_the_hands_of_a_table_that_lost_its_panel(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=1)
    with edited_config(config) as data:
        data["table"]["reveal"] = "button"
    sock = str(short_dir / "control.sock")
    client = ControlClient(sock)
    notify = NotifyListener(short_dir / "notify")
    proc = start_daemon(config, notify.path, short_dir / "daemon.log")
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        wait_status(client, lambda s: s["devices"].get("shoe") is True)
        early = cli("supervisor", "--socket", sock, "reveal")
        assert early.returncode == 1
        assert early.stderr.startswith("refused: nothing to reveal yet: ")
        open_shoe(client, panel, shoe, SETUP)
        start_round(client, panel)
        for card in ROUND:
            shoe.send_card(card)
        wait_status(client, lambda s: s["state"] == "revealing", timeout=20)
        panel.close()  # the panel is gone: no REVEAL button any more
        wait_status(client, lambda s: s["devices"].get("panel") is False)

        assert cli("supervisor", "--socket", sock, "pause").returncode == 0
        paused = cli("supervisor", "--socket", sock, "reveal")
        assert paused.returncode == 1 and "while the table is paused" in paused.stderr
        assert cli("supervisor", "--socket", sock, "resume").returncode == 0
        answers = [cli("supervisor", "--socket", sock, "--json", "reveal") for _ in range(6)]
        replies = [json.loads(a.stdout) for a in answers]
        assert all(r["ok"] for r in replies), replies
        assert replies[0]["events"] == ["hand_revealed"]
        assert replies[-1]["events"] == ["hand_revealed", "round_result"]
        status = wait_status(client, lambda s: s["state"] == "ready")
        assert status["rounds_played"] == 1
        assert [a["action"] for a in status["last_actions"]][-1] == "reveal"
    finally:
        stop_daemon(proc, signal.SIGTERM)
        notify.close()

    me = pwd.getpwuid(os.getuid()).pw_name
    with sqlite3.connect(short_dir / "state" / "journal.sqlite") as journal:
        bodies = [json.loads(b) for (b,) in journal.execute("SELECT body FROM records")]
    reveals = [b for b in bodies if b.get("kind") == "supervisor" and b["action"] == "reveal"]
    assert len(reveals) == 8  # the early refusal, the paused refusal and six reveals
    assert all(r["by"] == {"user": me, "uid": os.getuid()} for r in reveals)
    revealed = [b for b in bodies if b.get("type") == "hand_revealed"]
    assert len(revealed) == 6 and all(e["data"]["by"]["uid"] == os.getuid() for e in revealed)
