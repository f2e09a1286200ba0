"""The legibility rule measured in a page (docs/display.md "Legible from 2 m"): every text a
screen shows at least 28 px of a 1080-line screen, the same share of any other.

``TEXT_SIZES`` is a script for Playwright's ``page.evaluate``: every element with visible text
of its own, as [tag.class, its text, its size in px of the window]: the page's scale to the
window applied, and an SVG text (a bead's letter) scaled by its drawing's viewBox as well.
"""

from __future__ import annotations

from typing import Any

#: the smallest text a dealer or player must read from 2 m, in px of a 1080-line screen
LEGIBLE_PX = 28

TEXT_SIZES = """() => {
  const scale = Number(document.body.dataset.scale);
  const found = [];
  for (const e of document.body.querySelectorAll('*')) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own) continue;
    const style = getComputedStyle(e);
    if (style.visibility === 'hidden' || e.getClientRects().length === 0) continue;
    let px = parseFloat(style.fontSize) * scale;
    const svg = e.ownerSVGElement;
    if (svg) px = parseFloat(style.fontSize)
      * svg.getBoundingClientRect().height / svg.viewBox.baseVal.height;
    found.push([e.tagName.toLowerCase() + '.' + (e.getAttribute('class') || ''),
                e.textContent.trim().slice(0, 30), px]);
  }
  return found;
}"""


def legible_px(width: int, height: int) -> float:
    """The rule's size on a window of ``width`` x ``height`` (its shorter side: 1080 lines)."""
    return LEGIBLE_PX * min(width, height) / 1080


def too_small(page: Any, legible: float) -> list[list[Any]]:
    """Each text on ``page`` under ``legible`` px (1 % for rounding), as TEXT_SIZES lists it."""
    return [t for t in page.evaluate(TEXT_SIZES) if t[2] < legible * 0.99]
