"""SIGKILL the real daemon in the middle of a burst of card frames, while its events are being
handed from the journal's commit to the delivery threads in memory; restart it and finish the
round. The webhook and the file sink end with every journaled event in seq order, each id
with one body, and every event exactly as reading it back from the journal gives it (anchors
included; none inside the plain chain's betting windows)."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from controller.durability.delivery.anchors import anchored_events_after
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
from testkit.backends import WebhookBackend

ROUND_CARDS = ("9S", "AS", "5H", "5D", "JC", "QD", "TH", "KS", "4C", "6C", "2H", "7D", "8H")
ROUNDS = 3


def journaled_cards(journal: Path, after_seq: int) -> int:
    """card_dealt events journaled after ``after_seq`` (read-only; 0 on a busy moment)."""
    try:
        conn = sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=1.0)
        try:
            return conn.execute(
                "SELECT COUNT(*) FROM records WHERE event_seq > ? AND "
                "json_extract(body, '$.type')='card_dealt'", (after_seq,)).fetchone()[0]
        finally:
            conn.close()
    except sqlite3.OperationalError:
        return 0


def finish_round(shoe: ShoeSimulator, client: ControlClient, rounds_before: int) -> None:
    """Deal cards one at a time until the round has its result (the cards the killed daemon
    had read but not journaled are gone, as a real shoe's would be)."""
    # frames the shoe wrote since the restart arrive first: each card sent below must be
    # the round's next, not one more behind frames the daemon has still to read
    assert shoe.drain(15), "the daemon did not read what the shoe wrote"
    last_seq = wait_status(client, lambda s: True)["seq"]
    time.sleep(0.5)
    for card in ROUND_CARDS * 2:
        status = wait_status(client, lambda s: True)
        if status["rounds_played"] > rounds_before:
            return
        assert not status["paused"], f"the table paused: {status.get('fault')}"
        if status["seq"] != last_seq:  # still taking cards from before: let them settle
            last_seq = status["seq"]
            time.sleep(0.3)
            continue
        shoe.send_card(card)
        wait_status(client, lambda s, seen=last_seq: s["seq"] > seen)
        last_seq = wait_status(client, lambda s: True)["seq"]
    wait_status(client, lambda s: s["rounds_played"] > rounds_before, timeout=20)


@pytest.mark.slow
def test_sigkill_mid_burst_loses_no_event_and_changes_none(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty],
        webhook: WebhookBackend, webhook_secret: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    shoe, panel = devices
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=1)
    with edited_config(config) as data:
        data["transports"]["http"] = {
            "url": webhook.url, "secret_file": str(webhook_secret), "allow_insecure": True,
            "timeout_s": 2.0, "backoff_initial_s": 0.02, "backoff_max_s": 0.2, "batch_max": 5}
    journal = short_dir / "state" / "journal.sqlite"
    notify = NotifyListener(short_dir / "notify")
    client = ControlClient(str(short_dir / "control.sock"))
    starts = 1
    proc = start_daemon(config, notify.path, short_dir / "daemon.log")
    kills = []  # (round, cards of the burst journaled when the kill landed)
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        panel.send("new_shoe")
        wait_status(client, lambda s: s["state"] == "awaiting_flip")
        for card in ("2H", "3C", "4C"):   # the flip card (2: two burns) and the burns
            shoe.send_card(card)
        wait_status(client, lambda s: s["state"] == "ready")
        for number in range(1, ROUNDS + 1):
            before = wait_status(client, lambda s: True)
            panel.send("start_round")
            opened = wait_status(client, lambda s: s["state"] == "betting")
            kill_after = rng.randint(1, 11)
            # A few milliseconds between frames: frames queued together are journaled in one
            # transaction (group commit), and a burst with no gap at all would commit whole.
            gaps = [rng.uniform(0.002, 0.006) for _ in ROUND_CARDS]
            burst = threading.Thread(target=lambda g=gaps: [
                (shoe.send_card(c), time.sleep(gap)) for c, gap in zip(ROUND_CARDS, g)],
                daemon=True)
            burst.start()
            assert wait_until(lambda at=opened["seq"], n=kill_after:
                              journaled_cards(journal, at) >= n,
                              15, "the burst's first cards journaled", interval=0.001)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            kills.append((number, journaled_cards(journal, opened["seq"])))
            starts += 1
            proc = start_daemon(config, notify.path, short_dir / "daemon.log")
            notify.wait_for("READY", "1", count=starts)
            burst.join(15)
            finish_round(shoe, client, before["rounds_played"])
        final = wait_status(client, lambda s: s["backend"]["http"]["backlog"] == 0
                            and s["backend"]["file"]["backlog"] == 0, timeout=20)
        assert stop_daemon(proc, signal.SIGTERM) == 0
    finally:
        stop_daemon(proc, signal.SIGKILL)
        notify.close()

    assert any(0 < cards < len(ROUND_CARDS) for _, cards in kills), \
        f"seed {seed}: no kill landed mid-burst: {kills}"
    conn = sqlite3.connect(journal)
    try:
        expected = anchored_events_after(conn, 0, 1_000_000)
    finally:
        conn.close()
    assert [e["seq"] for e in expected] == list(range(1, final["seq"] + 1))
    assert sum(1 for e in expected if e["type"] == "round_result") == ROUNDS
    assert any("anchor" not in e for e in expected)  # a plain chain: sealed cards exist
    # the webhook: every event, in order, one body per id, each as the journal reads it
    assert webhook.unique_ids() == [e["id"] for e in expected], f"seed {seed}: {kills}"
    assert webhook.conflicts == [] and webhook.bad_signatures == 0
    first: dict[str, dict] = {}
    for event in webhook.events:
        first.setdefault(event["id"], event)
    assert list(first.values()) == expected, f"seed {seed}"
    # the file sink likewise, repeats (after a kill) byte for byte the same
    sunk = [json.loads(line) for line in (short_dir / "events.jsonl").read_text().splitlines()]
    seen: dict[str, dict] = {}
    for event in sunk:
        assert seen.setdefault(event["id"], event) == event, f"seed {seed}: {event['id']}"
    assert list(seen.values()) == expected, f"seed {seed}"
    print(f"seed {seed}: kills {kills}, {len(expected)} events, {webhook.repeats()} repeats "
          f"at the webhook, {len(sunk) - len(expected)} at the file sink")
