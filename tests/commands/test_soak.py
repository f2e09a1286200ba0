"""The short soak (bench/soak/) in CI, and the soak's own checks shown to catch faults.

The long soak is one command: ``python -m bench.soak --shoes 200 --kills 5`` (docs/soak.md).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from bench.soak import FAULT_KINDS, SoakOptions, check_delivery, check_round, run_soak
from support.backends import need_mosquitto


@pytest.mark.slow
@pytest.mark.mosquitto
def test_three_shoes_with_every_fault_kind(tmp_path: Path) -> None:
    need_mosquitto()
    result = run_soak(SoakOptions(shoes=3, seed=7, kills=2, workdir=str(tmp_path)))
    figures = result.figures()
    assert result.ok, figures
    assert result.shoes == 3 and result.rounds >= 60
    assert set(FAULT_KINDS) <= set(result.faults), figures["faults_injected"]
    assert result.restarts == 2
    # The faults reached the table as the pauses they should be.
    assert {"misread", "shoe_lost", "supervisor_pause", "switch_pause"} <= set(result.pause_codes)
    assert result.cancelled >= 1


def _events(n: int) -> list[dict]:
    return [{"id": f"SOAK:{i}", "seq": i, "type": "tick", "data": {}} for i in range(1, n + 1)]


def test_the_delivery_check_catches_missing_reordered_and_changed_events() -> None:
    journaled = _events(5)
    check = check_delivery
    assert check("http", journaled + journaled[2:4], journaled) == []  # repeats are fine
    assert "missing" in check("http", journaled[:2] + journaled[3:], journaled)[0]
    assert "out of order" in check("http", [journaled[1], journaled[0]] + journaled[2:],
                                   journaled)[0]
    changed = copy.deepcopy(journaled)
    changed[4]["data"] = {"x": 1}
    assert "differ" in check("mqtt", changed, journaled)[0]
    repeat_changed = journaled + [changed[4]]
    assert "another body" in check("mqtt", repeat_changed, journaled)[0]


def test_the_round_check_recomputes_the_result_from_the_cards_sent() -> None:
    from controller.rules.cards import parse_card
    from controller.rules.hands import HAND_ORDER, evaluate_hand, round_result_data

    sent: dict[tuple[int, int, int], str] = {}
    codes = ["2S", "3H", "4D", "5C", "6S", "7H", "8D", "9C", "TS", "JH", "QD", "KC"]
    for index, code in enumerate(codes, start=1):
        sent[(1, 4, index)] = code
    hands = {pos: evaluate_hand([parse_card(codes[i]), parse_card(codes[i + 6])])
             for i, pos in enumerate(HAND_ORDER)}
    event = {"shoe": 1, "round": 4, "type": "round_result",
             "data": {**round_result_data(hands), "last_round": False}}
    assert check_round(event, sent) == []
    sent[(1, 4, 6)] = "9S"  # the banker's first card was another one
    assert "disagrees" in check_round(event, sent)[0]
    del sent[(1, 4, 6)]
    assert "no record" in check_round(event, sent)[0]
