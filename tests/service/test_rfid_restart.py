"""An RFID table restarted in the middle of a shoe still knows the tags that shoe gave: the
daemon is killed (SIGKILL) mid-round, started again, and a card read before the kill comes
back -> the duplicate-tag fault, not a card. The tags are journaled with the cards and never
leave the table."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest

from controller.rules.cards import ALL_CARDS, parse_card
from controller.service.control.client import ControlClient
from drivers.protocols.rfid import RfidEncoder, simulated_uid
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    daemon_config,
    open_shoe,
    start_daemon,
    start_round,
    stop_daemon,
    wait_status,
)


def tag_of(code: str) -> str:
    """The tag of the first physical copy of a card in the simulator's framed registry."""
    return simulated_uid(ALL_CARDS.index(parse_card(code)), "stx_etx")


@pytest.mark.slow
def test_a_tag_read_before_a_kill_is_a_duplicate_after_the_restart(short_dir: Path) -> None:
    shoe = ShoeSimulator(short_dir / "shoe", "rfid", framing="stx_etx").start()
    panel = LinePanelPty()
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, betting_seconds=600,
                           shoe={"driver": "rfid", "registry": str(shoe.registry_path),
                                 "framing": "stx_etx"})
    client = ControlClient(str(short_dir / "control.sock"))
    log = short_dir / "daemon.log"
    notify = NotifyListener(short_dir / "notify")
    proc = start_daemon(config, notify.path, log)
    try:
        notify.wait_for("READY", "1")
        panel.wait_connected()
        wait_status(client, lambda s: s["devices"].get("shoe") is True)
        open_shoe(client, panel, shoe, ("AS", "2S"))  # the flip card orders one burn
        start_round(client, panel)
        for card in ("KD", "3H"):
            shoe.send_card(card)
        before = wait_status(client, lambda s: s["cards_dealt"] == 2)
        assert stop_daemon(proc, signal.SIGKILL) == -signal.SIGKILL

        proc = start_daemon(config, notify.path, log)
        notify.wait_for("READY", "1", count=2)
        wait_status(client, lambda s: s["devices"].get("shoe") is True
                    and s["seq"] >= before["seq"])
        shoe.send_raw(RfidEncoder("stx_etx").tag(tag_of("KD")))  # KD comes back
        status = wait_status(client, lambda s: s["paused"])
        assert status["fault"]["detail"]["code"] == "rfid_duplicate_uid", status["fault"]
        assert status["cards_dealt"] == 2 and status["card_owed"]
        # a card never read before is still welcome once the supervisor enters the owed one
        assert status["betting_open"]
    finally:
        stop_daemon(proc)
        notify.close()
        shoe.close(drain_timeout=0.2)
        panel.close()

    # the journal holds the tags with the cards; nothing that leaves the table names them
    with sqlite3.connect(short_dir / "state" / "journal.sqlite") as journal:
        inputs = [json.loads(body) for (body,) in journal.execute(
            "SELECT body FROM records WHERE kind='input'")]
    tags = {inp.get("tag") for inp in inputs if inp["kind"] == "card"}
    assert {tag_of(c) for c in ("AS", "2S", "KD", "3H")} <= tags
    for tag in tags - {None}:
        assert tag not in log.read_text()
        assert tag not in (short_dir / "events.jsonl").read_text()
    assert "tags of the open shoe restored" in log.read_text()
