"""The last round of a shoe on the players' pages: a real table machine plays a whole shoe
into a real display server (testkit/players_table.py), read by the overlay and the scoreboard
in Chromium.

The shoe's last round ends with its result and ``shoe_ended`` in one batch (the cut card came
out: the table has no shoe at once), so the state the pages are sent after its last card is
already ``no_shoe``. The last result is revealed on the stage as any other, held for
``LAST_RESULT_HOLD_S`` of the table's clock (or until the next shoe starts), then the shuffle.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controller.display.players import LAST_RESULT_HOLD_S
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import Button, Tick
from controller.table.machine import MachineSettings, TableMachine
from testkit.players_table import SEED, START_AT, MachineTable

CHROMIUM = "/usr/bin/chromium"
#: what the stage shows, its hands and words, and the first of the last results (if any)
STAGE = """() => ({show: document.getElementById('stage').dataset.show,
    hands: document.querySelectorAll('#stage .hand-line').length,
    outcomes: document.querySelectorAll(
      '#stage .hand-line.win, #stage .hand-line.lose, #stage .hand-line.tie').length,
    text: document.getElementById('stage').innerText,
    game: document.getElementById('game').textContent,
    newest: (document.querySelector('#results .result') || {dataset: {}}).dataset.round})"""


def next_status(page: Any, then: Any) -> None:
    """Do ``then`` and wait for the page to draw the status it causes."""
    seen = page.evaluate("() => window.statusCount")
    then()
    page.wait_for_function(f"() => window.statusCount > {seen}")


@pytest.fixture
def table_before_its_last_round() -> Iterator[tuple[MachineTable, list[Any]]]:
    """A table one round from its shoe's end, and the inputs of that last round."""
    inputs = list(shoe_script(SEED, start_at=START_AT))
    rehearsal = TableMachine(MachineSettings(table_id="PD07"))  # where the last round opens
    last_open = max(i for i, inp in enumerate(inputs)
                    if any(e["type"] == "round_opened" for e in rehearsal.handle(inp)))
    with MachineTable() as table:
        for inp in inputs[:last_open]:
            table.handle(inp)
        yield table, inputs[last_open:]


@pytest.mark.parametrize("path", ["/overlay", "/scoreboard"])
def test_the_last_round_of_a_shoe_is_revealed_on_the_stage(
        table_before_its_last_round: tuple[MachineTable, list[Any]], path: str) -> None:
    from playwright.sync_api import sync_playwright

    table, last_round = table_before_its_last_round
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1920, "height": 1080})
            page.goto(f"http://127.0.0.1:{table.port}{path}")
            page.wait_for_function("() => document.body.dataset.link === 'live'")
            for inp in last_round:
                table.handle(inp)
            assert table.machine.status()["state"] == "no_shoe"
            settled = max(e["round"] for e in table.events if e["type"] == "round_result")
            ended_at = float(table.machine.status()["clock"])
            page.wait_for_function("() => document.body.dataset.state === 'no_shoe'")
            stage = page.evaluate(STAGE)
            assert stage["show"] == "result", stage  # the result first, as any other
            assert stage["hands"] == 6, stage
            # the round named: on the scoreboard's stage, in the overlay's game id above it
            assert f"-1-{settled}-" in stage["game"], stage
            if path == "/scoreboard":
                assert f"{settled}" in stage["text"], stage
            assert stage["outcomes"] == 5, stage  # each Player position's outcome
            if path == "/scoreboard":
                assert stage["newest"] == str(settled), stage  # the last results keep it
            # still up just before the hold ends on the table's clock
            next_status(page, lambda: table.handle(Tick(ended_at + LAST_RESULT_HOLD_S - 0.5)))
            assert page.evaluate(STAGE)["show"] == "result"
            # then the shuffle
            next_status(page, lambda: table.handle(Tick(ended_at + LAST_RESULT_HOLD_S + 0.1)))
            stage = page.evaluate(STAGE)
            assert stage["show"] == "shuffling" and stage["hands"] == 0, stage
            if path == "/scoreboard":
                assert stage["newest"] == str(settled), stage
        finally:
            browser.close()


def test_the_next_shoe_ends_the_last_result_before_its_time(
        table_before_its_last_round: tuple[MachineTable, list[Any]]) -> None:
    from playwright.sync_api import sync_playwright

    table, last_round = table_before_its_last_round
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1920, "height": 1080})
            page.goto(f"http://127.0.0.1:{table.port}/overlay")
            page.wait_for_function("() => document.body.dataset.link === 'live'")
            for inp in last_round:
                table.handle(inp)
            page.wait_for_function("() => document.body.dataset.state === 'no_shoe'")
            assert page.evaluate(STAGE)["show"] == "result"
            ended_at = float(table.machine.status()["clock"])
            next_status(page, lambda: table.handle(Button(ended_at + 1.0, "new_shoe")))
            stage = page.evaluate(STAGE)
            assert stage["show"] == "shuffling", stage
        finally:
            browser.close()
