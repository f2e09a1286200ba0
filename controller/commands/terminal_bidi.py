"""Right-to-left words (Persian) for a terminal.

A terminal lays characters out left to right as they come and draws each Arabic-script letter
in its isolated form, so text in logical (typing) order reads backwards and unjoined. For a
terminal, each line is shaped (arabic-reshaper: each letter in its joined form) and put in
visual order (python-bidi: the Unicode bidirectional algorithm, numbers and Latin words kept
left to right inside the line). A log, a pipe or a program that lays out text itself gets the
logical order: what it stores or shows next is then still the words as typed.
"""

from __future__ import annotations

from collections.abc import Iterable


def visual_lines(lines: Iterable[str]) -> list[str]:
    """Each line shaped and in the order a left-to-right terminal shows it as it reads."""
    import arabic_reshaper
    from bidi import get_display

    return [get_display(arabic_reshaper.reshape(line)) for line in lines]
