"""The roadmap as terminal text: the same bead plates as the SVG, one position under another.

Each bead is a cell four characters wide: its letter (W win, L lose, T tie), in brackets when
the Player hand was a flush (the outer ring), then ``p`` when it was a pair (the yellow dot):
`` W  ``, ``(W) ``, `` Wp ``, ``(W)p``. Columns of six fill top to bottom, then left to right,
like the SVG. With ``colour`` the letter sits on its bead colour (blue, grey, green) and the
pair mark is a yellow dot; without it the text is plain ASCII, for a file or a pipe.
"""

from __future__ import annotations

import re

from controller.display.roadmap_svg import ROWS, default_title, plate_columns, rounds_caption
from controller.table.roadmap import POSITIONS, Bead, Outcome, Roadmap

LETTERS: dict[Outcome, str] = {"win": "W", "lose": "L", "tie": "T"}
BACKGROUNDS: dict[Outcome, str] = {"win": "44", "lose": "100", "tie": "42"}  # ANSI SGR
RESET = "\x1b[0m"
DIM = "\x1b[2m"
YELLOW = "\x1b[93m"
# C0 and C1 control characters: a table id or title must not drive the terminal
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
LEGEND = ("W Player wins, L Player loses, T tie; (X) outer ring = flush; p yellow dot = pair. "
          "Columns of six fill top to bottom, then left to right.")


def bead_cell(bead: Bead | None, colour: bool) -> str:
    """One cell, four characters wide on screen."""
    if bead is None:
        return f"{DIM} ·  {RESET}" if colour else " .  "
    letter = LETTERS[bead.outcome]
    face = f"({letter})" if bead.flush else f" {letter} "
    if not colour:
        return face + ("p" if bead.pair else " ")
    pair = f"{YELLOW}●{RESET}" if bead.pair else " "
    return f"\x1b[1;97;{BACKGROUNDS[bead.outcome]}m{face}{RESET}{pair}"


def render_text(roadmap: Roadmap, *, colour: bool = False, title: str | None = None) -> str:
    """The whole roadmap as lines of text, ending in a newline."""
    columns = plate_columns(roadmap)
    heading = _CONTROL.sub("?", title or default_title(roadmap))
    lines = [f"{heading} · {rounds_caption(roadmap)}", ""]
    for position in POSITIONS:
        counts = roadmap.counts(position)
        lines.append(f"Player {position}   wins {counts.wins}  losses {counts.losses}  "
                     f"ties {counts.ties}  flushes {counts.flushes}  pairs {counts.pairs}")
        beads = roadmap.beads[position]
        for row in range(ROWS):
            cells = []
            for column in range(columns):
                index = column * ROWS + row
                cells.append(bead_cell(beads[index] if index < len(beads) else None, colour))
            lines.append("  " + "".join(cells).rstrip())
        lines.append("")
    lines.append(LEGEND)
    return "\n".join(lines) + "\n"
