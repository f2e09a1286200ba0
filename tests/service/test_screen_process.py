"""The people's screens in a process of their own: the real daemon (``run --config`` in its
own process) on a simulated shoe and a line panel, its screen process a real child of it,
read over HTTP as a page reads it.

The table deals on — every card to the backend, sealed — while the screen process is stopped
(SIGSTOP), killed, and started again by the daemon; a page that reconnects shows the round
the table is at. What the daemon writes to the screen process is recorded (a tap between
them) and searched: no card of a round whose betting is open crosses before its
betting_closed. The screen process runs below the table's priority, never at its real-time
one.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.service.control.client import ControlClient
from controller.service.screens import child as screen_child
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    BURNS,
    FLIP,
    LinePanelPty,
    NotifyListener,
    daemon_config,
    edited_config,
    log_records,
    open_shoe,
    running_daemon,
    stop_daemon,
    wait_status,
)
from support.display_helpers import SCREENS_S, SseReader, free_port
from support.sealing import Leaks
from support.waiting import wait_until

SUPPORT = Path(__file__).parent.parent / "support"


def round_cards(count: int) -> list[tuple[str, ...]]:
    """``count`` rounds of 13 cards (the burn and twelve), no card in two rounds nor among
    the flip card and its burns: a card found in the feed names its round."""
    used = {FLIP, *BURNS}
    deck = [rank + suit for suit in "SHDC" for rank in "A23456789TJQK"
            if rank + suit not in used]
    return [tuple(deck[13 * i:13 * (i + 1)]) for i in range(count)]


def play_round(shoe: ShoeSimulator, panel: LinePanelPty, client: ControlClient,
               cards: tuple[str, ...]) -> int:
    """Start a round, deal its 13 cards while betting is open; wait until it is played.
    Returns its round number."""
    before = client.status()["rounds_played"]
    panel.send("start_round")
    opened = wait_status(client, lambda s: s["state"] == "betting")
    for card in cards:
        shoe.send_card(card)
    wait_status(client, lambda s: s["rounds_played"] == before + 1, timeout=30)
    return int(opened["round"])


def delivered(client: ControlClient, events: Path) -> list[dict[str, Any]]:
    """The backend's (the events file's) events, once it holds every one the table made."""
    last = client.status()["seq"]
    wait_status(client, lambda s: s["backend"]["file"]["delivered_seq"] >= last, timeout=30)
    return [json.loads(line) for line in events.read_text().splitlines()]


def assert_every_card_delivered_sealed(events: list[dict[str, Any]],
                                       rounds: dict[int, tuple[str, ...]]) -> None:
    """Each round's result at the backend holds its twelve cards; no event before its
    betting_closed names one; the events run 1, 2, 3… without a gap."""
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for number, cards in rounds.items():
        [result] = [e for e in events if e["type"] == "round_result" and e["round"] == number]
        got = sorted(card for hand in result["data"]["hands"].values() for card in hand["cards"])
        assert got == sorted(cards[1:]), (number, got)
        closed = next(i for i, e in enumerate(events)
                      if e["type"] == "betting_closed" and e["round"] == number)
        leaks = Leaks()
        for card in cards:
            leaks.add_card(card)
        for event in events[:closed]:
            leaks.check(f"event {event['seq']} ({event['type']})", event)


def screen_pids(log: Path) -> list[int]:
    return [r["pid"] for r in log_records(log, "screens: screen process started")]


def screen_pid(log: Path, after: int | None = None) -> int:
    """The screen process the daemon started last (after ``after``, when given)."""
    def found() -> int | None:
        pids = screen_pids(log)
        if not pids or pids[-1] == after:
            return None
        return pids[-1]
    return int(wait_until(found, 15, "the daemon to start its screen process",
                          details=lambda: log.read_text()[-1500:]))


def python_of(pid: int) -> int:
    """The screen process itself: the pid the daemon started may still be ``ionice``, which
    becomes it by exec (same pid)."""
    wait_until(lambda: b"controller.service.screens.child" in
               Path(f"/proc/{pid}/cmdline").read_bytes(), 10, "the screen process to run")
    return pid


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def policy_and_nice(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[38]), int(fields[16])  # policy, nice (proc(5): fields 41 and 19)


@pytest.fixture
def sse() -> Iterator[list[SseReader]]:
    readers: list[SseReader] = []
    yield readers
    for reader in readers:
        reader.close()


@pytest.mark.slow
def test_the_table_deals_on_while_its_screens_are_stopped_killed_and_restarted(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty],
        sse: list[SseReader]) -> None:
    shoe, panel = devices
    port = free_port()
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=1,
                           display={"listen": f"127.0.0.1:{port}"})
    client = ControlClient(str(short_dir / "control.sock"))
    cards = round_cards(3)
    played: dict[int, tuple[str, ...]] = {}
    with running_daemon(config, short_dir, panel) as (proc, log):
        first = python_of(screen_pid(log))
        assert parent_of(first) == proc.pid  # the daemon's own child
        sse.append(SseReader(port))
        sse[0].wait_status(lambda v: v["state"] == "no_shoe", SCREENS_S)
        open_shoe(client, panel, shoe)
        played[play_round(shoe, panel, client, cards[0])] = cards[0]
        sse[0].wait_status(lambda v: v["rounds_played"] == 1, SCREENS_S)

        os.kill(first, signal.SIGSTOP)  # stuck: it takes nothing, serves nothing
        try:
            played[play_round(shoe, panel, client, cards[1])] = cards[1]
            assert screen_pids(log)[-1] == first  # stopped, not yet given up on
        finally:
            os.kill(first, signal.SIGKILL)
        played[play_round(shoe, panel, client, cards[2])] = cards[2]

        second = python_of(screen_pid(log, after=first))
        assert second != first and parent_of(second) == proc.pid
        gone = log_records(log, "screens: the screen process is gone; starting it again")
        assert gone and gone[-1]["pid"] == first and gone[-1]["level"] == "warning"
        # a page that reconnects is shown the round the table is at, and the results
        sse.append(SseReader(port))
        status = client.status()
        view = sse[1].wait_status(lambda v: v["rounds_played"] == 3, SCREENS_S)
        assert (view["shoe"], view["round"]) == (status["shoe"], status["round"])
        results = sse[1].wait_for(lambda m: [d for e, d in m if e == "results" and d]
                                  or [d["results"] for e, d in m if e == "state"
                                      and d["results"]], SCREENS_S)[-1]
        assert [r["round"] for r in results[:3]] == sorted(played, reverse=True)

        assert proc.poll() is None  # the table never stopped
        assert_every_card_delivered_sealed(delivered(client, short_dir / "events.jsonl"),
                                           played)


@pytest.mark.slow
def test_the_screen_process_is_never_handed_a_card_of_a_round_whose_betting_is_open(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    """Every byte the daemon writes to its screen process, recorded between them: each
    message is placed in the event sequence by the seq it reflects; none placed before a
    round's betting_closed names a card of that round, in any spelling."""
    shoe, panel = devices
    port = free_port()
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=1,
                           display={"listen": f"127.0.0.1:{port}"})
    record = short_dir / "feed.jsonl"
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    proc = subprocess.Popen([sys.executable, str(SUPPORT / "tapped_daemon.py"), str(config),
                             str(record)], stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                            env={**os.environ, "NOTIFY_SOCKET": str(notify.path)})
    client = ControlClient(str(short_dir / "control.sock"))
    played: dict[int, tuple[str, ...]] = {}
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        with contextlib.closing(SseReader(port)) as page:  # a page open all along
            open_shoe(client, panel, shoe)
            for cards in round_cards(3):
                played[play_round(shoe, panel, client, cards)] = cards
            page.wait_status(lambda v: v["rounds_played"] == 3, SCREENS_S)
        events = delivered(client, short_dir / "events.jsonl")
        assert stop_daemon(proc) == 0, log.read_text()[-2000:]
    finally:
        stop_daemon(proc)
        notify.close()

    messages = [json.loads(line) for line in record.read_bytes().splitlines()]
    kinds = [m["kind"] for m in messages]
    assert kinds[0] == "reset" and {"events", "status"} <= set(kinds), kinds[:20]
    closed_at = {e["round"]: e["seq"] for e in events if e["type"] == "betting_closed"}
    assert set(closed_at) == set(played)
    placed = 0
    for number, message in enumerate(messages, 1):
        reflects = reflected_seq(message)
        for round_number, cards in played.items():
            if reflects < closed_at[round_number]:
                leaks = Leaks()
                for card in cards:
                    leaks.add_card(card)
                leaks.check(f"feed message {number} ({message['kind']}, seq {reflects}, "
                            f"round {round_number})", message)
                placed += 1
    # the search means something: status messages of every betting window were sent
    for round_number in played:
        assert any(m["kind"] == "status" and m["status"].get("round") == round_number
                   and m["status"].get("betting_open") and m["status"].get("cards_dealt")
                   for m in messages), f"no status of round {round_number}'s open betting"
    assert placed > 0


def reflected_seq(message: dict[str, Any]) -> int:
    """The last event seq a feed message reflects: a status's ``seq``, an event batch's last."""
    if message["kind"] == "status":
        return int(message["status"].get("seq") or 0)
    if message["kind"] in ("events", "reset"):
        return max((int(e["seq"]) for e in message["events"]), default=0)
    return 0


@pytest.mark.slow
def test_the_screen_process_runs_below_the_table_and_never_real_time(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    """At nice ``child.NICE``, at the lowest best-effort I/O priority, at the normal policy:
    also when it is started again by a daemon whose threads are real-time by then
    (realtime.py; where the machine allows it), which it would otherwise inherit."""
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path,
                           display={"listen": f"127.0.0.1:{free_port()}"})
    with edited_config(config) as data:
        data["realtime_priority"] = 10 if realtime_allowed() else 0
    with running_daemon(config, short_dir, panel) as (proc, log):
        first = python_of(screen_pid(log))
        assert_lowered(first)
        if data["realtime_priority"]:
            # the daemon's threads are real-time now, the one that starts the next too
            [raised] = log_records(log, "card path at real-time priority")
            assert raised["rest_of_daemon"] > 0
        os.kill(first, signal.SIGKILL)
        assert_lowered(python_of(screen_pid(log, after=first)))


def assert_lowered(pid: int) -> None:
    wait_until(lambda: policy_and_nice(pid)[1] == screen_child.NICE, 10,
               "the screen process to lower itself")
    for task in os.listdir(f"/proc/{pid}/task"):  # every thread of it
        assert policy_and_nice(int(task)) == (os.SCHED_OTHER, screen_child.NICE)
    ioprio = subprocess.run(["ionice", "-p", str(pid)], capture_output=True, text=True)
    assert ioprio.stdout.strip() == "best-effort: prio 7", ioprio


def realtime_allowed() -> bool:
    """Whether this machine lets a thread of this process take SCHED_RR at all."""
    import threading

    outcome: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))
            outcome.append(True)
        except OSError:
            outcome.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return outcome[0]
