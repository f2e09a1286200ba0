"""A real daemon with its dealer display on a simulated shoe and panel, dealing whole rounds,
for the tests that attack its screen process: find that process, deal, and read back what the
backend was sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from controller.service.control.client import ControlClient
from drivers.sim.shoe import ShoeSimulator, shuffled_shoe
from support.daemon_helpers import (
    BURNS,
    FLIP,
    LinePanelPty,
    NotifyListener,
    daemon_config,
    start_daemon,
    stop_daemon,
    wait_status,
)
from support.display_helpers import free_port

#: the dealing order of a round's 12 hand cards (docs/rules.md §4), after its burn
SEATS = ("P1", "P2", "P3", "P4", "P5", "banker")
CHILD_MODULE = "controller.service.screens.child"
SUPPORT = Path(__file__).parent
#: how long a step of the table may take before a test fails: generous, as two cores shared
#: with other suites have taken 7 s for the start's journal check of a few records
WAIT_S = 90.0


def misbehaving_screen(how: str) -> list[str]:
    """The wrapper of a screen process gone wrong ``how`` (misbehaving_screen.py)."""
    return [sys.executable, str(SUPPORT / "misbehaving_screen.py"), how]


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that are still there (from /proc)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found  # it ended
    for task in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


class DealingTable:
    """One daemon (``run --config``, a process of its own) with its display on; ``deal_round``
    plays a whole round on the shoe and the panel."""

    def __init__(self, root: Path, betting_seconds: float = 1,
                 wrapper: list[str] | None = None, **env: str):
        self.root = root
        self.shoe = ShoeSimulator(root / "shoe", "beetek", heartbeat_seconds=3600).start()
        self.panel = LinePanelPty()
        self.port = free_port()
        self.config = daemon_config(root, root / "shoe", self.panel.path,
                                    betting_seconds=betting_seconds,
                                    display={"listen": f"127.0.0.1:{self.port}"})
        self.notify = NotifyListener(root / "notify")
        self.log = root / "daemon.log"
        if wrapper is None:
            self.proc = start_daemon(self.config, self.notify.path, self.log, **env)
        else:  # the daemon as run starts it, its screen process started through ``wrapper``
            self.proc = subprocess.Popen(
                [sys.executable, str(SUPPORT / "wrapped_daemon.py"), str(self.config),
                 *wrapper], stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
                env={**os.environ, "NOTIFY_SOCKET": str(self.notify.path), **env})
        self.client = ControlClient(str(root / "control.sock"))
        codes = [card.code for card in shuffled_shoe(7)]
        for used in (FLIP, *BURNS):
            codes.remove(used)
        self._cards: Iterator[str] = iter(codes)
        #: each dealt round's 13 cards as the shoe sent them (its burn first)
        self.rounds: list[list[str]] = []

    def ready(self) -> None:
        """At READY with the panel connected and a shoe open: the first round can start."""
        self.notify.wait_for("READY", "1", timeout=WAIT_S)
        self.panel.wait_connected(timeout=WAIT_S)
        self.panel.send("switch pause off")  # its answer to the daemon's status?
        wait_status(self.client, lambda s: s["devices"].get("shoe") is True
                    and s["devices"].get("panel") is True and s["switch"] == "run",
                    timeout=WAIT_S)
        self.panel.send("new_shoe")
        wait_status(self.client, lambda s: s["state"] == "awaiting_flip", timeout=WAIT_S)
        for card in (FLIP, *BURNS):
            self.shoe.send_card(card)
        wait_status(self.client, lambda s: s["state"] == "ready", timeout=WAIT_S)

    def deal_round(self) -> dict[str, Any]:
        """START ROUND, 13 cards while betting is open, and the round settled: the status."""
        self.panel.send("start_round")
        wait_status(self.client, lambda s: s["betting_open"], timeout=WAIT_S)
        cards = [next(self._cards) for _ in range(13)]
        for card in cards:
            self.shoe.send_card(card)
        self.rounds.append(cards)
        played = len(self.rounds)
        return wait_status(self.client, lambda s: s["state"] == "ready"
                           and s["rounds_played"] == played, timeout=WAIT_S)

    def screen_pid(self) -> int | None:
        """The screen process now running (the daemon's child running its module)."""
        for pid in children(self.proc.pid):
            if CHILD_MODULE in cmdline(pid):
                return pid
        return None

    def events(self) -> list[dict[str, Any]]:
        """What the file backend was sent so far."""
        path = self.root / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() \
            else []

    def delivered_rounds(self) -> list[list[str]]:
        """Each settled round's 12 hand cards in dealing order, as the backend was sent them
        (once it was sent every event the table has)."""
        last = self.client.status()["seq"]
        wait_status(self.client, lambda s: s["backend"]["file"]["delivered_seq"] >= last,
                    timeout=WAIT_S)
        dealt = []
        for event in self.events():
            if event["type"] == "round_result":
                hands = event["data"]["hands"]
                dealt.append([hands[seat]["cards"][i] for i in (0, 1) for seat in SEATS])
        return dealt

    def dealt_rounds(self) -> list[list[str]]:
        """Each round's 12 hand cards in the order the shoe sent them (the burn left out)."""
        return [cards[1:] for cards in self.rounds]

    def close(self) -> None:
        stop_daemon(self.proc)
        self.notify.close()
        self.shoe.close(drain_timeout=0.2)
        self.panel.close()


def short_root() -> Path:
    """A fresh directory with a short path (Unix socket paths are limited to 108 bytes)."""
    return Path(tempfile.mkdtemp(prefix="siege-", dir="/tmp"))
