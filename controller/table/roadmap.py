"""The roadmap of a shoe: one bead per round for each Player position (docs/roadmap.md).

Built only from published events, and only from two of them: ``shoe_started`` (a new shoe
starts fresh plates) and ``round_result`` (one bead per position, exactly as the event's
``positions.PN.bead`` says; the rules are not worked out again here). Every other event is
ignored. ``round_result`` comes after betting closed, so nothing the roadmap holds is sealed.

Events are applied in ``seq`` order: an event whose ``seq`` is not above the last one applied
is a duplicate (at-least-once delivery, or history followed by the live feed) and changes
nothing. A ``round_result`` that lacks a field the roadmap needs is refused with a
``RoadmapError`` naming the event's ``seq`` and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, cast

Outcome = Literal["win", "lose", "tie"]
OUTCOMES: tuple[Outcome, ...] = ("win", "lose", "tie")
POSITIONS = (1, 2, 3, 4, 5)


class RoadmapError(ValueError):
    """A ``round_result`` the roadmap cannot use; names the event's seq and the field."""


@dataclass(frozen=True, slots=True)
class Bead:
    """One round at one Player position: blue win / grey lose / green tie, ring, dot."""

    round: int
    outcome: Outcome  # from the Player's view
    flush: bool  # outer ring: the Player hand is a flush
    pair: bool  # yellow dot: the Player hand is a pair

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "outcome": self.outcome,
                "flush": self.flush, "pair": self.pair}


class Counts(NamedTuple):
    wins: int
    losses: int
    ties: int
    flushes: int
    pairs: int


class Roadmap:
    """The bead plates of one shoe, fed event by event (``add``) or all at once."""

    def __init__(self, shoe: int | None = None, table: str | None = None) -> None:
        self.shoe = shoe  # None until a shoe_started or round_result names one
        self.table = table
        self._beads: dict[int, list[Bead]] = {position: [] for position in POSITIONS}
        self._last_seq: int | None = None

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]]) -> Roadmap:
        """The roadmap after every event in order: the last shoe's plates."""
        roadmap = cls()
        for event in events:
            roadmap.add(event)
        return roadmap

    @property
    def beads(self) -> dict[int, tuple[Bead, ...]]:
        """Position (1..5) -> its beads, oldest round first."""
        return {position: tuple(beads) for position, beads in self._beads.items()}

    @property
    def rounds(self) -> tuple[int, ...]:
        """The round numbers on the plates, in order (a cancelled round has no bead)."""
        return tuple(bead.round for bead in self._beads[POSITIONS[0]])

    def counts(self, position: int) -> Counts:
        beads = self._beads[_position(position)]
        return Counts(
            wins=sum(bead.outcome == "win" for bead in beads),
            losses=sum(bead.outcome == "lose" for bead in beads),
            ties=sum(bead.outcome == "tie" for bead in beads),
            flushes=sum(bead.flush for bead in beads),
            pairs=sum(bead.pair for bead in beads),
        )

    def add(self, event: Mapping[str, Any]) -> bool:
        """Apply one event; True when the roadmap changed (a new shoe, or a round's beads)."""
        kind = event.get("type") if isinstance(event, Mapping) else None
        if kind not in ("shoe_started", "round_result"):
            return False
        seq = _whole(event.get("seq"), f"{kind} event without a whole-number seq", minimum=0)
        if self._last_seq is not None and seq <= self._last_seq:
            return False  # already applied
        where = f"{kind} seq {seq}"
        shoe = _whole(event.get("shoe"), f"{where}: shoe is not a shoe number", minimum=1)
        table = event.get("table")
        if kind == "shoe_started":
            self._start(shoe, table)
            self._last_seq = seq
            return True
        changed_shoe = shoe != self.shoe
        round_number = _whole(event.get("round"), f"{where}: round is not a round number",
                              minimum=1)
        if not changed_shoe and self.rounds and round_number <= self.rounds[-1]:
            raise RoadmapError(f"{where}: round {round_number} of shoe {shoe} is already on "
                               f"the roadmap (last round {self.rounds[-1]})")
        new_beads = _beads_of(event, where, round_number)
        if changed_shoe:  # a round of a shoe whose shoe_started we did not see
            self._start(shoe, table)
        elif self.table is None and isinstance(table, str):
            self.table = table
        for position, bead in new_beads.items():
            self._beads[position].append(bead)
        self._last_seq = seq
        return True

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: the shoe, the rounds, and per position its counts and beads."""
        return {
            "shoe": self.shoe,
            "table": self.table,
            "rounds": len(self.rounds),
            "positions": {
                f"P{position}": {
                    "counts": self.counts(position)._asdict(),
                    "beads": [bead.to_json() for bead in beads],
                }
                for position, beads in self._beads.items()
            },
        }

    def _start(self, shoe: int, table: object) -> None:
        self.shoe = shoe
        if isinstance(table, str):
            self.table = table
        for beads in self._beads.values():
            beads.clear()


def _position(position: int) -> int:
    if position not in POSITIONS:
        raise ValueError(f"position must be 1..5, got {position!r}")
    return position


def _whole(value: object, message: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RoadmapError(f"{message} ({value!r})")
    return value


def _beads_of(event: Mapping[str, Any], where: str, round_number: int) -> dict[int, Bead]:
    """The five beads of a round_result, checked field by field before any is used."""
    data = event.get("data")
    if not isinstance(data, Mapping):
        raise RoadmapError(f"{where}: data is missing or not an object")
    positions = data.get("positions")
    if not isinstance(positions, Mapping):
        raise RoadmapError(f"{where}: data.positions is missing or not an object")
    beads = {}
    for position in POSITIONS:
        key = f"P{position}"
        field = f"data.positions.{key}.bead"
        entry = positions.get(key)
        bead = entry.get("bead") if isinstance(entry, Mapping) else None
        if not isinstance(bead, Mapping):
            raise RoadmapError(f"{where}: {field} is missing or not an object")
        outcome = bead.get("result")
        if outcome not in OUTCOMES:
            raise RoadmapError(f"{where}: {field}.result is {outcome!r}, "
                               f"expected one of {', '.join(OUTCOMES)}")
        marks = {}
        for mark in ("flush", "pair"):
            value = bead.get(mark)
            if not isinstance(value, bool):
                raise RoadmapError(f"{where}: {field}.{mark} is {value!r}, expected true/false")
            marks[mark] = value
        beads[position] = Bead(round_number, cast(Outcome, outcome), marks["flush"],
                               marks["pair"])
    return beads
