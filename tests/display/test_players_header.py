"""The players' pages' header and the overlay's tag, on the edges: a table id as long as the
config allows (32 characters) cut with an ellipsis so nothing leaves the window and the game id
stays in view, and the header after a cancel naming the cancelled round. A real table machine
feeds a real display server (testkit/players_table.py), read by Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from controller.display import words
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import Supervisor
from controller.table.records import TABLE_ID_PATTERN
from testkit.players_table import SEED, START_AT, SUPERVISOR, MachineTable

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason=f"{CHROMIUM} is missing (apt-get install chromium)")

LONG_ID = "MANILA_STUDIO_B.POKDENG-TABLE-07"  # 32 characters: the longest id the config takes
MONITORS = [(1920, 1080), (1366, 768), (1080, 1920)]

#: every box of the header (the scoreboard) or the tag (the overlay), the game id's, the window
_BOXES = """(sel) => {
  const box = (node) => { const r = node.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width}; };
  const header = document.querySelector(sel);
  const game = document.getElementById('game');
  const stats = document.querySelector('.ov-stats');
  const table = document.getElementById('table');
  return {header: box(header), game: box(game), stats: stats ? box(stats) : null,
          parts: [...header.querySelectorAll('*')].filter((n) => n.getClientRects().length)
            .map((n) => Object.assign(box(n), {id: n.id || n.className})),
          gameWhole: game.scrollWidth <= game.clientWidth + 1, gameText: game.textContent,
          tableTitle: table.title, tableCut: table.scrollWidth > table.clientWidth,
          width: window.innerWidth, height: window.innerHeight};
}"""


@pytest.fixture
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return (a["left"] < b["right"] and b["left"] < a["right"]
            and a["top"] < b["bottom"] and b["top"] < a["bottom"])


@pytest.mark.parametrize("path, header", [("/scoreboard", ".top"), ("/overlay", ".ov-tag")])
def test_a_long_table_id_is_cut_and_nothing_leaves_the_window(browser: Any, path: str,
                                                              header: str) -> None:
    assert len(LONG_ID) == 32 and TABLE_ID_PATTERN.match(LONG_ID)
    with MachineTable(table=LONG_ID) as table:
        for state in table.states():
            if state == "result":
                break
        for width, height in MONITORS:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"http://127.0.0.1:{table.port}{path}")
            page.wait_for_function("() => document.getElementById('game').textContent !== ''")
            seen = page.evaluate(_BOXES, header)
            where = (path, width, height)
            assert LONG_ID in seen["gameText"], where
            for part in [seen["header"], *seen["parts"]]:
                assert part["left"] >= -1 and part["right"] <= width + 1, (where, part)
                assert part["top"] >= -1 and part["bottom"] <= height + 1, (where, part)
            assert seen["gameWhole"], (where, seen["game"])  # the id players quote, whole
            assert seen["tableTitle"] == f"Table {LONG_ID}", where  # the whole name
            if path == "/scoreboard" and width > height:  # one line: no room for it whole
                assert seen["tableCut"], where
            if seen["stats"] is not None:  # the overlay's tag clear of the statistics
                assert not overlaps(seen["header"], seen["stats"]), (where, seen)
            page.close()


def cancelled_header(table: MachineTable, browser: Any) -> str:
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    page.goto(f"http://127.0.0.1:{table.port}/scoreboard")
    page.wait_for_function("() => document.querySelector('#results .result.cancelled')")
    text = str(page.evaluate("() => document.getElementById('round').textContent"))
    page.close()
    return text


def test_after_a_cancel_the_header_names_the_cancelled_round(browser: Any) -> None:
    with MachineTable() as table:
        for state in table.states():
            if state == "cancelled":
                break
        assert table.cancelled_round is not None
        assert cancelled_header(table, browser) == words.say(
            "en", "round_cancelled", n=table.cancelled_round)


def test_a_shoe_whose_every_round_was_cancelled_names_the_cancelled_round(
        browser: Any) -> None:
    with MachineTable() as table:
        for inp in shoe_script(SEED, start_at=START_AT):
            if any(e["type"] == "round_opened" for e in table.handle(inp)):
                break
        at = float(table.machine.status()["clock"])
        events = table.handle(Supervisor(at + 0.1, "cancel_round", by=SUPERVISOR))
        cancelled = next(e["round"] for e in events if e["type"] == "round_cancelled")
        assert cancelled_header(table, browser) == words.say("en", "round_cancelled",
                                                             n=cancelled)
