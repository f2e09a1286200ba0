"""The roadmap drawn as one self-contained SVG: a bead plate per Player position, and a legend.

A bead plate is a grid six beads high. Beads fill a column top to bottom, then the next
column to the right, as on a baccarat bead plate; a plate is at least six columns wide (36
rounds, more than an 8-deck shoe holds) and grows when a shoe runs longer. Blue = the Player
won, grey = lost, green = tie; an outer ring marks a flush, a small yellow dot a pair
(docs/roadmap.md). Each bead also carries its letter (W, L, T), so a grey-scale print of a
dispute file still reads.

The SVG has a viewBox and no fixed size, so it scales to whatever holds it. Every bead is a
``<g class="bead">`` with ``data-round``, ``data-position``, ``data-outcome``,
``data-flush`` and ``data-pair``; every text from outside (title, table id) is escaped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html import escape

from controller.table.roadmap import POSITIONS, Bead, Outcome, Roadmap

ROWS = 6
MIN_COLUMNS = 6

CELL = 40  # one bead's square
MARGIN = 24
PAD = 16  # inside a position's panel
GAP = 20  # between panels
TITLE_HEIGHT = 46
HEADER_HEIGHT = 62  # position label and counts above the plate
LEGEND_HEIGHT = 40

FONT = "'DejaVu Sans','Helvetica Neue',Arial,sans-serif"
BACKGROUND = "#f3f5f8"
PANEL = "#ffffff"
PANEL_EDGE = "#d3dae3"
GRID = "#e4e9ef"
INK = "#1d2733"
MUTED = "#5f6b78"
COLOURS: dict[Outcome, str] = {"win": "#1f6fd6", "lose": "#8a949f", "tie": "#1d9a50"}
LETTERS: dict[Outcome, str] = {"win": "W", "lose": "L", "tie": "T"}
WORDS: dict[Outcome, str] = {"win": "wins", "lose": "loses", "tie": "ties"}
PAIR_DOT = "#ffc400"
PAIR_DOT_EDGE = "#9a7400"  # keeps the dot visible on a white cell

BEAD_RADIUS = 0.33 * CELL
RING_RADIUS = 0.45 * CELL
DOT_RADIUS = 0.15 * CELL

# Characters XML 1.0 does not allow at all, escaped or not.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def text(value: object) -> str:
    """Any value as XML character data or attribute text: escaped, forbidden characters as �."""
    return escape(_NOT_XML.sub("\ufffd", str(value)), quote=True)


def num(value: float) -> str:
    """A coordinate without float noise: 12, 12.5, 13.2."""
    return f"{round(value, 2):g}"


def plate_columns(roadmap: Roadmap) -> int:
    rounds = len(roadmap.rounds)
    return max(MIN_COLUMNS, -(-rounds // ROWS))


def render_svg(roadmap: Roadmap, *, title: str | None = None) -> str:
    """The whole scoreboard as SVG text (UTF-8, starts with ``<svg``)."""
    columns = plate_columns(roadmap)
    plate_width = columns * CELL
    panel_width = plate_width + 2 * PAD
    panel_height = HEADER_HEIGHT + ROWS * CELL + PAD
    width = 2 * MARGIN + len(POSITIONS) * panel_width + (len(POSITIONS) - 1) * GAP
    panels_top = MARGIN + TITLE_HEIGHT
    legend_top = panels_top + panel_height + GAP
    height = legend_top + LEGEND_HEIGHT + MARGIN - GAP // 2
    if title is None:
        title = default_title(roadmap)
    caption = rounds_caption(roadmap)
    # the heading must not run into the caption: about 16px a letter at 26px bold, 10 at 18px
    heading_room = (width - 2 * MARGIN - 10 * len(caption) - 40) // 16

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'font-family="{FONT}" role="img" aria-label="{text(title)}" class="roadmap" '
        f'data-shoe="{text(roadmap.shoe if roadmap.shoe is not None else "")}" '
        f'data-rounds="{len(roadmap.rounds)}">',
        f"<title>{text(title)}</title>",
        f'<rect width="{width}" height="{height}" fill="{BACKGROUND}"/>',
        f'<text class="heading" x="{MARGIN}" y="{MARGIN + 26}" font-size="26" '
        f'font-weight="bold" fill="{INK}">{text(shortened(title, heading_room))}</text>',
        f'<text class="caption" x="{width - MARGIN}" y="{MARGIN + 26}" font-size="18" '
        f'fill="{MUTED}" text-anchor="end">{caption}</text>',
    ]
    for index, position in enumerate(POSITIONS):
        left = MARGIN + index * (panel_width + GAP)
        parts.extend(_panel(roadmap, position, left, panels_top, columns))
    parts.extend(_legend(MARGIN, legend_top))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def shortened(words: str, letters: int) -> str:
    """``words`` cut to ``letters`` characters, an ellipsis marking the cut."""
    return words if len(words) <= letters else words[:max(letters - 1, 0)] + "…"


def default_title(roadmap: Roadmap) -> str:
    if roadmap.shoe is None:
        return "Roadmap — no shoe yet"
    table = f" · {roadmap.table}" if roadmap.table else ""
    return f"Roadmap — shoe {roadmap.shoe}{table}"


def rounds_caption(roadmap: Roadmap) -> str:
    rounds = roadmap.rounds
    if not rounds:
        return "no rounds yet"
    if len(rounds) == 1:
        return f"1 round (round {rounds[0]})"
    return f"{len(rounds)} rounds ({rounds[0]}–{rounds[-1]})"  # numbers skip a cancelled round


def _panel(roadmap: Roadmap, position: int, left: int, top: int, columns: int) -> list[str]:
    plate_left = left + PAD
    plate_top = top + HEADER_HEIGHT
    counts = roadmap.counts(position)
    parts = [
        f'<g class="position" data-position="{position}" data-wins="{counts.wins}" '
        f'data-losses="{counts.losses}" data-ties="{counts.ties}" '
        f'data-flushes="{counts.flushes}" data-pairs="{counts.pairs}">',
        f'<rect x="{left}" y="{top}" width="{columns * CELL + 2 * PAD}" '
        f'height="{HEADER_HEIGHT + ROWS * CELL + PAD}" rx="10" fill="{PANEL}" '
        f'stroke="{PANEL_EDGE}"/>',
        f'<text x="{plate_left}" y="{top + 28}" font-size="20" font-weight="bold" '
        f'fill="{INK}">Player {position}</text>',
    ]
    chips = [("win", counts.wins, "wins"), ("lose", counts.losses, "losses"),
             ("tie", counts.ties, "ties"), ("flush", counts.flushes, "flushes"),
             ("pair", counts.pairs, "pairs")]
    chip_width = columns * CELL / len(chips)
    for index, (mark, count, word) in enumerate(chips):
        x = plate_left + index * chip_width + 8
        y = top + 48
        parts.append(f'<g class="count" data-count="{word}"><title>{count} {word}</title>')
        parts.append(_chip_icon(mark, x, y))
        parts.append(f'<text x="{num(x + 12)}" y="{y + 5}" font-size="15" fill="{INK}">'
                     f"{count}</text></g>")
    parts.append(_grid(plate_left, plate_top, columns))
    for index, bead in enumerate(roadmap.beads[position]):
        column, row = divmod(index, ROWS)
        cx = plate_left + column * CELL + CELL / 2
        cy = plate_top + row * CELL + CELL / 2
        parts.append(_bead(bead, position, cx, cy))
    parts.append("</g>")
    return parts


def _grid(left: int, top: int, columns: int) -> str:
    right, bottom = left + columns * CELL, top + ROWS * CELL
    lines = [f"M{left + c * CELL} {top}V{bottom}" for c in range(columns + 1)]
    lines += [f"M{left} {top + r * CELL}H{right}" for r in range(ROWS + 1)]
    return (f'<path d="{"".join(lines)}" stroke="{GRID}" stroke-width="1" fill="none" '
            f'shape-rendering="crispEdges"/>')


def _bead(bead: Bead, position: int, cx: float, cy: float) -> str:
    colour = COLOURS[bead.outcome]
    marks = [mark for mark, on in (("flush", bead.flush), ("pair", bead.pair)) if on]
    caption = f"Round {bead.round}: Player {position} {WORDS[bead.outcome]}" + (
        f" ({', '.join(marks)})" if marks else "")
    parts = [
        f'<g class="bead" data-round="{bead.round}" data-position="{position}" '
        f'data-outcome="{bead.outcome}" data-flush="{str(bead.flush).lower()}" '
        f'data-pair="{str(bead.pair).lower()}"><title>{caption}</title>',
        f'<circle class="bead-body" cx="{num(cx)}" cy="{num(cy)}" r="{num(BEAD_RADIUS)}" '
        f'fill="{colour}"/>',
        f'<text x="{num(cx)}" y="{num(cy + 5)}" font-size="14" font-weight="bold" '
        f'fill="#ffffff" text-anchor="middle">{LETTERS[bead.outcome]}</text>',
    ]
    if bead.flush:
        parts.append(f'<circle class="flush-ring" cx="{num(cx)}" cy="{num(cy)}" '
                     f'r="{num(RING_RADIUS)}" fill="none" stroke="{colour}" '
                     f'stroke-width="2.5"/>')
    if bead.pair:
        parts.append(_pair_dot(cx + 0.28 * CELL, cy + 0.28 * CELL))
    parts.append("</g>")
    return "".join(parts)


def _pair_dot(cx: float, cy: float, radius: float = DOT_RADIUS) -> str:
    return (f'<circle class="pair-dot" cx="{num(cx)}" cy="{num(cy)}" r="{num(radius)}" '
            f'fill="{PAIR_DOT}" stroke="{PAIR_DOT_EDGE}" stroke-width="1.2"/>')


def _chip_icon(mark: str, x: float, y: float) -> str:
    if mark in COLOURS:
        colour = COLOURS[mark]
        return f'<circle cx="{num(x)}" cy="{y}" r="7" fill="{colour}"/>'
    if mark == "flush":
        return (f'<circle cx="{num(x)}" cy="{y}" r="7" fill="none" stroke="{MUTED}" '
                f'stroke-width="2"/>')
    return _pair_dot(x, y, 5.5)


def _legend(left: int, top: int) -> list[str]:
    y = top + 20

    def disc(colour: str) -> Callable[[float], str]:
        return lambda x: f'<circle cx="{num(x)}" cy="{y}" r="9" fill="{colour}"/>'

    def ring(x: float) -> str:
        return (f'<circle cx="{num(x)}" cy="{y}" r="6" fill="{MUTED}"/>'
                f'<circle cx="{num(x)}" cy="{y}" r="10" fill="none" stroke="{MUTED}" '
                f'stroke-width="2"/>')

    items: list[tuple[Callable[[float], str], str]] = [
        (disc(COLOURS["win"]), "Player wins"),
        (disc(COLOURS["lose"]), "Player loses"),
        (disc(COLOURS["tie"]), "Tie"),
        (ring, "Outer ring: flush"),
        (lambda x: _pair_dot(x, y, 6.5), "Yellow dot: pair"),
    ]
    parts = ['<g class="legend">']
    x = left + 10.0
    for icon, label in items:
        parts.append(icon(x))
        parts.append(f'<text x="{num(x + 18)}" y="{y + 6}" font-size="16" fill="{INK}">'
                     f"{label}</text>")
        x += 46 + 7.6 * len(label)  # DejaVu Sans at 16px: about 7.6px a letter
    parts.append(f'<text x="{num(x + 20)}" y="{y + 6}" font-size="15" fill="{MUTED}">'
                 "One bead per round · columns of six fill top to bottom, then left to right"
                 "</text>")
    parts.append("</g>")
    return parts


def main(argv: list[str] | None = None) -> int:
    """``python -m controller.display.roadmap_svg EVENTS|-``: the SVG of the last shoe in a JSON
    Lines file of events (``replay`` output, the file transport's sink) on standard output."""
    import argparse
    import json
    import sys

    from controller.table.roadmap import RoadmapError

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("events", help="JSON Lines of events, or - for standard input")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    source = sys.stdin if args.events == "-" else open(args.events, encoding="utf-8")
    roadmap = Roadmap()
    with source:
        for number, line in enumerate(source, 1):
            if not line.strip():
                continue
            try:
                roadmap.add(json.loads(line))
            except (ValueError, RoadmapError) as exc:
                print(f"{args.events}:{number}: {exc}", file=sys.stderr)
                return 1
    sys.stdout.write(render_svg(roadmap, title=args.title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
