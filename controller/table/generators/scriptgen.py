"""Whole-shoe table scripts for tests, soak runs, simulators and benchmarks.

``shoe_script(seed)`` shuffles an N-deck shoe with ``random.Random(seed)``, places the cut card
about ``cut_depth`` of the way in, and plays it the way a dealer would: new_shoe, the flip
card and its burns, then rounds (start_round, 1 burn + 12 cards, the countdown's tick,
``reveal`` presses on a button-reveal table) until the round in which the cut card came out.
Cards come at random intervals, so some rounds finish dealing after betting closed.
Same seed, same script.

    python -m controller.table.generators.scriptgen --seed 7 > shoe7.jsonl
"""

from __future__ import annotations

import argparse
import random
import sys

from controller.rules.cards import Card, new_shoe_cards, parse_card
from controller.table.inputs import (
    Actor,
    Button,
    CardScan,
    ControllerFault,
    CutCard,
    DeviceStatus,
    Input,
    Misread,
    Supervisor,
    Switch,
    Tick,
    write_script,
)

CARDS_PER_ROUND = 13
HANDS = 6


def shuffled_shoe(seed: int, decks: int = 8) -> list[Card]:
    cards = new_shoe_cards(decks)
    random.Random(seed).shuffle(cards)
    return cards


def shoe_script(
    seed: int,
    decks: int = 8,
    betting_seconds: float = 15.0,
    reveal: str = "auto",
    cut_depth: float = 0.75,
    start_at: float = 0.0,
    late_cards: bool = True,
) -> list[Input]:
    """The inputs of one whole shoe played to its end (see the module text)."""
    rng = random.Random(seed)
    cards = new_shoe_cards(decks)
    rng.shuffle(cards)
    cut_index = max(1, min(len(cards) - 1, round(len(cards) * cut_depth)))
    script: list[Input] = []
    t = round(start_at, 3)
    position = 0
    cut_drawn = False

    def step(seconds: float) -> float:
        nonlocal t
        t = round(t + seconds, 3)
        return t

    def draw() -> Card:
        nonlocal position, cut_drawn
        if position == cut_index and not cut_drawn:
            # The cut card sits in front of this card: it comes out first.
            script.append(CutCard(t))
            cut_drawn = True
            step(0.3)
        card = cards[position]
        position += 1
        script.append(CardScan(t, card))
        return card

    script.append(Button(t, "new_shoe"))
    step(2.0)
    flip = draw()
    for _ in range(flip.burn_value):
        step(0.8)
        draw()
    step(2.0)
    last_round = cut_drawn
    while True:
        if len(cards) - position < CARDS_PER_ROUND:
            script.append(Button(t, "end_shoe"))  # cut card placed too deep for one more round
            break
        script.append(Button(t, "start_round"))
        closes_at = t + betting_seconds
        for _ in range(CARDS_PER_ROUND):
            step(rng.uniform(0.3, 1.6) if late_cards else 0.4)
            draw()
        last_round = last_round or cut_drawn
        if t < closes_at:
            # Not rounded: 115.165 + 15.0 is 130.16500000000002, and a tick at 130.165 would
            # come before the deadline and close nothing.
            t = closes_at
            script.append(Tick(t))  # the daemon posts this tick at the deadline
        if reveal == "button":
            for _ in range(HANDS):
                step(1.0)
                script.append(Button(t, "reveal"))
        step(3.0)
        if last_round:
            break
        if position == cut_index and not cut_drawn:
            script.append(CutCard(t))  # between rounds: the next round is the last
            cut_drawn = last_round = True
            step(1.0)
    return script


class ScriptBuilder:
    """Writes a table script by hand with a clock that moves ``step`` seconds per input.

    Each method appends one input and returns it, so a test can feed it straight to
    ``TableMachine.handle`` and look at the events that input caused::

        b = ScriptBuilder()
        machine.handle(b.button("new_shoe"))
        machine.handle(b.card("3H"))
    """

    def __init__(self, start_at: float = 0.0, step: float = 0.5):
        self.t = start_at
        self.step = step
        self.inputs: list[Input] = []

    def _add(self, inp: Input) -> Input:
        self.inputs.append(inp)
        self.t = round(self.t + self.step, 6)
        return inp

    def wait(self, seconds: float) -> None:
        self.t = round(self.t + seconds, 6)

    def at(self, t: float) -> None:
        """Move the clock to ``t`` (never backwards)."""
        self.t = max(self.t, t)

    def button(self, name: str) -> Input:
        return self._add(Button(self.t, name))

    def card(self, code: str | Card) -> Input:
        return self._add(CardScan(self.t, parse_card(code)))

    def cut_card(self) -> Input:
        return self._add(CutCard(self.t))

    def misread(self, code: str | None = None, reason: str | None = None) -> Input:
        return self._add(Misread(self.t, code, reason))

    def switch(self, on: bool) -> Input:
        return self._add(Switch(self.t, "pause", on))

    def device(self, name: str, connected: bool) -> Input:
        return self._add(DeviceStatus(self.t, name, connected))

    def supervisor(self, action: str, card: str | None = None, by: Actor | None = None) -> Input:
        return self._add(Supervisor(self.t, action, parse_card(card) if card else None, by))

    def controller_fault(self, code: str, reason: str) -> Input:
        return self._add(ControllerFault(self.t, code, reason))

    def tick(self, at: float | None = None) -> Input:
        if at is not None:
            self.at(at)
        return self._add(Tick(self.t))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print a whole-shoe table script (JSON Lines).")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--decks", type=int, default=8)
    parser.add_argument("--betting-seconds", type=float, default=15.0)
    parser.add_argument("--reveal", choices=("auto", "button"), default="auto")
    parser.add_argument("--cut-depth", type=float, default=0.75)
    args = parser.parse_args(argv)
    write_script(
        shoe_script(args.seed, args.decks, args.betting_seconds, args.reveal, args.cut_depth),
        sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
