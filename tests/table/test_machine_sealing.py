"""Sealed values, as a property: over random table scripts (pauses, misreads, faults, cards
before and after rounds, cancels, lost shoes), nothing the machine emits, logs at INFO or
above, or shows in status() while a round's betting is open carries a card value scanned or
entered during that window. The same scripts also check schemas, seq and determinism."""

from __future__ import annotations

import json
import logging
import re
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.rules.cards import ALL_CARDS, Card
from controller.table.events import validate_event
from controller.table.generators.scriptgen import ScriptBuilder, shuffled_shoe
from controller.table.inputs import CardScan, Supervisor
from controller.table.machine import MachineSettings, TableMachine

# What can go wrong around a card, and what a supervisor does about it.
DISTURBANCES = (
    "any_card", "misread", "cut_card", "switch_on", "sup_pause", "cancel_round", "sup_cancel",
    "enter_card", "reveal", "start_round", "new_shoe", "end_shoe", "sup_end_shoe", "shoe_off",
    "shoe_on", "panel_off", "card", "tick", "controller_fault",
)
RECOVERIES = ("switch_off", "sup_resume", "enter_card", "shoe_on", "cancel_round", "none")


@st.composite
def table_scripts(draw):
    """A few rounds dealt roughly by the book, with disturbances (and the supervisor's
    answers to them) between the cards, at random card intervals (some after the close)."""
    decks = draw(st.sampled_from([1, 8]))
    table = MachineSettings(
        betting_seconds=draw(st.sampled_from([3.0, 15.0])),
        reveal=draw(st.sampled_from(["auto", "button"])),
        decks=decks,
    )
    shoe = iter(shuffled_shoe(draw(st.integers(0, 2**31)), decks))
    b = ScriptBuilder(step=0.0)

    def next_card() -> Card:
        return next(shoe, None) or draw(st.sampled_from(ALL_CARDS))

    def do(action: str) -> None:
        if action == "card":
            b.card(next_card())
        elif action == "any_card":
            b.card(draw(st.sampled_from(ALL_CARDS)))
        elif action == "enter_card":
            b.supervisor("enter_card", next_card().code)
        elif action == "misread":
            b.misread(*draw(st.sampled_from([(None, None), ("E3", "no tag")])))
        elif action in ("start_round", "reveal", "new_shoe", "end_shoe", "cancel_round"):
            b.button(action)
        elif action.startswith("sup_"):
            b.supervisor(action[4:])
        elif action in ("switch_on", "switch_off"):
            b.switch(action == "switch_on")
        elif action.startswith(("shoe_", "panel_")):
            device, level = action.split("_")
            b.device(device, level == "on")
        elif action == "cut_card":
            b.cut_card()
        elif action == "tick":
            b.tick()
        elif action == "controller_fault":
            b.controller_fault(*draw(st.sampled_from([("journal_unwritable", "disk full"),
                                                      ("clock_jump", "clock jumped")])))

    def maybe_disturb() -> None:
        if draw(st.integers(0, 7)) == 0:
            do(draw(st.sampled_from(DISTURBANCES)))
            b.wait(draw(st.integers(0, 40)) / 10)
            do(draw(st.sampled_from(RECOVERIES)))

    b.button("new_shoe")
    flip = next_card()
    b.wait(1)
    b.card(flip)
    for _ in range(flip.burn_value):
        b.wait(0.5)
        b.card(next_card())
    for _ in range(draw(st.integers(1, 5))):
        b.wait(draw(st.integers(0, 30)) / 10)
        maybe_disturb()
        b.button("start_round")
        for _ in range(13):
            b.wait(draw(st.integers(0, 25)) / 10)
            maybe_disturb()
            b.card(next_card())
        b.tick(b.t + table.betting_seconds)
        maybe_disturb()
        for _ in range(6):
            b.wait(0.5)
            b.button("reveal")
    return table, b.inputs


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def info_logs():
    root = logging.getLogger()
    handler, level = _Collect(), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def leaks(text: str, cards: set[Card]) -> list[str]:
    found = []
    for card in cards:
        if (re.search(rf"(?<![A-Za-z0-9]){card.code}(?![A-Za-z0-9])", text)
                or card.display() in text):
            found.append(card.code)
    return found


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_scripts())
def test_no_card_value_leaves_the_table_before_betting_closed(case) -> None:
    table, inputs = case
    machine = TableMachine(table)
    window_open = False
    sealed_cards: set[Card] = set()
    window_texts: list[str] = []  # everything said while the current window is open
    windows = 0
    all_events = []
    with info_logs() as logs:
        for inp in inputs:
            logs.messages.clear()
            if (window_open and isinstance(inp, (CardScan, Supervisor))
                    and getattr(inp, "card", None)):
                sealed_cards.add(inp.card)
            events = machine.handle(inp)
            all_events.extend(events)
            for event in events:
                if window_open and event["type"] in ("betting_closed", "round_cancelled"):
                    window_open = False
                    assert not leaks("\n".join(window_texts), sealed_cards), window_texts
                    window_texts, sealed_cards = [], set()
                if window_open:
                    window_texts.append(json.dumps(event, ensure_ascii=False))
                if event["type"] == "round_opened":
                    window_open, windows = True, windows + 1
            if window_open:
                window_texts.extend(logs.messages)
                window_texts.append(json.dumps(machine.status(), ensure_ascii=False))
        if window_open:
            assert not leaks("\n".join(window_texts), sealed_cards), window_texts

    assert [e["seq"] for e in all_events] == list(range(1, len(all_events) + 1))
    for event in all_events:
        validate_event(event)
        if event["type"] == "card_dealt":
            assert set(event["data"]) <= {"index", "target", "entered"}
    again = TableMachine(table)
    assert [e for inp in inputs for e in again.handle(inp)] == all_events


def test_the_leak_check_finds_a_leak() -> None:
    """The property's detector must be able to fail."""
    cards = {Card("T", "H"), Card("A", "S")}
    assert leaks('{"reason": "10♥ came out"}', cards) == ["TH"]
    assert leaks('{"cards": ["AS"]}', cards) == ["AS"]
    assert leaks('{"reason": "the key switch is at PAUSE; a card"}', cards) == []
