"""Which panel buttons to light: the dealer's next step, if the table is running."""

from __future__ import annotations

from typing import Any


def panel_leds(status: dict[str, Any], reveal_mode: str) -> dict[str, bool]:
    """The LED of each button that is the next step; all dark while paused or unwritable.

    ``reveal`` lights only where the dealer reveals by button (``reveal_mode == "button"``).
    """
    running = not status.get("paused") and not status.get("storage_fault")
    state = status.get("state")
    return {"new_shoe": running and state == "no_shoe",
            "start_round": running and state == "ready",
            "reveal": running and state == "revealing" and reveal_mode == "button"}
