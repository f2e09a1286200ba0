"""A pause while no round is open (the table ready between rounds), told to the players: a
real table machine feeding a real display server (testkit/players_table.py), read as the
players' pages read it, over HTTP."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from controller.table.inputs import Supervisor
from support.waiting import wait_until
from testkit.players_table import SUPERVISOR, MachineTable


def players_words(port: int) -> dict[str, dict[str, str]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/players/state.json",
                                timeout=10) as reply:
        return dict(json.load(reply)["words"])


def players_status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/players/state.json",
                                timeout=10) as reply:
        return dict(json.load(reply)["status"])


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
        assert told == {"kind": "paused", "key": "notice.table_paused", "args": {}}, told
        words = players_words(table.port)
        for lang, catalogue in words.items():  # no word of bets in any language
            assert "{" not in catalogue["notice.table_paused"], lang
        assert "bet" not in words["en"]["notice.table_paused"].lower()


def test_a_pause_in_an_open_round_still_tells_its_bets_stand() -> None:
    with MachineTable() as table:
        for state in table.states():
            if state == "paused":
                break
        told = wait_until(lambda: players_status(table.port)["notice"], 10.0,
                          "the pause told to the players")
        assert told["key"] == "notice.paused", told


def test_both_pages_tell_a_pause_between_rounds_in_the_pages_language() -> None:
    from playwright.sync_api import sync_playwright

    with MachineTable() as table:
        for state in table.states():
            if state == "result":
                break
        table.handle(Supervisor(float(table.machine.status()["clock"]) + 0.1, "pause",
                                by=SUPERVISOR))
        told = players_words(table.port)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                                 args=["--no-sandbox"])
            try:
                for path in ("/scoreboard", "/overlay"):
                    for lang in ("en", "ja"):
                        page = browser.new_page(viewport={"width": 1920, "height": 1080})
                        page.goto(f"http://127.0.0.1:{table.port}{path}?lang={lang}")
                        page.wait_for_function(
                            "() => !document.getElementById('notice').hidden")
                        shown = page.evaluate(
                            "() => document.getElementById('notice-words').textContent")
                        assert shown == told[lang]["notice.table_paused"], (path, lang, shown)
                        page.close()
            finally:
                browser.close()
