"""Which panel buttons to light: the dealer's next step, if the table is running; and the
drivers told so when it changes (where the panel has LEDs)."""

from __future__ import annotations

from typing import Any

import structlog

from drivers.base import Driver

log = structlog.get_logger("pokdeng.daemon")


def panel_leds(status: dict[str, Any], reveal_mode: str) -> dict[str, bool]:
    """The LED of each button that is the next step; all dark while paused or unwritable.

    ``reveal`` lights only where the dealer reveals by button (``reveal_mode == "button"``).
    """
    running = not status.get("paused") and not status.get("storage_fault")
    state = status.get("state")
    return {"new_shoe": running and state == "no_shoe",
            "start_round": running and state == "ready",
            "reveal": running and state == "revealing" and reveal_mode == "button"}


class PanelLights:
    """The LEDs last set on the drivers: they are told only of a change."""

    def __init__(self, reveal_mode: str) -> None:
        self._reveal_mode = reveal_mode
        self._lit: dict[str, bool] | None = None

    def forget(self) -> None:
        """The drivers know no LEDs yet (they just started): the next ``show`` tells them."""
        self._lit = None

    def show(self, status: dict[str, Any], drivers: list[Driver]) -> None:
        """Light the panel button that is the dealer's next step."""
        leds = panel_leds(status, self._reveal_mode)
        if leds == self._lit:
            return
        self._lit = leds
        for driver in drivers:
            try:
                driver.set_leds(leds)
            except Exception as exc:  # an LED is a nicety; never stop the table for it
                log.warning("cannot set the panel LEDs", error=str(exc))
