"""What the table shows: the dealer's prompt, the status view and the next card's target.

Functions of the table machine (its ``MachineState``) that read it and change nothing.
Sealed: no card value of a round whose betting is open appears in any of them.
"""

from __future__ import annotations

from typing import Any

from controller.rules.hands import HAND_ORDER
from controller.table import drain
from controller.table.events import iso_time, seconds_of
from controller.table.machine_state import MachineState
from controller.table.procedure import ROUND_TARGETS, STATE_WORDS


def next_target(machine: MachineState) -> str | None:
    """Where the next card from the shoe goes: flip, burn, a hand position, or nowhere."""
    if machine.state == "awaiting_flip":
        return "flip"
    if machine.state == "burning":
        return "burn"
    if machine.round is not None and not machine.round.complete:
        return ROUND_TARGETS[len(machine.round.cards)]
    return None


def prompt(machine: MachineState) -> str:
    """Plain words for the dealer's screen; never a sealed card value."""
    if machine.hold == "paused":
        reason = machine.fault.reason if machine.fault else "paused"
        return f"PAUSED: {reason} — call supervisor"
    if machine.state in ("ready", "no_shoe") and drain.drained(machine):
        return drain.PROMPT
    if machine.state == "no_shoe":
        if not machine.devices["shoe"]:
            return "shoe disconnected — reconnect it, then press NEW SHOE"
        return "press NEW SHOE"
    if machine.state == "awaiting_flip":
        return "draw the flip card"
    if machine.state == "burning":
        assert machine.burn_count is not None
        return f"burn {machine.burn_count - machine.burned} more"
    if machine.state == "ready":
        if not machine.devices["shoe"]:
            return "shoe disconnected — reconnect it before START ROUND"
        last = " (last round of this shoe)" if machine.last_round else ""
        return "press START ROUND" + last
    rnd = machine.round
    assert rnd is not None
    if not rnd.complete:
        target = ROUND_TARGETS[len(rnd.cards)]
        return "burn 1 card" if target == "burn" else f"deal to {target}"
    if machine.state == "betting":
        return "all cards dealt — betting closes at " + iso_time(rnd.closes_at or 0)
    if machine.state == "revealing":
        return f"press REVEAL for {HAND_ORDER[len(rnd.revealed)]}"
    return STATE_WORDS[machine.state]


def _seconds_left(machine: MachineState) -> float | None:
    """Betting seconds left at the machine's clock: frozen while paused, None once closed."""
    rnd = machine.round
    if rnd is None or not rnd.betting_open:
        return None
    if rnd.seconds_left is not None:
        return round(rnd.seconds_left, 3)
    if rnd.closes_at is not None:
        return round(max(0.0, rnd.closes_at - machine.clock), 3)
    return None


def seconds_left_now(status: dict[str, Any], now: float) -> float | None:
    """A published status's betting seconds left at ``now`` (the countdown runs on between
    inputs; a paused table's stays frozen)."""
    if not status.get("betting_open"):
        return None
    if status.get("paused"):
        left = status.get("betting_seconds_left")
        return float(left) if isinstance(left, (int, float)) else None
    closes = seconds_of(status.get("betting_closes_at"))
    return None if closes is None else round(max(0.0, closes - now), 3)


def status(machine: MachineState) -> dict[str, Any]:
    """A JSON-able view for the dealer screen and the control socket. Sealed: no card
    value of an open round before its betting closed."""
    rnd = machine.round
    closes_at = None
    if rnd is not None and rnd.betting_open and rnd.closes_at is not None:
        closes_at = iso_time(rnd.closes_at)
    view: dict[str, Any] = {
        "table": machine.settings.table_id,
        "state": machine.state,
        "shoe": machine.shoe_number if machine.state != "no_shoe" else None,
        "round": rnd.number if rnd is not None else None,
        "seq": machine.seq,
        "clock": machine.clock,
        "cards_drawn": machine.composition.cards_drawn,
        "cards_left": machine.composition.cards_left,
        "burn_count": machine.burn_count,
        "burn_remaining": (machine.burn_count - machine.burned
                           if machine.state == "burning" and machine.burn_count else 0),
        "next_target": next_target(machine),
        "cards_dealt": len(rnd.cards) if rnd is not None else 0,
        "betting_open": bool(rnd is not None and rnd.betting_open),
        "betting_closes_at": closes_at,
        "betting_seconds_left": _seconds_left(machine),
        "paused": machine.hold == "paused",
        "fault": machine.fault.to_dict() if machine.fault else None,
        "last_fault": machine.last_fault.to_dict() if machine.last_fault else None,
        "card_owed": machine.card_owed,
        "devices": dict(machine.devices),
        "clock_sync": machine.clock_sync,
        "last_clock_step": machine.last_clock_step,
        "backends_unreachable": dict(machine.backends_unreachable),
        "switch": "pause" if machine.switch_on else "run",
        "last_round": machine.last_round,
        "rounds_played": machine.rounds_played,
        "prompt": prompt(machine),
        "hands": {},
        **drain.status_fields(machine),
    }
    if rnd is not None and not rnd.betting_open:
        view["hands"] = {pos: hand.to_event_data() for pos, hand in rnd.revealed.items()}
    return view
