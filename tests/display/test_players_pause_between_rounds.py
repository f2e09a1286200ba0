"""A pause while no round is open (the table ready between rounds), told to the players: a
real table machine feeding a real display server (testkit/players_table.py), read as the
players' pages read it, over HTTP."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from controller.table.inputs import Supervisor
from support.waiting import wait_until
from testkit.players_table import SUPERVISOR, MachineTable


def players_status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/players/state.json",
                                timeout=10) as reply:
        return dict(json.load(reply)["status"])


@pytest.mark.xfail(strict=True, reason=(
    "a pause between rounds is told as notice.paused, 'Round paused — it continues "
    "shortly; bets stand', with no round open and no bet to stand; the words for a table "
    "paused between rounds must come from the five rule sheets (a new catalogue key)"))
def test_a_pause_between_rounds_does_not_tell_of_a_round_and_its_bets() -> None:
    with MachineTable() as table:
        for state in table.states():
            if state == "result":
                break
        status = table.machine.status()
        assert status["state"] == "ready" and not status.get("betting_open")
        table.handle(Supervisor(float(status["clock"]) + 0.1, "pause", by=SUPERVISOR))
        told = wait_until(lambda: players_status(table.port)["notice"], 10.0,
                          "the pause told to the players")
        assert told["key"] != "notice.paused", told
