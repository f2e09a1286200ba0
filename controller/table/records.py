"""The table machine's plain records: its settings, why it is paused, and the open round."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from controller.rules.cards import DEFAULT_DECKS, MAX_DECKS, Card
from controller.rules.hands import HAND_ORDER, Hand, evaluate_hand
from controller.table.procedure import CARDS_PER_ROUND
from controller.table.reveal_modes import REVEAL_MODES as REVEAL_MODES  # re-exported

#: what a table id may be: it names the table in every event and topic
TABLE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}\Z")  # \Z: no trailing line break


@dataclass(frozen=True)
class MachineSettings:
    # ``config`` metadata: how the config's ``table:`` section reads each setting
    # (controller/service/config/settings.py reads transports' settings the same way)
    table_id: str = field(default="table-1", metadata={"config": {
        "key": "id", "required": True, "pattern": TABLE_ID_PATTERN,
        "what": "1-32 letters, digits, '_', '.', '-' starting with a letter or digit"}})
    betting_seconds: float = field(default=15.0, metadata={"config": {"minval": 1, "maxval": 600}})
    # "auto" | "button" (one hand per dealer `reveal` press)
    reveal: str = field(default="auto", metadata={"config": {"choices": REVEAL_MODES}})
    decks: int = field(default=DEFAULT_DECKS,
                       metadata={"config": {"minval": 1, "maxval": MAX_DECKS}})

    def __post_init__(self) -> None:
        if not isinstance(self.table_id, str) or not self.table_id or ":" in self.table_id:
            raise ValueError(
                f"table_id must be a non-empty string without ':', got {self.table_id!r}")
        if not (isinstance(self.betting_seconds, (int, float))
                and 1 <= self.betting_seconds <= 600):
            raise ValueError(f"betting_seconds must be 1..600, got {self.betting_seconds!r}")
        if self.reveal not in REVEAL_MODES:
            raise ValueError(
                f"reveal must be one of {', '.join(REVEAL_MODES)}, got {self.reveal!r}")
        if not (isinstance(self.decks, int) and 1 <= self.decks <= MAX_DECKS):
            raise ValueError(f"decks must be 1..{MAX_DECKS}, got {self.decks!r}")


@dataclass
class PauseReason:
    """Why the table is paused: a fault's code and plain-words reason (never a sealed card)."""

    code: str
    reason: str
    detail: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "reason": self.reason}
        if self.detail:
            out["detail"] = dict(self.detail)
        return out


@dataclass
class RoundState:
    """The open round: its cards so far, its betting countdown and its revealed hands."""

    number: int
    cards: list[Card] = field(default_factory=list)
    betting_open: bool = True
    closes_at: float | None = None  # table clock; None while paused or closed
    seconds_left: float | None = None  # kept while paused
    revealed: dict[str, Hand] = field(default_factory=dict)
    #: fault_detail data held back while this round's betting is open
    sealed_evidence: list[dict[str, Any]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return len(self.cards) >= CARDS_PER_ROUND

    def hand(self, position: str) -> Hand:
        first = 1 + HAND_ORDER.index(position)
        return evaluate_hand((self.cards[first], self.cards[first + len(HAND_ORDER)]))


def pause_reason_from(data: dict[str, Any] | None) -> PauseReason | None:
    """The record back from its ``to_dict`` form (a checkpoint's)."""
    if not data:
        return None
    return PauseReason(data["code"], data["reason"], data.get("detail"))
