"""Edges of the players' pages found by trying to break them:

* each Player position's wins, losses and ties, as shares of the settled rounds, add up to
  100 % on the scoreboard and on the overlay (rounded one by one, 1 win, 4 losses and 1 tie
  of 6 read 17 % + 67 % + 17 % = 101 %);
* while bets are taken the table's limits and its whole paytable are shown on every page,
  language and monitor, with or without the last round's cancel notice;
* while bets are taken after a cancel (its notice up), the stage's paytable is whole in every
  language on every monitor: never a line cut at the box's edge;
* players' pages (a studio PC's overlays, or a flood of them) never keep the dealer's screen
  from its stream: it takes the oldest players' stream it is held back by;
* the round count after the shoe's first round reads "1 round", not "1 rounds";
* each last result's odds ("2:1", Persian "2 به 1") stay on one line, clear of their chip's
  edges (so two chips' odds never read as one run of numbers), in the language's reading order;
* a studio setting or a table id with a trailing line break is refused, not taken; a limit
  beyond what a page can show (``10**400`` read as "∞") is refused, and the widest limits
  allowed stay inside their box in every language on every monitor.

The rounds are a real table machine's: a generated shoe replayed by ``pokdeng-table replay``
(cut short and a round cancelled by the dealer's button where a test needs it), its events
fed to a real display server and read by Chromium. The status beside them is the few fields
of the table's status the players' view reads.
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
from test_display_browser import CHROMIUM, launched_browser

from controller.display.admission import STREAMS_PER_ADDRESS
from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.display.studio import LIMIT_MAX, parse_studio
from support.display_helpers import SseReader
from support.display_helpers import request as request_path
from support.waiting import wait_until

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason=f"{CHROMIUM} is missing (apt-get install chromium)")

#: rounds of the replayed shoe the pages are shown: enough for shares that round badly
ROUNDS_SHOWN = 13


def shoe_script() -> list[str]:
    """A whole shoe's table script (seed 3: its first rounds' shares do not round to 100 one
    by one)."""
    return subprocess.run([sys.executable, "-m", "controller.table.generators.scriptgen",
                           "--seed", "3"], check=True, capture_output=True,
                          text=True).stdout.splitlines()


def replayed_events(tmp_path: Path, script: list[str]) -> list[dict[str, Any]]:
    """The table machine's events for ``script``."""
    path = tmp_path / "script.jsonl"
    path.write_text("\n".join(script) + "\n")
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


def cancelled_then_betting(script: list[str], cancelled: int) -> list[str]:
    """``script`` up to round ``cancelled``'s betting, that round cancelled by the dealer's
    button, and the next round's betting opened."""
    starts = [i for i, line in enumerate(script) if json.loads(line).get("name") == "start_round"]
    kept = script[:starts[cancelled - 1] + 1]
    at = json.loads(kept[-1])["at"]
    return kept + [json.dumps({"at": at + 1, "kind": "button", "name": "cancel_round"}),
                   json.dumps({"at": at + 2, "kind": "button", "name": "start_round"})]


def serving(events: list[dict[str, Any]], status: dict[str, Any],
            studio: dict[str, Any] | None = None, max_clients: int = 16) -> DisplayServer:
    settings = DisplaySettings(port=0, max_clients=max_clients)
    if studio is not None:
        parsed, problems = parse_studio(studio)
        assert not problems, problems
        settings = DisplaySettings(port=0, max_clients=max_clients, studio=parsed)
    display = DisplayServer(settings, lambda: (1, dict(status)))
    display.start()
    display.offer_events(events)
    return display


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayServer]:
    events = first_rounds(replayed_events(tmp_path_factory.mktemp("shoe"), shoe_script()),
                          ROUNDS_SHOWN)
    display = serving(events, {"table": "table-1", "state": "ready", "shoe": 1, "round": None,
                               "rounds_played": ROUNDS_SHOWN, "betting_open": False})
    try:
        yield display
    finally:
        display.close()


@pytest.fixture(scope="module")
def first_round_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayServer]:
    events = first_rounds(replayed_events(tmp_path_factory.mktemp("first"), shoe_script()), 1)
    display = serving(events, {"table": "table-1", "state": "ready", "shoe": 1, "round": None,
                               "rounds_played": 1, "betting_open": False})
    try:
        yield display
    finally:
        display.close()


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/scoreboard", "/overlay"])
def test_one_round_is_counted_in_the_singular(first_round_server: DisplayServer, browser: Any,
                                              path: str) -> None:
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    try:
        page.goto(f"http://127.0.0.1:{first_round_server.port}{path}?lang=en")
        page.wait_for_function("() => document.getElementById('rounds-count').textContent")
        count = page.inner_text("#rounds-count")
    finally:
        page.close()
    assert count == "1 round", count


#: the cancelled round, and the studio's limits (the stage shows them beside the paytable)
CANCELLED = 3
STUDIO = {"currency": "PHP", "limits": {"player": {"min": 100, "max": 50000},
                                        "pair": {"min": 50, "max": 5000}}}


@pytest.fixture(scope="module")
def betting_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayServer]:
    events = replayed_events(tmp_path_factory.mktemp("cancel"),
                             cancelled_then_betting(shoe_script(), CANCELLED))
    assert [e["round"] for e in events if e["type"] == "round_cancelled"] == [CANCELLED]
    display = serving(events, {"table": "table-1", "state": "betting", "shoe": 1,
                               "round": CANCELLED + 1, "rounds_played": CANCELLED,
                               "betting_open": True}, STUDIO)
    try:
        yield display
    finally:
        display.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launched_browser()


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
            f"() => document.querySelectorAll('#stats .stats-share').length >= 15 && "
            f"roadmap && roadmap.rounds === {ROUNDS_SHOWN}")
        lines = shares_by_position(page)
    finally:
        page.close()
    assert len(lines) == 5 and all(len(line) == 3 for line in lines), lines
    for position, line in enumerate(lines, start=1):
        numbers = [int(re.sub(r"\D", "", text)) for text in line]
        assert sum(numbers) == 100, f"P{position}'s shares {line} add up to {sum(numbers)} %"


#: each chip's odds that is not one line, clear of its chip's edges, in its reading order
CHIP_ODDS = """(clear) => {
  const scale = Number(document.body.dataset.scale);
  const rtl = document.documentElement.dir === 'rtl';
  const bad = [];
  for (const odds of document.querySelectorAll('#results .chip-odds')) {
    const chip = odds.closest('.chip').getBoundingClientRect();
    const box = odds.getBoundingClientRect();
    const text = odds.firstChild, range = document.createRange();
    const at = (i) => { range.setStart(text, i); range.setEnd(text, i + 1);
                        return range.getBoundingClientRect(); };
    const [first, last] = [at(0), at(text.length - 1)];
    const where = `${odds.closest('.result').dataset.round} ${odds.closest('.chip').dataset.seat}`;
    if (Math.abs(first.top - last.top) > 1 || odds.getClientRects().length !== 1)
      bad.push(`${where} "${odds.textContent}" on more than one line`);
    if (box.left < chip.left + clear * scale || box.right > chip.right - clear * scale)
      bad.push(`${where} "${odds.textContent}" ${Math.round(box.width / scale)} px in a `
               + `${Math.round(chip.width / scale)} px chip`);
    if (text.length > 1 && (rtl ? first.left < last.left : first.left > last.left))
      bad.push(`${where} "${odds.textContent}" not in its reading order`);
  }
  return bad; }"""
#: px of a 1080-line screen between a chip's odds and each of its edges
ODDS_CLEARANCE = 4


def at_each_size(page: Any) -> Iterator[tuple[int, int]]:
    """The players' three monitors, one after the other, on one page (loaded afresh by the
    caller at each: a new page each time would cost a renderer)."""
    for width, height in ((1920, 1080), (1366, 768), (1080, 1920)):
        page.set_viewport_size({"width": width, "height": height})
        yield width, height


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "fil", "ms", "fa", "ja"])
def test_each_results_odds_read_on_one_line_inside_its_chip(server: DisplayServer,
                                                            browser: Any, lang: str,
                                                            tmp_path: Path) -> None:
    bad = []
    page = browser.new_page()
    try:
        for width, height in at_each_size(page):
            page.goto(f"http://127.0.0.1:{server.port}/scoreboard?lang={lang}")
            page.wait_for_function("() => document.querySelectorAll('#results .chip-odds')"
                                   ".length >= 5")
            page.evaluate("() => document.fonts.ready")
            found = page.evaluate(CHIP_ODDS, ODDS_CLEARANCE)
            if found:
                page.screenshot(path=tmp_path / f"chips-{lang}-{width}x{height}.png")
                bad.append(f"{width}x{height}: {found[:4]}")
    finally:
        page.close()
    assert not bad, f"{lang}: {bad}"


#: the widest limits a studio may set, in the widest currency code
WIDEST = {"currency": "IDR", "limits": {name: {"min": LIMIT_MAX, "max": LIMIT_MAX}
                                        for name in ("player", "pair")}}


def betting_open(tmp_path_factory: pytest.TempPathFactory, studio: dict[str, Any],
                 **status: Any) -> Iterator[DisplayServer]:
    """Round 3's betting open (no cancel before it), the studio's ``studio`` settings, and
    ``status``'s fields over the table's (a pause while bets are taken)."""
    script = cancelled_then_betting(shoe_script(), CANCELLED)[:-2]
    events = replayed_events(tmp_path_factory.mktemp("betting"), script)
    display = serving(events, {"table": "table-1", "state": "betting", "shoe": 1,
                               "round": CANCELLED, "rounds_played": CANCELLED - 1,
                               "betting_open": True, **status}, studio)
    try:
        yield display
    finally:
        display.close()


@pytest.fixture(scope="module")
def widest_limits_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayServer]:
    yield from betting_open(tmp_path_factory, WIDEST)


@pytest.fixture(scope="module")
def limits_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayServer]:
    yield from betting_open(tmp_path_factory, STUDIO)


@pytest.fixture(scope="module")
def paused_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayServer]:
    """A supervisor's pause while bets are taken."""
    yield from betting_open(tmp_path_factory, STUDIO, paused=True,
                            fault={"code": "supervisor_pause", "reason": "supervisor"})


@pytest.fixture(scope="module")
def misread_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DisplayServer]:
    """A misread card (the table paused for it) while bets are taken."""
    yield from betting_open(tmp_path_factory, STUDIO, paused=True,
                            fault={"code": "misread", "reason": "misread"})


#: the limits and every paytable row, each inside the stage's box and none cut at its edge
WHOLE_STAGE = """() => {
  const stage = document.getElementById('stage');
  const box = stage.getBoundingClientRect();
  const problems = [];
  const limits = stage.querySelectorAll('.limits .pay-row').length;
  const rows = stage.querySelectorAll('.paytable .pay-row').length;
  if (limits !== 2) problems.push(`${limits} limit rows of 2`);
  if (rows !== 6) problems.push(`${rows} paytable rows of 6`);
  if (stage.scrollHeight > stage.clientHeight + 1)
    problems.push(`content ${stage.scrollHeight} px in ${stage.clientHeight} px`);
  for (const row of stage.querySelectorAll('.pay-row')) {
    const r = row.getBoundingClientRect();
    if (r.top < box.top || r.bottom > box.bottom || r.left < box.left || r.right > box.right)
      problems.push(`out of the box: ${row.textContent}`);
  }
  return problems; }"""


#: each notice the players may be told while bets are taken: its server and its words' key
NOTICES = {"none": ("limits_server", None), "cancel": ("betting_server", "notice.cancelled"),
           "pause": ("paused_server", "notice.paused"),
           "misread": ("misread_server", "notice.misread")}


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "fil", "ms", "fa", "ja"])
@pytest.mark.parametrize("notice", sorted(NOTICES))
def test_the_limits_are_shown_while_bets_are_taken(request: pytest.FixtureRequest,
                                                    browser: Any, lang: str, notice: str,
                                                    tmp_path: Path) -> None:
    """The limits and the whole paytable, whatever notice is up beside them."""
    fixture, key = NOTICES[notice]
    served = request.getfixturevalue(fixture)

    def told() -> object:  # the feed's notice, once it has taken the events in
        status = json.loads(request_path(served.port, "/players/state.json")[2]).get("status")
        return ((status or {}).get("notice") or {}).get("key") if status else "nothing yet"
    wait_until(lambda: told() == key, 10, f"the feed's notice {key}", details=told)
    shown = "document.getElementById('notice').hidden" + ("" if key is None else " === false")
    missing = []
    page = browser.new_page()
    try:
        for path in ("/scoreboard", "/overlay"):
            for width, height in at_each_size(page):
                page.goto(f"http://127.0.0.1:{served.port}{path}?lang={lang}")
                page.wait_for_function("() => document.body.dataset.phase === 'betting' && "
                                       f"{shown} && "
                                       "document.querySelector('#stage .paytable') !== null")
                page.evaluate("() => document.fonts.ready")
                problems = page.evaluate(WHOLE_STAGE)
                if problems:
                    page.screenshot(path=tmp_path / f"stage-{lang}-{width}x{height}.png")
                    missing.append(f"{path} {width}x{height}: {problems}")
    finally:
        page.close()
    assert not missing, f"{lang}: the limits or the paytable not whole: {missing}"


#: the limits' rows whose words and amounts leave the stage's panel or lie on each other
LIMITS_APART = """() => {
  const panel = document.getElementById('stage').getBoundingClientRect();
  const rows = document.querySelectorAll('#stage .limits .pay-row');
  return [...rows].flatMap((row) => {
    const [words, odds] = [...row.children].map((e) => e.getBoundingClientRect());
    const inside = (r) => r.left >= panel.left && r.right <= panel.right;
    const apart = words.right <= odds.left + 0.5 || odds.right <= words.left + 0.5
      || words.bottom <= odds.top + 0.5 || odds.bottom <= words.top + 0.5;
    return inside(words) && inside(odds) && apart ? [] : [row.textContent];
  }); }"""


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "fil", "ms", "fa", "ja"])
def test_the_widest_limits_stay_in_their_box(widest_limits_server: DisplayServer,
                                             browser: Any, lang: str, tmp_path: Path) -> None:
    out = []
    page = browser.new_page()
    try:
        for path in ("/scoreboard", "/overlay"):
            for width, height in at_each_size(page):
                page.goto(f"http://127.0.0.1:{widest_limits_server.port}{path}?lang={lang}")
                page.wait_for_function("() => document.body.dataset.phase === 'betting' && "
                                       "document.querySelector('#stage .paytable') !== null")
                page.evaluate("() => document.fonts.ready")
                # each limit's words and amounts: inside the panel's padding, not on each other
                bad = page.evaluate(LIMITS_APART)
                if bad:
                    page.screenshot(path=tmp_path / f"limits-{lang}-{width}x{height}.png")
                    out.append(f"{path} {width}x{height}: {bad}")
    finally:
        page.close()
    assert not out, f"{lang}: limits out of their box: {out}"


@pytest.mark.parametrize("amount", [LIMIT_MAX + 1, 10**400])
def test_a_limit_no_page_can_show_is_refused(amount: int) -> None:
    studio, problems = parse_studio({"limits": {"player": {"min": 100, "max": amount}}})
    assert len(problems) == 1 and problems[0].startswith("display.studio.limits.player"), \
        problems
    assert f"{LIMIT_MAX:,}" in problems[0] and not studio.limits


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "fil", "ms", "fa", "ja"])
def test_the_paytable_is_whole_while_a_cancel_is_told(betting_server: DisplayServer,
                                                       browser: Any, lang: str,
                                                       tmp_path: Path) -> None:
    cut = []
    page = browser.new_page()
    try:
        for width, height in at_each_size(page):
            page.goto(f"http://127.0.0.1:{betting_server.port}/scoreboard?lang={lang}")
            page.wait_for_function("() => document.body.dataset.phase === 'betting' && "
                                   "!document.getElementById('notice').hidden && "
                                   "document.querySelector('#stage .paytable') !== null")
            page.evaluate("() => document.fonts.ready")
            room = page.evaluate("""() => { const stage = document.getElementById('stage');
                return [stage.scrollHeight, stage.clientHeight]; }""")
            if room[0] > room[1] + 1:
                page.screenshot(path=tmp_path / f"stage-{lang}-{width}x{height}.png")
                cut.append(f"{width}x{height}: content {room[0]} px in {room[1]} px")
    finally:
        page.close()
    assert not cut, f"{lang}: the stage's lines are cut: {cut}"


@pytest.mark.parametrize("max_clients", [4, 16])
def test_players_pages_never_keep_the_dealer_from_the_table(max_clients: int) -> None:
    """Every stream this machine may hold (the address's share, or all of the server's) taken
    by players' pages: the dealer's screen still gets the table, and the oldest page makes
    room for it."""
    display = serving([], {"table": "table-1", "state": "ready"}, max_clients=max_clients)
    pages: list[SseReader] = []
    try:
        for _ in range(min(max_clients, STREAMS_PER_ADDRESS)):
            pages.append(SseReader(display.port, "/players/events"))
            pages[-1].wait_status(lambda view: view.get("state") == "ready")
        crowd = SseReader(display.port, "/players/events")
        pages.append(crowd)
        crowd.wait_for(lambda _: crowd.ended, what="one players' page too many refused")
        assert crowd.status == 503
        dealer = SseReader(display.port, "/events")
        pages.append(dealer)
        dealer.wait_status(lambda view: view.get("state") == "ready")
        assert dealer.status == 200
        pages[0].wait_for(lambda _: pages[0].ended, what="the oldest page ended for the dealer")
        assert all(not page.ended for page in pages[1:-2])
    finally:
        for page in pages:
            page.close()
        display.close()


@pytest.mark.parametrize(("key", "value"), [("currency", "PHP\n"),
                                            ("colours", {"accent": "#ffd23f\n"})])
def test_a_trailing_line_break_is_refused(key: str, value: object) -> None:
    studio, problems = parse_studio({key: value})
    assert len(problems) == 1 and problems[0].startswith(f"display.studio.{key}"), problems
    assert "\n" not in studio.currency and all("\n" not in c for c in studio.colours.values())


def test_a_table_id_with_a_trailing_line_break_is_refused(tmp_path: Path) -> None:
    """The table id is on every players' page and in the game id players quote."""
    from controller.service.config.errors import ConfigError
    from controller.service.config.settings import parse_config

    with pytest.raises(ConfigError) as refused:
        parse_config({"table": {"id": "T1\n"}, "state_dir": str(tmp_path),
                      "shoe": {"driver": "beetek", "url": "/dev/null"}}, "test")
    assert any(problem.startswith("table.id") for problem in refused.value.errors), \
        refused.value.errors
