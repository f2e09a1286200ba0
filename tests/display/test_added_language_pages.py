"""Languages added the documented way — one ``.po`` file on the locales search path, no code —
on every page of a real demo table (its real daemon and screen process) in Chromium: Thai
(``th``), and a language whose code has a region or script (``zh_Hant``: the catalogue's
file name, as docs/display.md names it), whose page must still tell the browser its language
as a language tag (``zh-Hant``): the browser picks the Han glyphs and the ``:lang()`` styles
by it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

from controller.display import words
from support.display_helpers import SCREENS_S, free_port, players_state
from support.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
PAGES = ("/", "/scoreboard", "/overlay")
THAI = {"language": "ไทย", "seat.P": "ผู้เล่น {n}", "seat.banker": "เจ้ามือ",
        "table": "โต๊ะ {id}", "stats.title": "สถิติ", "outcome.win": "ชนะ"}
#: a hostile translator's words: markup, script and style where the words go
HOSTILE = {"language": "<b>zz</b>", "seat.P": '<img src=x onerror="window.pwned=1">{n}',
           "table": "<script>window.pwned=1</script>{id}",
           "call.place_bets": '"><svg onload="window.pwned=1">',
           "state.betting": "</style><style>body{display:none}</style>",
           "stats.title": "javascript:window.pwned=1", "outcome.win": "&lt;&amp;"}
CHINESE = {"language": "繁體中文", "seat.P": "閒家 {n}", "seat.banker": "莊家",
           "table": "賭桌 {id}", "stats.title": "統計", "outcome.win": "贏"}


def write_catalogue(directory: Path, code: str, team: str, own: dict[str, str]) -> None:
    """``<code>.po`` as a translator's tool writes it: every English key, ``own`` words."""
    catalogue = Catalog(locale=None, project="pokdeng-table", language_team=team,
                        revision_date=datetime.now(UTC), fuzzy=False)
    catalogue.mime_headers = [*catalogue.mime_headers, ("Language", code)]
    for key, text in {**words.EN, **own}.items():
        catalogue.add(key, text)
    with open(directory / f"{code}.po", "wb") as f:
        write_po(f, catalogue, width=0)


@pytest.fixture(scope="module")
def demo_table(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A demo table with ``th.po`` and ``zh_Hant.po`` in ``POKDENG_TABLE_LOCALES``, kept up
    after its round: its display's port."""
    base = tmp_path_factory.mktemp("added-language")
    locales = base / "locales"
    locales.mkdir()
    write_catalogue(locales, "th", "Thai", THAI)
    write_catalogue(locales, "zh_Hant", "Chinese (Traditional)", CHINESE)
    write_catalogue(locales, "zzh", "Hostile", HOSTILE)
    port = free_port()
    table = subprocess.Popen(
        [sys.executable, "-m", "controller", "demo", "--rounds", "1", "--speed", "50",
         "--stay", "--quiet", "--state-dir", str(base / "state"), "--display-port", str(port)],
        env={**os.environ, "POKDENG_TABLE_LOCALES": str(locales)},
        stdout=subprocess.DEVNULL, stderr=open(base / "demo.err", "wb"))
    try:
        wait_until(lambda: players_state(port).get("status"), SCREENS_S, "the demo's display",
                   details=lambda: (base / "demo.err").read_text()[-2000:])
        yield port
    finally:
        table.terminate()
        table.wait(30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def open_page(browser: Any, port: int, path: str, lang: str) -> Any:
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    page.goto(f"http://127.0.0.1:{port}{path}?lang={lang}")
    page.wait_for_function("() => document.body.dataset.link === 'live' && window.statusCount",
                           timeout=SCREENS_S * 1000)
    return page


@pytest.mark.parametrize("path", PAGES)
def test_thai_added_as_one_file_is_on_every_page(demo_table: int, browser: Any,
                                                 path: str) -> None:
    page = open_page(browser, demo_table, path, "th")
    try:
        assert page.evaluate("() => document.documentElement.lang") == "th"
        assert page.evaluate("() => window.missingWords") == []
        text = page.evaluate("() => document.body.innerText")
        assert "โต๊ะ DEMO-1" in text and "\u27e6" not in text
    finally:
        page.close()


@pytest.mark.parametrize("path", PAGES)
def test_a_language_code_with_a_script_is_told_to_the_browser_as_a_language_tag(
        demo_table: int, browser: Any, path: str) -> None:
    page = open_page(browser, demo_table, path, "zh_Hant")
    try:
        assert page.evaluate("() => window.missingWords") == []
        assert "賭桌 DEMO-1" in page.evaluate("() => document.body.innerText")
        tag = page.evaluate("() => document.documentElement.lang")
        assert page.evaluate("(tag) => { try { return Intl.getCanonicalLocales(tag)[0]; }"
                             " catch (e) { return String(e); } }", tag) == "zh-Hant"
        assert page.evaluate("() => document.body.matches(':lang(zh)')")
    finally:
        page.close()


@pytest.mark.parametrize("asked", ["../x", "en;rm", "__proto__", "constructor", "toString",
                                   "FA", "fa-IR", "th%00", "", "zh_Hant/../fa", "x" * 4000])
def test_a_language_asked_that_no_catalogue_has_is_the_tables_own(
        demo_table: int, browser: Any, asked: str) -> None:
    page = open_page(browser, demo_table, "/scoreboard", urllib.parse.quote(asked))
    try:
        assert page.evaluate("() => document.documentElement.lang") == "en"
        assert page.evaluate("() => window.missingWords") == []
        assert "Table DEMO-1" in page.evaluate("() => document.body.innerText")
    finally:
        page.close()


def test_a_browser_that_asks_for_another_language_is_shown_the_tables_own(
        demo_table: int, browser: Any) -> None:
    """Accept-Language is the viewer's browser, not the studio's choice: a stream shows the
    table's language (or the page's ``?lang=``) whatever the browser that opens it."""
    context = browser.new_context(locale="th-TH", viewport={"width": 1920, "height": 1080},
                                  extra_http_headers={"Accept-Language": "th, zh-Hant;q=0.8"})
    try:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{demo_table}/overlay")
        page.wait_for_function("() => document.body.dataset.link === 'live'",
                               timeout=SCREENS_S * 1000)
        assert page.evaluate("() => document.documentElement.lang") == "en"
    finally:
        context.close()


@pytest.mark.parametrize("path", PAGES)
def test_markup_in_a_catalogue_is_shown_as_words_never_run(demo_table: int, browser: Any,
                                                          path: str) -> None:
    page = open_page(browser, demo_table, path, "zzh")
    try:
        assert page.evaluate("() => document.documentElement.lang") == "zzh"
        assert page.evaluate("() => window.pwned") is None
        assert page.evaluate("() => document.querySelectorAll('body img, body script:not([src]),"
                             " body style, body svg[onload]').length") == 0
        assert page.evaluate("() => getComputedStyle(document.body).display") != "none"
        assert "<script>window.pwned=1</script>DEMO-1" in page.evaluate(
            "() => document.body.innerText")
    finally:
        page.close()
