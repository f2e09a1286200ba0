"""The one rule by which a benchmark says whether a goal held: a ratio against its A/A floor.

A ratio goal ("the daemon's p50 at most x1.3 the relay's") is measured as alternated pairs
in one run: in each pair the thing measured (B), its yardstick (A) and a second copy of the
yardstick (A'). Each pair gives a ratio B/A, and an A/A ratio A'/A: the yardstick against
itself, 1 on a machine without noise. The **floor** is the spread of the A/A ratios, their
lowest to their highest, each taken both ways (A'/A and A/A': which copy came out faster is
chance, so a yardstick at x0.06 of itself is noise of x16 too): how far one pair's ratio
strays from the truth on this machine, in this run, through noise alone.

The **ratio** is the median of the pairs' B/A. A ratio measured is the true one times the
machine's noise, and the floor is how far that noise went in this run, so the true ratio lies
between ``ratio / high`` and ``ratio / low``: the **band** (the floor widened to hold x1, so
the band always holds the measured ratio itself). Then:

* ``met``: the whole band is at or under the goal;
* ``not met``: the whole band is over the goal;
* ``cannot tell on this machine``: the goal lies inside the band: the machine's own noise is
  as large as the margin between the ratio and the goal.

The band is that of one pair while the ratio is a median of several, so the rule errs towards
"cannot tell": it says met or not met only where noise of a single pair could not have
turned it. Two more rules keep one stray pair from deciding:

* fewer than ``MIN_PAIRS`` pairs give no word but "cannot tell": one or two A/A ratios that
  happen to come out x1.00 are no measure of a machine's noise;
* the floor leaves out the A/A pairs farthest from x1, one for every four pairs beyond the
  first (none of 3 or 4, one of 5 to 8, two of 9 to 12): the ratio is a median, which one
  stalled pair in five does not move, so the floor it is read against must not be widened by
  that one stall either.

Figures that are no latency (zero, negative, NaN, infinite: a run that timed nothing) are
refused with an error naming them, never turned into a word.

A count goal ("no card over 20 ms") is judged against the yardstick's own count in the same
run, each count with the cards it was taken over: none over is ``met``; some over while the
yardstick had none is ``not met`` (the machine showed it can deal without one). Some over while
the yardstick (same machine, no load) had some too means the machine makes slow cards of its
own; then only a clear rise says ``not met``: the chance of seeing as many as were seen, were
they slow at the yardstick's rate, is under 1 % (a Poisson tail, the yardstick's count taken
one higher so that a rate measured from one or two cards is not trusted as exact). Any other
count is ``cannot tell on this machine``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MET, NOT_MET, CANNOT_TELL = "met", "not met", "cannot tell on this machine"
#: fewer pairs than this say "cannot tell": too few A/A ratios to know the machine's noise
MIN_PAIRS = 3
#: a rise in slow cards is "not met" when the yardstick's rate gives it less than this chance
COUNT_CHANCE = 0.01


def _positive(values: Sequence[float], what: str) -> None:
    """Refuse figures a timing cannot give: min()/max() would drop a NaN, a zero divides."""
    bad = [v for v in values if not (math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"{what} of zero or less, NaN or infinite: {bad} in {list(values)}")


def outliers(pairs: int) -> int:
    """How many A/A pairs the floor leaves out: one for every four pairs beyond the first."""
    return max(0, (pairs - 1) // 4)


@dataclass(frozen=True)
class Floor:
    """The A/A ratios' spread, widened to hold x1, and symmetric: which copy of the yardstick
    is A and which A' is chance, so an A'/A of x0.5 is noise of x2 as much as of x0.5."""
    low: float
    high: float

    @classmethod
    def of(cls, aa_ratios: Sequence[float]) -> Floor:
        if not aa_ratios:
            raise ValueError("an A/A floor needs at least one A/A pair")
        _positive(aa_ratios, "an A/A ratio")
        kept = sorted(aa_ratios, key=lambda r: abs(math.log(r)))[:len(aa_ratios) - outliers(
            len(aa_ratios))]
        both_ways = [*kept, *(1 / r for r in kept)]
        return cls(min(1.0, *both_ways), max(1.0, *both_ways))

    def text(self) -> str:
        return f"x{self.low:.2f}-{self.high:.2f}"


@dataclass(frozen=True)
class Judgement:
    """A ratio goal judged: the median pair ratio, the floor it is read against, the word."""
    ratio: float
    ratios: tuple[float, ...]
    floor: Floor
    goal: float
    word: str

    def text(self) -> str:
        """``goal <= x1.3: met (A/A floor x0.84-1.21; pairs x1.02, …)``: the note of a row."""
        few = f"; fewer than {MIN_PAIRS} pairs give no word" if len(self.ratios) < MIN_PAIRS \
            else ""
        return (f"goal <= x{self.goal:g}: {self.word} (A/A floor {self.floor.text()}; "
                f"{len(self.ratios)} pairs x" + ", x".join(f"{r:.2f}" for r in self.ratios)
                + few + ")")


def pair_ratios(measured: Sequence[float], yardstick: Sequence[float]) -> list[float]:
    """Each pair's measured / yardstick figure, pair by pair."""
    if len(measured) != len(yardstick) or not measured:
        raise ValueError(f"pairs: {len(measured)} measured against {len(yardstick)} yardstick "
                         f"figures; both need the same number, at least one")
    _positive(measured, "a measured figure")
    _positive(yardstick, "a yardstick figure")
    return [m / y for m, y in zip(measured, yardstick)]


def judge_ratio(ratios: Sequence[float], aa_ratios: Sequence[float], goal: float) -> Judgement:
    """The median of ``ratios`` against ``goal``, read with the floor of ``aa_ratios``."""
    if not ratios:
        raise ValueError("a ratio goal needs at least one pair")
    _positive(ratios, "a pair ratio")
    floor = Floor.of(aa_ratios)
    ratio = statistics.median(ratios)
    if min(len(ratios), len(aa_ratios)) < MIN_PAIRS:
        word = CANNOT_TELL
    elif ratio / floor.low <= goal:
        word = MET
    elif ratio / floor.high > goal:
        word = NOT_MET
    else:
        word = CANNOT_TELL
    return Judgement(ratio, tuple(ratios), floor, goal, word)


def judge_count(over: int, cards: int, yardstick_over: int, yardstick_cards: int) -> str:
    """A "none over" goal: ``over`` of ``cards`` past the limit, against the yardstick's
    ``yardstick_over`` of ``yardstick_cards`` in the same run."""
    for name, value in (("cards", cards), ("yardstick cards", yardstick_cards)):
        if value <= 0:
            raise ValueError(f"a count goal over {value} {name}: a run that dealt nothing")
    for name, count, of in (("over", over, cards), ("yardstick over", yardstick_over,
                                                    yardstick_cards)):
        if not 0 <= count <= of:
            raise ValueError(f"{name} = {count} of {of} cards: a count of 0 to {of}")
    if over == 0:
        return MET
    if yardstick_over == 0:
        return NOT_MET
    expected = (yardstick_over + 1) * cards / yardstick_cards
    return NOT_MET if poisson_tail(over, expected) < COUNT_CHANCE else CANNOT_TELL


def poisson_tail(k: int, mean: float) -> float:
    """The chance of ``k`` or more events where ``mean`` are expected (Poisson)."""
    term = math.exp(-mean)
    below = 0.0
    for i in range(k):
        below += term
        term *= mean / (i + 1)
    return max(0.0, 1.0 - below)
