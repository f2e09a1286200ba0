"""The panel LED policy: the dealer's next step lights, nothing lights on a stopped table."""

from __future__ import annotations

import pytest

from controller.service.panel_leds import panel_leds

DARK = {"new_shoe": False, "start_round": False, "reveal": False}


@pytest.mark.parametrize("state, lit", [
    ("no_shoe", "new_shoe"),
    ("ready", "start_round"),
    ("revealing", "reveal"),
])
def test_the_next_step_lights(state: str, lit: str) -> None:
    assert panel_leds({"state": state}, "button") == dict(DARK, **{lit: True})


@pytest.mark.parametrize("state", ["starting", "awaiting_flip", "burning", "betting",
                                   "dealing", "stopped"])
def test_states_without_a_button_step_are_dark(state: str) -> None:
    assert panel_leds({"state": state}, "button") == DARK


def test_reveal_lights_only_where_the_dealer_reveals_by_button() -> None:
    assert panel_leds({"state": "revealing"}, "auto") == DARK


@pytest.mark.parametrize("stopped", [{"paused": True},
                                     {"storage_fault": "journal write failed: disk full"}])
def test_a_paused_or_unwritable_table_lights_nothing(stopped: dict) -> None:
    for state in ("no_shoe", "ready", "revealing"):
        assert panel_leds(dict(stopped, state=state), "button") == DARK
