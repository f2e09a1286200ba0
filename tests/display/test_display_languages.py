"""Both pages in every language and on every monitor, in a real browser against the real
daemon: ``pokdeng-table demo`` in its own process with the display on, Chromium driven by
Playwright (one browser and one demo table for the module; each test waits for what it needs
and relies on no other).

- every page × language at 1920x1080, 1366x768 and a portrait 1080x1920: no element outside
  its box or the window (bounding boxes measured), no word missing from the language (no
  ⟦key⟧, no English word the language has its own for), no glyph drawn as a box (tofu), and
  every visible text (a bead's letter scaled by its plate's viewBox) at least 28 px on a
  1080-line screen (docs/display.md: legible from 2 m on a 24" monitor; the same share of the
  other monitors: 19.9 px at 1366x768);
- the dealer page so in each state a real table machine steps it into (a settled round,
  betting open with cards going out, the burn next with the last round still up, a pause, a
  misread, a cancelled round, a new shoe), and with the longest seat of each language;
- a pause has its own colour and its reason in words on both pages, in every language;
- the countdown moves on every frame and never jumps back when a status resyncs it;
- no card of a round whose betting is open in any page's DOM, in any language or spelling.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_display_browser import CHROMIUM, DemoTable, launched_browser  # one demo table kind

from controller.display import words
from controller.service.control.client import ControlClient
from support.display_helpers import request
from support.legibility import LEGIBLE_PX, legible_px, too_small
from support.sealing import Leaks
from support.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

PAGES = {"dealer": "", "scoreboard": "scoreboard"}
#: every page a sealing search reads: the stream overlay too (its own layout, tested for size
#: and words in test_players_browser.py)
SEALED_PAGES = {**PAGES, "overlay": "overlay"}
VIEWPORTS = [(1920, 1080), (1366, 768), (1080, 1920)]
PAUSE_COLOUR = "rgb(194, 24, 91)"   # --pause in display.css
BETTING_COLOUR = "rgb(47, 191, 99)"  # --tie: the betting green
LOSE_COLOUR = "rgb(125, 133, 128)"


@pytest.fixture(scope="module")
def table() -> Iterator[DemoTable]:
    root = Path(tempfile.mkdtemp(prefix="displang-", dir="/tmp"))
    demo = DemoTable(root)
    demo.start()
    wait_until(lambda: _up(demo), 60, "the display to answer")
    yield demo
    demo.kill()
    shutil.rmtree(root, ignore_errors=True)


def _up(demo: DemoTable) -> bool:
    try:
        return request(demo.port, "/state.json")[0] == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launched_browser()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    yield page
    page.close()


def url(table: DemoTable, which: str, lang: str) -> str:
    return f"{table.url}{SEALED_PAGES[which]}?lang={lang}"


def drawn(page: Any) -> bool:
    """The page has its words, its roadmap and a result to show."""
    return bool(page.evaluate("""() => document.documentElement.lang !== '' &&
        (!!document.querySelector('#roadmap .plate') || !!document.querySelector('#stats div'))
        && (!!document.querySelector('#results .chip')
            || document.body.classList.contains('overlay'))
        && document.body.dataset.link === 'live'"""))


MEASURE = """([legible]) => {
  const vw = window.innerWidth, vh = window.innerHeight;
  const problems = [];
  const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
    + (typeof e.className === 'string' && e.className
       ? '.' + e.className.split(' ').join('.') : '');
  const visible = (e) => { const s = getComputedStyle(e);
    return s.display !== 'none' && s.visibility !== 'hidden' && e.getClientRects().length > 0; };
  for (const e of document.body.querySelectorAll('*')) {
    if (e.closest('svg') && e.tagName.toLowerCase() !== 'svg') continue;  // drawn inside its svg
    if (!visible(e)) continue;
    const r = e.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.left < -1 || r.top < -1 || r.right > vw + 1 || r.bottom > vh + 1) {
      problems.push(name(e) + ' leaves the window: '
        + JSON.stringify([r.left, r.top, r.right, r.bottom]));
    }
    const style = getComputedStyle(e);
    const positioned = style.position === 'absolute' || style.position === 'fixed';
    const parent = e.parentElement;
    if (!positioned && parent && parent !== document.body) {
      const p = parent.getBoundingClientRect();
      if (r.left < p.left - 1 || r.top < p.top - 1 || r.right > p.right + 1
          || r.bottom > p.bottom + 1) {
        problems.push(name(e) + ' leaves its box ' + name(parent) + ': ' + JSON.stringify(
          [r.left - p.left, r.top - p.top, p.right - r.right, p.bottom - r.bottom]));
      }
    }
    // text wider than its box; taller only beyond a quarter of its size (glyphs of a
    // line-height:1 line reach a little past it, and are still whole on the screen)
    const slack = 0.25 * parseFloat(style.fontSize);
    if (style.display !== 'inline' && e.tagName.toLowerCase() !== 'svg' && e.textContent.trim()
        && (e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + slack)) {
      problems.push(name(e) + ' has text beyond its box: "' + e.textContent.slice(0, 40) + '"');
    }
  }
  const scale = Number(document.body.dataset.scale);
  const sizes = [];
  for (const t of document.querySelectorAll('#roadmap .bead-text')) {
    const svg = t.ownerSVGElement;
    const k = svg.getBoundingClientRect().height / svg.viewBox.baseVal.height;
    sizes.push(['bead', parseFloat(getComputedStyle(t).fontSize) * k]);
  }
  for (const v of document.querySelectorAll('.hand-value, .chip-value')) {
    sizes.push([v.className, parseFloat(getComputedStyle(v).fontSize) * scale]);
  }
  const small = sizes.filter(([, px]) => px < legible * 0.99);
  // odds and outcomes run in the page's direction ("2 به 1" read from the right is 2:1)
  const page = document.documentElement.dir;
  const directions = [...document.querySelectorAll('.outcome, .outcome-odds, .chip-odds')]
    .filter((e) => getComputedStyle(e).direction !== page).map(name);
  return {problems, sizes: sizes.length, small, text: document.body.innerText, directions,
          missing: window.missingWords, scale, lang: document.documentElement.lang,
          dir: document.documentElement.dir};
}"""

TOFU = """() => {
  // Each character the page shows, drawn in the page's own fonts, against the box a font
  // draws for a character it does not have: the same picture (or nothing at all) is tofu.
  const font = getComputedStyle(document.body).fontFamily;
  const canvas = document.createElement('canvas');
  canvas.width = 64; canvas.height = 64;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const pixels = () => ctx.getImageData(0, 0, 64, 64).data.join(',');
  const picture = (c) => { ctx.clearRect(0, 0, 64, 64); ctx.font = '40px ' + font;
    ctx.fillStyle = '#000'; ctx.fillText(c, 4, 48); return pixels(); };
  const none = [picture('\\uE000'), picture('\\u0378'), picture('\\uFFFF')];
  const blank = (() => { ctx.clearRect(0, 0, 64, 64); return pixels(); })();
  const chars = new Set([...document.body.innerText].filter(
    (c) => c.trim() && c.charCodeAt(0) > 127));
  const bad = [];
  for (const c of chars) {
    const p = picture(c);
    if (/[\\u200c\\u200d\\u200e\\u200f]/.test(c)) continue;  // joiners and marks draw nothing
    if (p === blank || none.includes(p)) bad.push(c + ' U+' + c.codePointAt(0).toString(16));
  }
  return {checked: chars.size, bad, font};
}"""


def english_left(text: str, lang: str) -> list[str]:
    """English words of the catalogue on a page in another language, where that language has
    its own (the game's loanwords such as Banker or AK Flush are the same in both)."""
    if lang == "en":
        return []
    own = words.CATALOGUE[lang]
    theirs = " ".join(own.values())
    left = []
    for key, english in words.EN.items():
        plain = english.split("{")[0].strip(" :…")
        if len(plain) < 5 or own[key] == english or plain in theirs:
            continue
        if plain in text:
            left.append(f"{key}: {plain!r}")
    return left


@pytest.mark.parametrize("lang", words.LANGUAGES)
@pytest.mark.parametrize("which", sorted(PAGES))
def test_every_page_fits_every_monitor_and_speaks_its_language(
        table: DemoTable, page: Any, which: str, lang: str) -> None:
    # a page with a result: the hands, combinations, odds and beads are all on it
    wait_until(lambda: len(table.results()) >= 2, 90, "two round results")
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        page.goto(url(table, which, lang))
        wait_until(lambda: drawn(page), 20, f"the {which} page drawn in {lang}")
        if which == "dealer":  # the last hands stay up until the next round's first card
            wait_until(lambda: page.evaluate(
                "() => document.querySelectorAll('.hand-value').length === 6"), 60,
                "the dealer page showing a round's hands")
        legible = legible_px(width, height)
        seen = page.evaluate(MEASURE, [legible])
        where = f"{which} in {lang} at {width}x{height}"
        assert seen["lang"] == lang and seen["dir"] == ("rtl" if lang in words.RTL else "ltr")
        assert not seen["missing"] and "\u27e6" not in seen["text"], (where, seen["missing"])
        assert not english_left(seen["text"], lang), (where, english_left(seen["text"], lang))
        assert not seen["problems"], (where, len(seen["problems"]), seen["problems"][:12])
        assert seen["sizes"] >= 6 and not seen["small"], (where, seen["small"][:5])
        small = too_small(page, legible)
        assert not small, (where, f"text under {legible:.1f} px", small[:6])
        assert not seen["directions"], (where, "against the page's direction",
                                         seen["directions"][:5])
        if which == "dealer":  # the longest words of states this round did not reach
            catalogue = words.CATALOGUE[lang]
            longest = {
                "step": max((t for k, t in catalogue.items() if k.startswith("step.")), key=len),
                "seconds-label": max((t for k, t in catalogue.items()
                                      if k.startswith("clock.") and "{" not in t), key=len)}
            for seconds in ("", "12"):
                page.evaluate("""([texts, seconds]) => {
                    document.getElementById('seconds').textContent = seconds;
                    for (const [id, text] of Object.entries(texts))
                        document.getElementById(id).textContent = text; }""", [longest, seconds])
                probed = page.evaluate(MEASURE, [legible])
                assert not probed["problems"], (where, longest, probed["problems"][:8])
                assert not too_small(page, legible), (where, longest, too_small(page, legible))
        if (width, height) == VIEWPORTS[0]:
            glyphs = page.evaluate(TOFU)
            assert glyphs["checked"] > 0 or lang not in ("fa", "ja")  # their script checked
            assert not glyphs["bad"], (where, glyphs)


def test_a_pause_has_its_own_colour_and_its_reason_on_both_pages_in_every_language(
        table: DemoTable, browser: Any) -> None:
    wait_until(lambda: (lambda s: s and not s["paused"] and s["state"] != "starting")(
        table.status()), 60, "a running table")
    answer = ControlClient(table.socket).supervisor("pause")
    assert answer["ok"], answer
    pages = []
    try:
        for lang in words.LANGUAGES:
            for which in sorted(PAGES):
                page = browser.new_page(viewport={"width": 1366, "height": 768})
                pages.append(page)
                page.goto(url(table, which, lang))
                wait_until(lambda page=page: page.evaluate(
                    "() => document.body.classList.contains('paused') && "
                    "!!document.documentElement.lang"), 20, f"the {which} page paused ({lang})")
                if which == "scoreboard":  # players are told what it means for their bets
                    seen = page.evaluate("""() => ({
                        title: document.getElementById('title').textContent,
                        colour: getComputedStyle(document.getElementById('title'))
                          .backgroundColor,
                        notice: getComputedStyle(document.getElementById('notice'))
                          .backgroundColor,
                        words: document.getElementById('notice-words').textContent})""")
                    assert seen["title"] == words.say(lang, "state.paused"), lang
                    assert seen["colour"] == seen["notice"] == PAUSE_COLOUR, (lang, seen)
                    # in a round (its bets stand), for a misread, or between rounds
                    assert seen["words"] in (words.say(lang, "notice.paused"),
                                             words.say(lang, "notice.misread"),
                                             words.say(lang, "notice.table_paused")), (lang, seen)
                    page.close()
                    continue
                seen = page.evaluate("""() => ({
                    title: document.getElementById('title').textContent,
                    colour: getComputedStyle(document.getElementById('title')).backgroundColor,
                    what: document.getElementById('banner-what').textContent,
                    banner: getComputedStyle(document.getElementById('banner')).backgroundColor,
                    way: (document.getElementById('banner-way') || {}).textContent || null,
                    code: document.getElementById('banner-code').textContent.split(' ')[0]})""")
                where = f"{which} in {lang}"
                assert seen["title"] == words.say(lang, "state.paused"), where
                assert seen["colour"] == seen["banner"] == PAUSE_COLOUR, (where, seen)
                assert PAUSE_COLOUR not in (BETTING_COLOUR, LOSE_COLOUR)
                # the supervisor's pause, or a card the demo's dealer drew into it
                code = seen["code"]
                assert code in ("supervisor_pause", "card_while_paused"), (where, code)
                assert seen["what"] == words.say(lang, f"fault.{code}"), where
                if which == "dealer":
                    assert seen["way"] == words.say(lang, f"way.{code}"), where
                for width, height in VIEWPORTS:  # the banner fits every monitor too
                    page.set_viewport_size({"width": width, "height": height})
                    scale = min(width, height) / 1080
                    wait_until(lambda page=page, scale=scale: abs(float(page.evaluate(
                        "() => document.body.dataset.scale")) - scale) < 0.01, 10,
                        "the page to fit the new size")
                    measured = page.evaluate(MEASURE, [LEGIBLE_PX * scale])
                    assert not measured["problems"], (where, width, measured["problems"][:8])
                    small = too_small(page, LEGIBLE_PX * scale)
                    assert not small, (where, width, "text under the legible size", small[:6])
                page.close()  # one address gets eight streams at most (admission.py): make room
    finally:
        assert table.supervisor("resume")["ok"]
        for page in pages:
            if not page.is_closed():
                page.close()


RECORD = """() => new Promise((done) => {
  const samples = [];
  const start = performance.now();
  const statuses = window.statusCount;
  const step = () => {
    const left = document.getElementById('seconds').dataset.left;
    samples.push([performance.now(), left === '' ? null : Number(left), window.statusCount]);
    if (performance.now() - start < 1500) requestAnimationFrame(step);
    else done({samples, statuses: window.statusCount - statuses});
  };
  requestAnimationFrame(step);
})"""


@pytest.mark.parametrize("which, lang", [("dealer", "en"), ("scoreboard", "fa")])
def test_the_countdown_moves_every_frame_and_never_jumps_back_on_a_resync(
        table: DemoTable, page: Any, which: str, lang: str) -> None:
    page.goto(url(table, which, lang))
    rate = float(json.loads(request(table.port, "/state.json")[2])["status"]["betting"]["rate"])
    tried = []
    for _attempt in range(5):  # a window open through a second of recording, with resyncs
        wait_until(lambda: (lambda s: s and s["state"] == "betting" and not s["paused"]
                            and s["cards_dealt"] <= 2)(table.status()), 90,
                   "a round just opened for betting")
        record = page.evaluate(RECORD)
        running = [(t, left, n) for t, left, n in record["samples"] if left is not None]
        # the longest stretch of frames with the countdown running (the page may join late)
        stretch: list[tuple[float, float, int]] = []
        for sample in running:
            if stretch and sample[0] - stretch[-1][0] > 100:
                stretch = []
            stretch.append(sample)
        tried.append((len(record["samples"]), len(stretch),
                      stretch[-1][2] - stretch[0][2] if stretch else 0))
        if stretch and stretch[-1][0] - stretch[0][0] >= 1000 \
                and stretch[-1][2] - stretch[0][2] >= 2:
            samples = [(t, left) for t, left, _ in stretch]
            break
    else:
        pytest.fail(f"no betting window ran through a second of recording with resyncs "
                    f"(frames, running frames, statuses): {tried}")
    for (t0, left0), (t1, left1) in zip(samples, samples[1:]):
        frame = (t1 - t0) / 1000 / rate  # one frame, in table seconds
        assert left1 <= left0 + frame, f"the countdown jumped back {left1 - left0:.3f} s"
    drops = [a[1] - b[1] for a, b in zip(samples, samples[1:]) if a[1] != b[1]]
    ten_hz = 0.1 / rate  # what a countdown stepping ten times a second moves in one step
    assert len(drops) >= 10 and statistics.median(drops) < ten_hz / 2, (
        f"steps of {statistics.median(drops):.3f} s: not frames")


def _snapshot(page: Any) -> dict[str, Any]:
    """The DOM as text, without the felt when it shows an earlier, settled round's hands
    (which the test checks is earlier than the open round)."""
    return dict(page.evaluate("""() => {
        const felt = document.getElementById('felt');
        const shown = felt ? felt.dataset.shownRound : '';
        const copy = document.documentElement.cloneNode(true);
        if (shown) copy.querySelector('#felt').remove();
        return {html: copy.outerHTML, shown: shown, state: document.body.dataset.state,
                round: document.getElementById('round').textContent};
    }"""))


def test_no_card_of_a_round_open_for_betting_on_any_page_in_any_language(
        table: DemoTable, browser: Any) -> None:
    """Every page (the overlay too) of two languages at a time (the display gives one address
    eight streams at most: controller/display/admission.py), a round each, until every
    language was watched."""
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    try:
        for batch in (words.LANGUAGES[0:2], words.LANGUAGES[2:4], words.LANGUAGES[4:]):
            _watch_a_round_sealed(table, context, batch)
    finally:
        context.close()


def _watch_a_round_sealed(table: DemoTable, context: Any, languages: tuple[str, ...]) -> None:
    table.keep_dealing()
    pages = {}
    for lang in languages:
        for which in sorted(SEALED_PAGES):
            page = context.new_page()
            page.goto(url(table, which, lang))
            pages[f"{which} in {lang}"] = page
    try:
        for page in pages.values():
            wait_until(lambda page=page: drawn(page), 30, "every page drawn")
        def between_rounds() -> bool:
            table.keep_dealing()  # the shoe may have ended while the pages were drawn
            status = table.status()
            return bool(status and status["state"] == "ready" and not status["paused"])

        wait_until(between_rounds, 120, "a table between rounds",
                   details=lambda: f"the table: {table.status()}")
        opened = wait_until(lambda: (lambda s: s if s and s["state"] == "betting"
                                     else None)(table.status()), 60, "betting to open")
        number = opened["round"]
        snapshots: list[tuple[str, dict[str, Any]]] = []
        while (lambda s: s and s["state"] == "betting" and s["round"] == number)(table.status()):
            for name, page in pages.items():
                snap = _snapshot(page)
                if snap["state"] == "betting" and str(number) in snap["round"]:
                    snapshots.append((name, snap))
        result = wait_until(lambda: table.results().get(number), 30, f"round {number}'s result")
        leaks = Leaks()
        for hand in result["data"]["hands"].values():
            for card in hand["cards"]:
                leaks.add_card(card)
        assert {name for name, _ in snapshots} == set(pages), "a page never showed the betting"
        for name, snap in snapshots:
            assert not snap["shown"] or int(snap["shown"]) < number, (name, snap["shown"])
            found = leaks.found_in(f"the {name} DOM", snap["html"])
            assert not found, found[0]
    finally:
        for page in pages.values():
            page.close()


@contextlib.contextmanager
def machine_fed_display(until: Callable[[list[dict[str, Any]]], Any] | None = None,
                        ) -> Iterator[tuple[Any, Any]]:
    """A display server fed seed 1's shoe from a real table machine, its status after each
    input: the whole shoe, or up to the first input whose events ``until`` finds something
    in. Yields (the server, what ``until`` found)."""
    from controller.display.server import DisplayServer
    from controller.display.settings import DisplaySettings
    from controller.table.generators.scriptgen import shoe_script
    from controller.table.machine import MachineSettings, TableMachine

    machine = TableMachine(MachineSettings(table_id="PD07"))
    shown = {"version": 0, "status": machine.status()}
    display = DisplayServer(DisplaySettings(port=0), lambda: (
        shown["version"], dict(shown["status"], now=shown["status"].get("clock"))))
    display.start()
    try:
        found = None
        for inp in shoe_script(1):
            events = machine.handle(inp)
            display.offer_events(events)
            shown["version"] += 1
            shown["status"] = machine.status()
            display.status_changed()
            found = until(events) if until is not None else None
            if found is not None:
                break
        yield display, found
    finally:
        display.close()


def test_the_longest_seat_fits_in_every_language_and_monitor(browser: Any) -> None:
    """A settled round where a Player wins 2:1 with a Special Pair and the pair bet (the longest
    seat: a two-word combination and a pair badge), fed from a real table machine: every page
    fits every monitor in every language (Malay's seat once left its box on a portrait one)."""
    def longest_seat(events: list[dict[str, Any]]) -> dict[str, Any] | None:
        return next((e for e in events if e["type"] == "round_result" and any(
            e["data"]["hands"][p]["combo"] == "special_pair"
            and e["data"]["positions"][p]["outcome"] == "win"
            and e["data"]["positions"][p]["pair"] for p in ("P1", "P2", "P3", "P4", "P5"))),
            None)

    with machine_fed_display(until=longest_seat) as (display, longest):
        assert longest is not None, "seed 1's shoe has such a round"
        page = browser.new_page()  # one page, loaded afresh each time: a renderer costs more
        try:
            for lang in words.LANGUAGES:
                for which in sorted(PAGES):
                    for width, height in VIEWPORTS:
                        page.set_viewport_size({"width": width, "height": height})
                        page.goto(f"http://127.0.0.1:{display.port}/{PAGES[which]}?lang={lang}")
                        wait_until(lambda: page.evaluate(
                            "() => document.querySelectorAll('.outcome.win, .chip.win')"
                            ".length > 0"), 20, "the round's results on the page")
                        legible = legible_px(width, height)
                        measured = page.evaluate(MEASURE, [legible])
                        assert not measured["problems"], (which, lang, width,
                                                          measured["problems"][:4])
                        small = too_small(page, legible)
                        assert not small, (which, lang, width, "text under the legible size",
                                           small[:6])
        finally:
            page.close()


def dealer_fits_every_monitor(page: Any, where: str, lang: str) -> None:
    """The dealer page as it is now, at each monitor size: nothing outside its box, every text
    legible, every word in its language, odds and outcomes in its direction."""
    for width, height in VIEWPORTS:
        page.set_viewport_size({"width": width, "height": height})
        scale = min(width, height) / 1080
        wait_until(lambda scale=scale: abs(float(page.evaluate(
            "() => document.body.dataset.scale")) - scale) < 0.01, 10, "the page to fit")
        legible = legible_px(width, height)
        at = f"{where} at {width}x{height}"
        seen = page.evaluate(MEASURE, [legible])
        assert not seen["problems"], (at, seen["problems"][:8])
        small = too_small(page, legible)
        assert not small, (at, f"text under {legible:.1f} px", small[:6])
        assert not seen["missing"] and "\u27e6" not in seen["text"], (at, seen["missing"])
        # the fault's code (supervisor_pause) is shown as it is, for docs/faults.md
        code = page.evaluate("() => document.getElementById('banner-code').textContent")
        text = seen["text"].replace(code, "") if code else seen["text"]
        assert not english_left(text, lang), (at, english_left(text, lang))
        assert not seen["directions"], (at, "against the page's direction", seen["directions"])


#: what the dealer page shows in each state of testkit.players_table's table (STATES)
DEALER_SHOWS = {
    "result": "document.querySelectorAll('.seat .hand-value').length === 6",
    "betting": "b.dataset.state === 'betting' && !b.classList.contains('paused')"
               " && !!document.querySelector('.seat.next .next-tag')"
               " && document.querySelectorAll('.seat .card.back').length >= 5",
    "paused": "b.classList.contains('paused')"
              " && code.startsWith('supervisor_pause')",
    "misread": "b.classList.contains('paused') && code.startsWith('misread')",
    "cancelled": "!b.classList.contains('paused')"
                 " && !!document.querySelector('#results .result-cancelled')",
    "shuffling": "b.dataset.state === 'no_shoe'",
}


def dealer_shows(page: Any, state: str) -> bool:
    return bool(page.evaluate(f"""() => {{ const b = document.body;
        const code = document.getElementById('banner-code').textContent;
        return b.dataset.link === 'live' && !!document.documentElement.lang
          && !!document.querySelector('#roadmap .plate') && ({DEALER_SHOWS[state]}); }}"""))


def open_round_leaks(table: Any) -> Leaks | None:
    """The cards (and tags) scanned into the round whose betting is open, as a sealing search
    looks for them; None when no betting is open."""
    from controller.table.inputs import CardScan

    if not table.machine.status().get("betting_open"):
        return None
    opened = max(i for i, events in enumerate(table.answers)
                 if any(e["type"] == "round_opened" for e in events))
    scans = [inp for inp in table.inputs[opened:] if isinstance(inp, CardScan)]
    assert scans, "cards out while betting is open: what the search looks for"
    leaks = Leaks()
    for scan in scans:
        leaks.add_card(scan.card)
        if scan.tag:
            leaks.add_tag(scan.tag)
    assert leaks.found_in("a probe", f"the {scans[0].card.code} card"), "a search that finds"
    return leaks


def test_every_state_of_the_dealer_page_reads_from_afar_in_every_language(browser: Any) -> None:
    """A real table machine stepped through a settled round, betting open with cards going
    out (backs, a seat lit NEXT CARD), a supervisor's pause, a misread, a cancelled round and
    a new shoe: the dealer page whole and legible in each, every language, every monitor; and
    while betting is open (cards out, paused, misread) no card of the round in its DOM."""
    from testkit.players_table import STATES, MachineTable

    class RecordingTable(MachineTable):
        """The players' test table, keeping each input and the events it made."""

        def __init__(self) -> None:
            super().__init__()
            self.inputs: list[Any] = []
            self.answers: list[list[dict[str, Any]]] = []

        def handle(self, inp: Any) -> list[dict[str, Any]]:
            events = super().handle(inp)
            self.inputs.append(inp)
            self.answers.append(events)
            return events

    with RecordingTable() as table:
        pages = {lang: browser.new_page(viewport={"width": 1920, "height": 1080})
                 for lang in words.LANGUAGES}
        try:
            for lang, page in pages.items():
                page.goto(f"http://127.0.0.1:{table.port}/?lang={lang}")
            seen_states = []
            for state in table.states():
                for lang, page in pages.items():
                    where = f"the dealer page in {lang}, {state}"
                    wait_until(lambda page=page, state=state: dealer_shows(page, state), 10,
                               where)
                    dealer_fits_every_monitor(page, where, lang)
                    page.set_viewport_size({"width": 1920, "height": 1080})
                    leaks = open_round_leaks(table)
                    if leaks is not None:
                        found = leaks.found_in(f"the DOM of {where}", _snapshot(page)["html"])
                        assert not found, found[0]
                seen_states.append(state)
            assert tuple(seen_states) == STATES == tuple(DEALER_SHOWS)
        finally:
            for page in pages.values():
                page.close()


def test_the_burn_next_with_the_last_round_still_up_reads_from_afar(browser: Any) -> None:
    """Betting just opened, no card out: the burn is lit NEXT CARD and the felt still shows the
    last round's hands with their outcomes (the dealer's fullest felt), from a real table
    machine: whole and legible in every language and on every monitor."""
    def third_round_opened(events: list[dict[str, Any]]) -> int | None:
        return next((e["round"] for e in events if e["type"] == "round_opened"
                     and e["round"] >= 3), None)

    with machine_fed_display(until=third_round_opened) as (display, number):
        assert number is not None
        for lang in words.LANGUAGES:
            page = browser.new_page(viewport={"width": 1920, "height": 1080})
            try:
                page.goto(f"http://127.0.0.1:{display.port}/?lang={lang}")
                wait_until(lambda page=page: page.evaluate("""() =>
                    !!document.querySelector('.seat-burn.next .next-tag')
                    && document.querySelectorAll('.seat .outcome').length === 5
                    && !!document.querySelector('#roadmap .plate')"""), 20,
                    f"the burn lit over the last round's hands in {lang}")
                dealer_fits_every_monitor(page, f"the burn next in {lang}", lang)
            finally:
                page.close()


BEADS_AND_HEADS = """() => {
  // Each bead's letter, by its ink (canvas measureText in the text's own font and size, in
  // the plate's units), against its bead's circle: the ink's corners inside the circle.
  const ctx = document.createElement('canvas').getContext('2d');
  const out = {letters: [], outside: [], heads: 0, touching: []};
  for (const g of document.querySelectorAll('#roadmap g.bead')) {
    const t = g.querySelector('.bead-text');
    const r = Number(g.querySelector('.bead-body').getAttribute('r'));
    const s = getComputedStyle(t);
    ctx.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    const m = ctx.measureText(t.textContent);
    // a letter the page draws narrower (textLength) is measured so
    const narrow = t.hasAttribute('textLength')
      ? Number(t.getAttribute('textLength')) / m.width : 1;
    const half = [narrow * (m.actualBoundingBoxLeft + m.actualBoundingBoxRight) / 2,
                  (m.actualBoundingBoxAscent + m.actualBoundingBoxDescent) / 2];
    const corner = Math.hypot(half[0], half[1]);
    if (!out.letters.includes(t.textContent)) out.letters.push(t.textContent);
    if (corner > r + 1) out.outside.push([t.textContent, Math.round(corner * 10) / 10, r]);
  }
  // Each plate's head: its name and its counts apart, never run together.
  const scale = Number(document.body.dataset.scale);
  for (const head of document.querySelectorAll('#roadmap .plate-head')) {
    out.heads += 1;
    // the players' pages show the counts in their statistics, under the plates
    if (getComputedStyle(head.querySelector('.plate-counts')).display === 'none') continue;
    const a = head.querySelector('.plate-name').getBoundingClientRect();
    const b = head.querySelector('.plate-counts').getBoundingClientRect();
    const apart = Math.max(b.left - a.right, a.left - b.right) / scale;
    const inside = head.getBoundingClientRect();
    if (apart < 8 || b.right > inside.right + 1 || b.left < inside.left - 1)
      out.touching.push([head.textContent, Math.round(apart)]);
  }
  return out;
}"""


def test_bead_letters_sit_inside_their_beads_and_plate_names_apart_from_their_counts(
        browser: Any) -> None:
    """A bead's letter drawn inside its bead (勝/負/引 at the legible 28 px stuck out of
    Japanese beads), and a plate's name never running into its counts ("Manlalaro 311 11 0"):
    a whole shoe from a real table machine (two-digit counts), both pages, every language."""
    with machine_fed_display() as (display, _):
        page = browser.new_page(viewport={"width": 1920, "height": 1080})  # loaded afresh
        try:
            for lang in words.LANGUAGES:
                for which in sorted(PAGES):
                    page.goto(f"http://127.0.0.1:{display.port}/{PAGES[which]}?lang={lang}")
                    wait_until(lambda: page.evaluate(
                        "() => document.querySelectorAll('#roadmap g.bead').length >= 100"),
                        20, "the shoe's beads on the page")
                    seen = page.evaluate(BEADS_AND_HEADS)
                    where = f"{which} in {lang}"
                    assert seen["letters"] and not seen["outside"], (where, seen["outside"][:3])
                    assert seen["heads"] == 5 and not seen["touching"], (where, seen["touching"])
        finally:
            page.close()
