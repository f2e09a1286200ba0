"""The players' pages (``/scoreboard`` and the stream overlay ``/overlay``) in Chromium, at
1920x1080, 1366x768 and 1080x1920, in every language.

- From a real table machine feeding a real display server (testkit/players_table.py), in each
  state the players are told (a settled round with its winner, betting open, a supervisor's
  pause, a misread, a cancelled round, the shuffle): every visible text at least 28 px of a
  1080-line screen (scaled: 19.9 px at 1366x768), nothing outside its box, no word missing or
  left in English, no internal code (snake_case) and no login on the page or in its feed, the
  overlay's page transparent (computed style and a screenshot's pixels).
- Against the real daemon (``pokdeng-table demo``) and ``supervisor cancel-round`` over its
  control socket: the cancel notice with the sheet's refund word on every page within a
  second, the round kept in the last results and on the plates, and the demo's dealer
  dealing no card into the cancelled round.

One browser for the module; each test opens its own pages and relies on no other test.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_display_browser import CHROMIUM, DemoTable, launched_browser
from test_display_languages import LEGIBLE_PX, MEASURE, VIEWPORTS, english_left

from controller.display import words
from controller.service.control.client import ControlClient
from support.display_helpers import SseReader, request
from support.legibility import TEXT_SIZES
from support.png import alpha_at, size
from support.waiting import wait_until
from testkit.players_table import STATES, SUPERVISOR, MachineTable

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

PAGES = ("scoreboard", "overlay")
#: the refund word of each rule sheet's "all bets are refunded" (Filipino ibabalik, Malay
#: dikembalikan, Persian بازپرداخت, Japanese 返金)
REFUND = {"en": "refunded", "fil": "ibabalik", "ms": "dikembalikan", "fa": "بازپرداخت",
          "ja": "返金"}
#: an internal code as no player may read it
SNAKE = re.compile(r"[A-Za-z]+_[A-Za-z_]+")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launched_browser()


def shows(page: Any, state: str, cancelled: int | None) -> bool:
    """The page tells ``state`` (its words in, its stream live)."""
    return bool(page.evaluate("""([state, cancelled]) => {
      const b = document.body, notice = document.getElementById('notice');
      if (b.dataset.link !== 'live' || !document.documentElement.lang) return false;
      const kind = notice.hidden ? '' : notice.dataset.kind;
      const text = notice.hidden ? '' : notice.textContent;
      switch (state) {
        case 'result': return b.dataset.phase === 'result' && !!document.querySelector('.pok');
        case 'betting': return b.dataset.phase === 'betting' && !b.classList.contains('paused')
          && !!document.querySelector('#stage .paytable');
        case 'paused': return kind === 'paused' && b.classList.contains('paused');
        case 'misread': return kind === 'paused' && text !== window.pausedWords
          && (window.pausedWords = window.pausedWords || text) !== null;
        case 'cancelled': return kind === 'cancelled' && text.includes(String(cancelled))
          && (!document.getElementById('results')
              || !!document.querySelector(`#results .result.cancelled[data-round="${cancelled}"]`));
        case 'shuffling': return b.dataset.phase === 'shuffling'
          && !!document.querySelector('.shuffle-title');
      }
      return false;
    }""", [state, cancelled]))


def legible_and_whole(page: Any, where: str, lang: str) -> str:
    """Check the page as it is at each monitor size; its text at the last one."""
    text = ""
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        scale = min(width, height) / 1080
        wait_until(lambda scale=scale: abs(float(page.evaluate(
            "() => document.body.dataset.scale")) - scale) < 0.01, 10, "the page to fit")
        legible = LEGIBLE_PX * scale
        at = f"{where} at {width}x{height}"
        seen = page.evaluate(MEASURE, [legible])
        assert not seen["problems"], (at, seen["problems"][:8])
        small = [t for t in page.evaluate(TEXT_SIZES) if t[2] < legible * 0.99]
        assert not small, (at, f"text under {legible:.1f} px", small[:6])
        text = seen["text"]
        assert not seen["missing"] and "\u27e6" not in text, (at, seen["missing"])
        assert not english_left(text, lang), (at, english_left(text, lang))
        assert not SNAKE.findall(text), (at, "an internal code", SNAKE.findall(text))
        assert SUPERVISOR.user not in text, (at, "a login")
    return str(text)


@pytest.mark.parametrize("which", PAGES)
def test_every_state_the_players_are_told_reads_from_afar_in_every_language(
        browser: Any, which: str) -> None:
    with MachineTable() as table:
        feed = SseReader(table.port, "/players/events")
        pages = {}
        try:
            for lang in words.LANGUAGES:
                pages[lang] = browser.new_page(viewport={"width": 1920, "height": 1080})
                pages[lang].goto(f"http://127.0.0.1:{table.port}/{which}?lang={lang}")
            seen_states = []
            for state in table.states():
                for lang, page in pages.items():
                    where = f"{which} in {lang}, {state}"
                    wait_until(lambda page=page, state=state: shows(
                        page, state, table.cancelled_round), 10, where)
                    text = legible_and_whole(page, where, lang)
                    if state == "cancelled":
                        assert REFUND[lang] in text, (where, text[:300])
                    page.set_viewport_size({"width": 1920, "height": 1080})
                seen_states.append(state)
            assert tuple(seen_states) == STATES
            # what the players' pages read never carries a login or a fault code either
            raw = feed.raw + request(table.port, "/players/state.json")[2].decode()
            assert SUPERVISOR.user not in raw
            for code in ("supervisor_pause", "beetek_card_not_read", "last_actions", "banner"):
                assert code not in raw, code
        finally:
            feed.close()
            for page in pages.values():
                page.close()


def test_the_overlay_is_transparent_around_its_panels(browser: Any) -> None:
    with MachineTable() as table:
        states = table.states()
        next(states)  # a settled round: the lower third shows its hands
        page = browser.new_page(viewport={"width": 1920, "height": 1080})
        try:
            page.goto(f"http://127.0.0.1:{table.port}/overlay")
            wait_until(lambda: shows(page, "result", None), 10, "the overlay drawn")
            backgrounds = page.evaluate("""() => [getComputedStyle(document.documentElement)
                .backgroundColor, getComputedStyle(document.body).backgroundColor,
                getComputedStyle(document.body).backgroundImage]""")
            assert backgrounds == ["rgba(0, 0, 0, 0)", "rgba(0, 0, 0, 0)", "none"], backgrounds
            # a pixel of the picture's middle (the video shows through) and of the lower third
            middle, lower = (page.screenshot(omit_background=True, clip={
                "x": 960, "y": y, "width": 4, "height": 4}) for y in (400, 1000))
            whole = page.screenshot(omit_background=True)
        finally:
            page.close()
    assert size(whole) == (1920, 1080)
    assert alpha_at(middle, 1, 1) == 0, "the middle of the picture is not see-through"
    assert alpha_at(lower, 1, 1) > 200, "the lower third is not drawn"


def test_a_cancel_is_told_to_every_players_page_within_a_second(browser: Any) -> None:
    root = Path(tempfile.mkdtemp(prefix="players-", dir="/tmp"))
    table = DemoTable(root)
    table.start()
    try:
        wait_until(lambda: _up(table), 60, "the display to answer")
        views = [(which, lang, size) for size in VIEWPORTS for which in PAGES
                 for lang in words.LANGUAGES]
        for start in range(0, len(views), 8):  # one address gets eight streams at most
            _cancel_while_watched(table, browser, views[start:start + 8])
        # the demo's dealer put the cancelled rounds' next cards back, as a dealer does; a
        # card already on its way as the cancel came is set aside and the table resumed
        events = table.events()
        for at, event in enumerate(events):
            if event["type"] == "paused" and event["data"]["code"] == "card_no_round":
                rounds = [e["type"] for e in events[:at]
                          if e["type"] in ("round_opened", "round_cancelled", "round_result")]
                assert rounds[-1] == "round_cancelled", rounds[-3:]
                assert "resumed" in [e["type"] for e in events[at + 1:]], event
    finally:
        table.kill()
        shutil.rmtree(root, ignore_errors=True)


def _up(table: DemoTable) -> bool:
    try:
        return request(table.port, "/players/state.json")[0] == 200
    except OSError:
        return False


#: every change of the notice's words, with the time it was drawn (ms since the epoch)
NOTICE_LOG = """() => { window.noticeLog = [];
  let last = null;
  const look = () => { const n = document.getElementById('notice');
    const text = n.hidden ? '' : n.textContent;
    if (text !== last) { last = text; window.noticeLog.push([Date.now(), text]); }
    requestAnimationFrame(look); };
  look(); }"""


def _cancel_while_watched(table: DemoTable, browser: Any,
                          views: list[tuple[str, str, tuple[int, int]]]) -> None:
    pages = []
    try:
        for which, lang, (width, height) in views:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(f"{table.url}{which}?lang={lang}")
            pages.append(((which, lang, width), page))
        for _, page in pages:
            wait_until(lambda page=page: page.evaluate(
                "() => document.body.dataset.link === 'live' && !!document.documentElement.lang"
                " && !!document.querySelector('#stats div')"), 30, "the page drawn")
            page.evaluate(NOTICE_LOG)
        opened = wait_until(lambda: (lambda s: s if s and s["state"] == "betting"
                                     and not s["paused"] and (s["betting_seconds_left"] or 0) >= 5
                                     else None)(table.status()),
                            90, "a round open for betting with time left",
                            details=lambda: f"the table: {table.status()}")
        asked = time.time()
        answer = ControlClient(table.socket).supervisor("cancel_round")
        assert answer["ok"] and "round_cancelled" in answer["events"], answer
        number = opened["round"]  # 5 s of its betting were left: the round cancelled
        for (which, lang, width), page in pages:
            where = f"{which} in {lang} at {width}"
            told = wait_until(lambda page=page, word=REFUND[lang]: next(
                (entry for entry in page.evaluate("() => window.noticeLog")
                 if word in entry[1] and str(number) in entry[1]), None), 5, where,
                details=lambda page=page: f"round {number}, the notice's words: "
                                          f"{page.evaluate('() => window.noticeLog')}")
            assert told[0] / 1000 - asked <= 1.0, (where, f"{told[0] / 1000 - asked:.2f} s")
            kept = page.evaluate("""(n) => ({
                results: !!document.querySelector(`#results .result.cancelled[data-round="${n}"]`),
                beads: document.querySelectorAll(`#roadmap g.bead.cancelled[data-round="${n}"]`)
                  .length, text: document.body.innerText})""", number)
            if which == "scoreboard":  # the round keeps its place in the results and plates
                assert kept["results"] and kept["beads"] == 5, (where, kept["beads"])
            assert not SNAKE.findall(kept["text"]), (where, SNAKE.findall(kept["text"]))
        players = json.loads(request(table.port, "/players/state.json")[2])
        assert number in players["roadmap"]["cancelled"]
    finally:
        for _, page in pages:
            page.close()
