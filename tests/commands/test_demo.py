"""The demo end to end as a real subprocess: events valid, results right, resumable after a kill."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.durability.journal import Journal, verify_file
from controller.rules.hands import evaluate_hand, round_result_data
from controller.service.trust.journal_key import read_key_file
from controller.table.events import validate_event
from drivers.sim.shoe import shuffled_shoe
from support.waiting import wait_until


def demo(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", "demo", *args],
                          capture_output=True, text=True, timeout=timeout)


def demo_key(state: Path) -> bytes:
    """The key the demo made for its journal's chain."""
    return read_key_file(state / "journal.key")


def read_events(path: Path) -> list[dict[str, Any]]:
    """The backend's view: delivery is at least once, so de-duplicate by id."""
    by_id: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        event = json.loads(line)
        validate_event(event)
        assert by_id.setdefault(event["id"], event) == event  # a resend is identical
    events = sorted(by_id.values(), key=lambda e: e["seq"])
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    return events


def check_results(events: list[dict[str, Any]]) -> int:
    """Every round_result agrees with the rules applied to its own cards."""
    results = [e for e in events if e["type"] == "round_result"]
    for event in results:
        hands = {pos: evaluate_hand(hand["cards"]) for pos, hand in event["data"]["hands"].items()}
        expected = round_result_data(hands)
        assert event["data"]["positions"] == expected["positions"]
        assert event["data"]["hands"] == expected["hands"]
    return len(results)


@pytest.mark.slow
def test_demo_plays_rounds_and_writes_valid_events(tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"
    result = demo("--rounds", "2", "--seed", "7", "--state-dir", str(tmp_path / "state"),
                  "--events", str(events_file))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Round 1 of shoe 1" in out and "Round 2 of shoe 1" in out
    assert "Banker" in out and any(suit in out for suit in "♠♥♦♣")
    assert "returns" in out and "=== shoe 1 started ===" in out
    events = read_events(events_file)
    assert check_results(events) == 2
    # The first event of the table: its shoe, unless the system clock's state came first.
    table_events = [e for e in events if e["type"] != "clock_status"]
    assert table_events[0]["type"] == "shoe_started" and events[0]["table"] == "DEMO-1"
    state = tmp_path / "state"
    assert (state / "journal.key").stat().st_mode & 0o777 == 0o600
    assert verify_file(state / "journal.sqlite", demo_key(state)).ok  # the demo keys its chain
    assert all("anchor" in e for e in events)


@pytest.mark.slow
def test_demo_killed_mid_shoe_carries_on_with_the_same_shoe(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first_out = tmp_path / "first.out"
    args = [sys.executable, "-m", "controller", "demo", "--seed", "11", "--speed", "200",
            "--state-dir", str(state), "--quiet"]
    with open(first_out, "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        def at_round_4() -> bool:
            assert proc.poll() is None, first_out.read_text()
            return "Round 4 of shoe 1" in first_out.read_text()

        wait_until(at_round_4, 60, "the demo to get to round 4", interval=0.02)
        os.kill(proc.pid, signal.SIGKILL)  # mid-shoe, maybe mid-round, maybe mid-write
        proc.wait(10)

    second = demo("--state-dir", str(state), "--speed", "200", "--quiet", timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "resuming" in second.stdout and "seed 11" in second.stdout
    assert "=== shoe 1 ended:" in second.stdout

    assert verify_file(state / "journal.sqlite", demo_key(state)).ok
    events = read_events(state / "events.jsonl")
    assert [e["type"] for e in events].count("shoe_started") == 1
    assert events[-1]["type"] == "shoe_ended" and events[-1]["data"]["reason"] == "cut_card"
    rounds = check_results(events)
    assert rounds == events[-1]["data"]["rounds"] >= 20
    # The same shoe, card for card, across the kill: nothing skipped, nothing dealt twice.
    with Journal(state / "journal.sqlite", demo_key(state)) as journal:
        drawn = [inp.card for inp in journal.inputs() if inp.kind == "card"]
    assert drawn == shuffled_shoe(11, 8)[:len(drawn)]
    assert len(drawn) == events[-1]["data"]["cards_drawn"]


def test_the_dealer_plays_only_once_the_table_has_the_shoe_port_open(tmp_path: Path,
                                                                     monkeypatch) -> None:
    """pyserial empties a port's input as it opens it, so a card sent before the table has
    the shoe's port open can be lost and the table waits for it for ever (the kill test met
    it on a loaded machine). With the shoe's port slow to open, the dealer's first button
    press comes only after the table journaled the shoe as connected."""
    import io
    import time

    import drivers.serial_link as serial_link
    from controller.commands.demo_table import DemoOptions, main
    from controller.table.inputs import Button, DeviceStatus

    real_open = serial_link.serial.serial_for_url

    def slow_shoe_open(url, *args, **kwargs):
        if Path(str(url)).name == "shoe.pty":
            time.sleep(1.0)
        return real_open(url, *args, **kwargs)

    monkeypatch.setattr(serial_link.serial, "serial_for_url", slow_shoe_open)
    state = tmp_path / "state"
    out = io.StringIO()
    assert main(DemoOptions(rounds=1, speed=200, seed=7, state_dir=str(state), quiet=True,
                            display=False, events=str(tmp_path / "events.jsonl")), out) == 0
    with Journal(state / "journal.sqlite", demo_key(state)) as journal:
        inputs = list(journal.inputs())
    shoe_up = next(i for i, inp in enumerate(inputs)
                   if isinstance(inp, DeviceStatus) and inp.name == "shoe" and inp.connected)
    first_press = next(i for i, inp in enumerate(inputs) if isinstance(inp, Button))
    assert shoe_up < first_press, inputs[:first_press + 1]


def test_a_press_that_does_not_take_is_pressed_again(tmp_path: Path, monkeypatch) -> None:
    """The dealer's first press is made while the panel's cable is out (the panel's report
    reaches no host and is gone); the panel is back half a second later. The dealer sees the
    table has not moved, presses again and plays its rounds, as a person at the table would,
    instead of giving up."""
    import io
    import threading

    from controller.commands.demo_table import DemoOptions, main
    from drivers.sim.panel import SimPanel

    real_press = SimPanel.press
    swallowed: list[str] = []

    def press_on_a_loose_cable(self, name, hold_s=None):
        if not swallowed:
            swallowed.append(name)
            self.unplug()
            real_press(self, name, hold_s)  # no host has the panel: the press is lost
            threading.Timer(0.5, self.replug).start()
            return
        real_press(self, name, hold_s)

    monkeypatch.setattr(SimPanel, "press", press_on_a_loose_cable)
    state = tmp_path / "state"
    out = io.StringIO()
    assert main(DemoOptions(rounds=2, speed=200, seed=7, state_dir=str(state), quiet=True,
                            display=False, events=str(tmp_path / "events.jsonl")), out) == 0
    assert swallowed == ["new_shoe"]
    assert f"the table did not take {swallowed[0]}; pressing it again" in out.getvalue()
    events = read_events(tmp_path / "events.jsonl")
    assert check_results(events) >= 2
    assert [e["data"] for e in events if e["type"] == "device_status"] == [
        {"device": "panel", "connected": False}, {"device": "panel", "connected": True}]



@pytest.mark.slow
def test_the_demo_tells_table_time_keeps_its_log_apart_and_ends_cleanly_on_a_drain(
        tmp_path: Path) -> None:
    """What a person at the terminal meets: the betting window in real seconds at the demo's
    speed, the daemon's structured log in a file rather than among the rounds, and a
    supervisor's `drain --wait` that ends the demo with status 0."""
    state = tmp_path / "state"
    out_path = tmp_path / "demo.out"
    with out_path.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "controller", "demo", "--speed", "20",
                                 "--no-display", "--seed", "3", "--state-dir", str(state)],
                                stdout=out, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: "Round 1 of shoe 1" in out_path.read_text(), 60, "a first round")
        drained = subprocess.run(
            [sys.executable, "-m", "controller", "supervisor", "drain", "--wait",
             "--timeout", "60", "--state-dir", str(state)],
            capture_output=True, text=True, timeout=90)
        assert drained.returncode == 0, drained.stderr
        assert "drained: safe to stop" in drained.stdout
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    text = out_path.read_text()
    assert "betting open for 15 s of table time: 0.75 s at x20" in text
    assert "table drained (supervisor drain): safe to stop; the demo ends" in text
    logged = re.compile(r"\[(debug|info|warning|error|critical) *\]|\"level\"")
    assert not any(logged.search(line) for line in text.splitlines() + err.splitlines()), \
        "a structured log line among the demo's own"
    assert (state / "demo.log").is_file() and f"log: {state / 'demo.log'}" in text
