"""The overlay's transparency in the mixers' browsers: OBS Studio's browser source renders
with Chromium 103 up to OBS 30 (obsproject/obs-studio#6867, #10020), CasparCG's HTML producer
with an embedded Chromium of its own release. A selector those do not read (``:has()``,
Chromium 105) drops its whole rule there, and a page made transparent only by one is the
opaque page colour over the programme. Read in Chromium from a real display server fed by a
real table machine (testkit/players_table.py).
"""

from __future__ import annotations

from typing import Any

from testkit.players_table import MachineTable

CHROMIUM = "/usr/bin/chromium"

#: the rules that paint the root element (the canvas) transparent, by their selectors
_ROOT_TRANSPARENT = """() => {
  const found = [];
  for (const sheet of document.styleSheets) {
    for (const rule of sheet.cssRules) {
      if (!rule.selectorText || !rule.style) continue;
      const bg = rule.style.getPropertyValue('background')
        || rule.style.getPropertyValue('background-color');
      if (bg !== 'transparent' && bg !== 'rgba(0, 0, 0, 0)') continue;
      if (document.documentElement.matches(rule.selectorText)) found.push(rule.selectorText);
    }
  }
  return found;
}"""


def test_the_overlay_is_transparent_without_selectors_newer_than_the_mixers() -> None:
    from playwright.sync_api import sync_playwright

    with MachineTable() as table, sync_playwright() as playwright:
        for state in table.states():
            if state == "result":
                break
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page: Any = browser.new_page(viewport={"width": 1920, "height": 1080})
            page.goto(f"http://127.0.0.1:{table.port}/overlay")
            page.wait_for_function("() => document.body.dataset.link === 'live'")
            assert page.evaluate(
                "() => getComputedStyle(document.documentElement).backgroundColor"
            ) == "rgba(0, 0, 0, 0)"
            selectors = page.evaluate(_ROOT_TRANSPARENT)
            assert [s for s in selectors if ":has(" not in s], selectors
        finally:
            browser.close()
