"""A language an operator adds, on both pages in a real browser: a pseudo-language catalogue
(``qps``: bracketed, accented, a fifth longer) in a locales directory the demo table's
environment names, Chromium asking for ``?lang=qps``. Every word comes from that file (no
⟦key⟧, no English word left), every page still fits its monitor with the longer words, and
no card of a round open for betting is on either page."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_display_browser import CHROMIUM, DemoTable, launched_browser
from test_display_languages import (
    LEGIBLE_PX,
    MEASURE,
    PAGES,
    VIEWPORTS,
    _up,
    _watch_a_round_sealed,
    drawn,
    url,
)

from controller.display import catalogues, words
from support.pseudo_locale import CODE, pseudo_words, write_catalogue
from support.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason=f"{CHROMIUM} is missing (apt-get install chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


@pytest.fixture(scope="module")
def table() -> Iterator[DemoTable]:
    root = Path(tempfile.mkdtemp(prefix="qps-", dir="/tmp"))
    write_catalogue(root / "locales")
    demo = DemoTable(root, env={catalogues.ENV: str(root / "locales")})
    demo.start()
    wait_until(lambda: _up(demo), 60, "the display to answer")
    yield demo
    demo.kill()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launched_browser()


def english_words(text: str) -> list[str]:
    """English words of the catalogue (five letters or more) still on the page."""
    plain = (english.split("{")[0].strip(" :…") for english in words.EN.values())
    return sorted({p for p in plain if len(p) >= 5 and p in text})


@pytest.mark.parametrize("which", sorted(PAGES))
def test_both_pages_speak_the_added_language_and_fit(table: DemoTable, browser: Any,
                                                      which: str) -> None:
    wait_until(lambda: len(table.results()) >= 1, 90, "a round result")
    own = {key: text for key, text in pseudo_words().items()
           if text.startswith("[") and "{" not in text}
    for width, height in VIEWPORTS:
        page = browser.new_page(viewport={"width": width, "height": height})
        try:
            page.goto(url(table, which, CODE))
            wait_until(lambda page=page: drawn(page), 30, f"the {which} page drawn in qps")
            seen = page.evaluate(MEASURE, [LEGIBLE_PX * min(width, height) / 1080])
            where = f"{which} in qps at {width}x{height}"
            assert seen["lang"] == CODE and seen["dir"] == "ltr", where
            assert not seen["missing"] and "\u27e6" not in seen["text"], (where, seen["missing"])
            said = [t for t in own.values() if t.lower() in seen["text"].lower()]
            assert len(said) >= 3, (where, said)  # the file's words (some shown upper-case)
            assert not english_words(seen["text"]), (where, english_words(seen["text"]))
            assert not seen["problems"], (where, seen["problems"][:8])
        finally:
            page.close()


def test_no_card_of_a_round_open_for_betting_on_the_added_languages_pages(
        table: DemoTable, browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    try:
        _watch_a_round_sealed(table, context, (CODE,))
    finally:
        context.close()
