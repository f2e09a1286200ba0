"""Fuzzing the panel parsers: the line parser and splitter, the HID report decoder, the debouncer.

Each parser gets hypothesis-generated inputs (shrinking finds the smallest failing case) and a
seeded stream of at least 100,000 random inputs (cheap, so the volume fits in CI time). No
exception escapes but the parser's own error.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.table.inputs import BUTTONS
from drivers.debounce import Debouncer, RepeatGuard
from drivers.hid_panel import PAUSE_CHANNEL, ReportError, ReportLayout
from drivers.line_panel import (
    MAX_LINE,
    ButtonLine,
    LineSplitter,
    PanelLineError,
    SwitchLine,
    parse_panel_line,
)

STREAM_INPUTS = 100_000
VOCABULARY = [b"switch", b"pause", b"on", b"off", b"#", b" ", b"\t", b"\r", b"\n", b"\xff",
              b"led", b"status?"] + [name.encode() for name in BUTTONS]

LAYOUTS = [
    ReportLayout(buttons=dict(zip(BUTTONS, range(5))), pause_bit=7),
    ReportLayout(buttons={"reveal": 15, "new_shoe": 0}, pause_bit=8, pause_active_low=True,
                 report_id=2),
    ReportLayout(buttons={"start_round": 511}),
]


def check_line(raw: bytes) -> None:
    try:
        result = parse_panel_line(raw)
    except PanelLineError:
        return
    assert result is None or isinstance(result, (ButtonLine, SwitchLine))
    if isinstance(result, ButtonLine):
        assert result.name in BUTTONS


def check_report(layout: ReportLayout, report: bytes) -> None:
    try:
        levels = layout.decode(report)
    except ReportError:
        return
    assert set(levels) == set(layout.buttons) | ({PAUSE_CHANNEL} if layout.pause_bit is not None
                                                 else set())
    body = report[1:] if layout.report_id is not None else report
    for name, bit in layout.buttons.items():
        assert levels[name] == bool(body[bit // 8] >> (bit % 8) & 1)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.binary(max_size=80) | st.lists(st.sampled_from(VOCABULARY), max_size=8).map(b"".join))
def test_line_parser_raises_only_its_own_error(raw):
    check_line(raw)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(st.lists(st.binary(max_size=100) | st.sampled_from(VOCABULARY), max_size=20))
def test_splitter_gives_bounded_complete_lines_whatever_the_chunking(chunks):
    splitter = LineSplitter()
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    whole = b"".join(chunks)
    assert all(b"\n" not in line and len(line) <= MAX_LINE for line in lines)
    # the same bytes in one piece give the same lines: framing does not depend on chunking
    assert LineSplitter().feed(whole) == lines
    short_lines = [p.rstrip(b"\r") for p in whole.split(b"\n")[:-1] if len(p) <= MAX_LINE]
    assert lines == short_lines


@pytest.mark.slow
@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(LAYOUTS), st.binary(max_size=70))
def test_report_decoder_raises_only_its_own_error(layout, report):
    check_report(layout, report)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(st.floats(0, 0.1), st.lists(st.tuples(st.floats(0, 0.05), st.booleans()), max_size=40))
def test_debouncer_confirms_only_levels_that_held(debounce_s, samples):
    debouncer = Debouncer(debounce_s)
    debouncer.reset({"b": False})
    now, confirmed, history = 0.0, [], []  # confirmed: (time, level, samples fed so far)
    for gap, level in samples:
        now += gap
        confirmed += [(now, lv, len(history)) for _, lv in debouncer.poll(now)]
        debouncer.feed(now, {"b": level})
        history.append((now, level))
        confirmed += [(now, lv, len(history)) for _, lv in debouncer.poll(now)]
    levels = [lv for _, lv, _ in confirmed]
    assert all(a != b for a, b in zip(levels, levels[1:]))  # changes alternate
    assert not levels or levels[0] is True
    for at, level, fed in confirmed:  # the raw level had been that since >= debounce_s ago
        run_start = None
        for t, lv in reversed(history[:fed]):
            if lv != level:
                break
            run_start = t
        assert run_start is not None and at - run_start >= debounce_s


def test_repeat_guard_window():
    guard = RepeatGuard(0.05)
    assert guard.accept("reveal", 1.0) and not guard.accept("reveal", 1.04)
    assert guard.accept("new_shoe", 1.04) and guard.accept("reveal", 1.06)


def test_a_random_stream_of_lines_and_reports():
    rng = random.Random(20261129)
    splitter = LineSplitter()
    for _ in range(STREAM_INPUTS):
        if rng.random() < 0.5:
            raw = bytes(rng.getrandbits(8) for _ in range(rng.randrange(12)))
        else:
            raw = b"".join(rng.choice(VOCABULARY) for _ in range(rng.randrange(5)))
        check_line(raw)
        for line in splitter.feed(raw):
            check_line(line)
    for _ in range(STREAM_INPUTS):
        report = rng.getrandbits(8 * 4).to_bytes(4, "little")[:rng.randrange(5)]
        check_report(LAYOUTS[rng.randrange(2)], report)
