"""The players' statistics: each Player position's wins, losses and ties, as shares of the
settled rounds, add up to 100 % on the scoreboard and on the overlay (rounded one by one,
1 win, 4 losses and 1 tie of 6 read 17 % + 67 % + 17 % = 101 %), and a studio setting with a
trailing line break is refused, not taken.

The rounds are a real table machine's: a generated shoe replayed by ``pokdeng-table replay``,
its events fed to a real display server and read by Chromium.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.display.studio import parse_studio

CHROMIUM = "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason=f"{CHROMIUM} is missing (apt-get install chromium)")

#: rounds of the replayed shoe the pages are shown: enough for shares that round badly
ROUNDS_SHOWN = 13


def replayed_events(tmp_path: Path) -> list[dict[str, Any]]:
    """A whole shoe's events from the table machine (seed 3: its first rounds' shares do not
    round to 100 one by one)."""
    script = subprocess.run([sys.executable, "-m", "controller.table.generators.scriptgen",
                             "--seed", "3"], check=True, capture_output=True, text=True).stdout
    path = tmp_path / "shoe.jsonl"
    path.write_text(script)
    out = subprocess.run([sys.executable, "-m", "controller", "replay", str(path)],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def first_rounds(events: list[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    """The events up to the ``rounds``-th round's result."""
    kept, results = [], 0
    for event in events:
        kept.append(event)
        if event["type"] == "round_result":
            results += 1
            if results == rounds:
                return kept
    raise AssertionError(f"the shoe has fewer than {rounds} results")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayServer]:
    events = first_rounds(replayed_events(tmp_path_factory.mktemp("shoe")), ROUNDS_SHOWN)
    status = {"table": "table-1", "state": "ready", "shoe": 1, "round": None,
              "rounds_played": ROUNDS_SHOWN, "betting_open": False}
    display = DisplayServer(DisplaySettings(port=0), lambda: (1, dict(status)))
    display.start()
    display.offer_events(events)
    try:
        yield display
    finally:
        display.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def shares_by_position(page: Any) -> list[list[str]]:
    """Each position's line of shares (wins, losses, ties) as the page shows them."""
    overlay = page.evaluate("document.body.classList.contains('overlay')")
    if overlay:
        rows = page.locator("#stats .stats-row")
        return [rows.nth(i).locator(".stats-share").all_inner_texts()
                for i in range(rows.count())]
    columns: list[list[str]] = [[], [], [], [], []]
    for kind in ("wins", "losses", "ties"):
        for p, text in enumerate(page.locator(f"#stats .stats-{kind} .stats-share")
                                 .all_inner_texts()):
            columns[p].append(text)
    return columns


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/scoreboard", "/overlay"])
def test_each_positions_shares_add_up_to_100(server: DisplayServer, browser: Any,
                                              path: str) -> None:
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    try:
        page.goto(f"http://127.0.0.1:{server.port}{path}")
        page.wait_for_function(
            f"document.querySelectorAll('#stats .stats-share').length >= 15 && "
            f"roadmap && roadmap.rounds === {ROUNDS_SHOWN}")
        lines = shares_by_position(page)
    finally:
        page.close()
    assert len(lines) == 5 and all(len(line) == 3 for line in lines), lines
    for position, line in enumerate(lines, start=1):
        numbers = [int(re.sub(r"\D", "", text)) for text in line]
        assert sum(numbers) == 100, f"P{position}'s shares {line} add up to {sum(numbers)} %"


@pytest.mark.parametrize(("key", "value"), [("currency", "PHP\n"),
                                            ("colours", {"accent": "#ffd23f\n"})])
def test_a_trailing_line_break_is_refused(key: str, value: object) -> None:
    studio, problems = parse_studio({key: value})
    assert len(problems) == 1 and problems[0].startswith(f"display.studio.{key}"), problems
    assert "\n" not in studio.currency and all("\n" not in c for c in studio.colours.values())
