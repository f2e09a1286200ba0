"""The table machine's procedure: whole shoes, the countdown, reveal modes, checkpoints."""

from __future__ import annotations

import json

import pytest

from controller.rules.cards import Card, parse_card
from controller.rules.hands import HAND_ORDER, POSITIONS, evaluate_hand, settle
from controller.table.events import iso_time, validate_event
from controller.table.generators.scriptgen import ScriptBuilder, shoe_script
from controller.table.inputs import Button, CardScan
from controller.table.machine import MachineSettings, TableMachine

SETUP = ("3H", "2S", "2C", "2D")  # flip 3H orders three burns
ROUND = ("9S", "AS", "5H", "5D", "JC", "QD", "TH", "KS", "4C", "6C", "2H", "7D", "8H")


def run(machine: TableMachine, inputs) -> list[dict]:
    events = []
    for inp in inputs:
        events.extend(machine.handle(inp))
    return events


def types(events) -> list[str]:
    return [e["type"] for e in events]


def rounds_in_script(script) -> list[list[Card]]:
    """The 13 cards of each round, read from the script alone (not from the machine)."""
    rounds, current = [], None
    for inp in script:
        if isinstance(inp, Button) and inp.name == "start_round":
            current = []
            rounds.append(current)
        elif isinstance(inp, CardScan) and current is not None and len(current) < 13:
            current.append(inp.card)
    return rounds


def ready_table(settings: MachineSettings | None = None) -> tuple[TableMachine, ScriptBuilder]:
    machine = TableMachine(settings or MachineSettings())
    b = ScriptBuilder()
    run(machine, [b.button("new_shoe")] + [b.card(c) for c in SETUP])
    assert machine.state == "ready"
    return machine, b


@pytest.mark.parametrize("seed,reveal", [(1, "auto"), (2, "auto"), (3, "button"), (4, "auto")])
def test_whole_shoe_results_agree_with_the_rules(seed: int, reveal: str) -> None:
    script = shoe_script(seed, reveal=reveal)
    machine = TableMachine(MachineSettings(reveal=reveal))
    events = run(machine, script)
    for event in events:
        validate_event(event)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["id"] == f"table-1:{e['seq']}" for e in events)
    assert not [e for e in events if e["type"] in ("paused", "input_rejected")]

    dealt = rounds_in_script(script)
    results = [e for e in events if e["type"] == "round_result"]
    assert len(results) == len(dealt) > 15
    for cards, result in zip(dealt, results):
        hands = {}
        for i, position in enumerate(HAND_ORDER):
            first, second = cards[1 + i], cards[7 + i]
            hand = evaluate_hand((first, second))
            hands[position] = hand
            data = result["data"]["hands"][position]
            assert data["cards"] == [first.code, second.code]
            # Independent of the rules layer: plain points and pairs.
            if data["combo"] is None:
                assert data["value"] == (first.points + second.points) % 10
            assert data["pair"] == (first.rank == second.rank)
            assert data["flush"] == (first.suit == second.suit)
        assert result["data"]["hands"] == {p: h.to_event_data() for p, h in hands.items()}
        for position in POSITIONS:
            expected = settle(hands[position], hands["banker"]).to_event_data()
            assert result["data"]["positions"][position] == expected
            assert expected["pair_bet_return"] == (12 if hands[position].pair else 0)

    # The cut card came out during the last round; the shoe ended right after its result.
    cut_at = types(events).index("cut_card_drawn")
    last_opened = max(i for i, e in enumerate(events) if e["type"] == "round_opened")
    assert cut_at > last_opened or events[last_opened]["data"]["last_round"]
    assert results[-1]["data"]["last_round"] is True
    assert all(r["data"]["last_round"] is False for r in results[:-1])
    assert types(events)[-2:] == ["round_result", "shoe_ended"]
    end = events[-1]
    cards_in_script = sum(1 for inp in script if isinstance(inp, CardScan))
    assert end["data"] == {"rounds": len(dealt), "rounds_cancelled": 0,
                           "cards_drawn": cards_in_script, "reason": "cut_card"}
    assert 300 <= cards_in_script <= 330  # cut card about 3/4 into 416 cards
    assert machine.state == "no_shoe"


def test_events_are_byte_identical_for_the_same_script() -> None:
    script = shoe_script(11, reveal="button")
    first = run(TableMachine(MachineSettings(reveal="button")), script)
    second = run(TableMachine(MachineSettings(reveal="button")), script)
    assert json.dumps(first) == json.dumps(second)
    assert json.dumps(first) != json.dumps(run(TableMachine(MachineSettings()), shoe_script(12)))


def test_shoe_setup_reports_flip_card_and_burns_without_values() -> None:
    machine = TableMachine(MachineSettings(table_id="t7"))
    b = ScriptBuilder()
    events = run(machine, [b.button("new_shoe"), b.card("♥3")])
    assert types(events) == ["shoe_started", "burn_card_shown"]
    assert events[1]["data"] == {"card": "3H", "burn_count": 3}
    assert events[0]["shoe"] == 1 and events[0]["id"] == "t7:1"
    assert machine.status()["prompt"] == "burn 3 more"
    burns = run(machine, [b.card("KD"), b.card("QD")])
    assert [e["data"] for e in burns] == [{"number": 1, "burn_count": 3},
                                          {"number": 2, "burn_count": 3}]
    assert machine.state == "burning"
    last = run(machine, [b.card("JD")])
    assert types(last) == ["card_burned", "burn_completed"]
    assert last[1]["data"] == {"burned": 3}
    assert machine.state == "ready"
    assert machine.status()["prompt"] == "press START ROUND"


@pytest.mark.parametrize("flip,burns", [("AS", 1), ("9C", 9), ("TD", 10), ("KH", 10)])
def test_flip_card_sets_the_burn_count(flip: str, burns: int) -> None:
    machine = TableMachine(MachineSettings())
    b = ScriptBuilder()
    run(machine, [b.button("new_shoe"), b.card(flip)])
    assert machine.status()["burn_remaining"] == burns
    events = run(machine, [b.card(rank + "C") for rank in "23456789TJ"[:burns]])
    assert types(events)[-1] == "burn_completed"
    assert machine.state == "ready"


def test_round_deals_in_fixed_order_and_closes_betting_at_the_deadline() -> None:
    machine, b = ready_table()
    b.at(100.0)
    opened = machine.handle(b.button("start_round"))
    assert opened[0]["type"] == "round_opened"
    assert opened[0]["round"] == 1
    assert opened[0]["data"] == {"betting_seconds": 15.0, "betting_closes_at": iso_time(115.0),
                                 "last_round": False}
    assert machine.next_deadline() == 115.0
    dealt = run(machine, [b.card(c) for c in ROUND])
    assert [e["data"]["target"] for e in dealt] == ["burn"] + list(HAND_ORDER) * 2
    assert [e["data"]["index"] for e in dealt] == list(range(13))
    assert machine.state == "betting"
    assert run(machine, [b.tick(114.999)]) == []
    # An input after the deadline fires the timer first, stamped with the deadline.
    events = machine.handle(b.tick(120.0))
    assert types(events) == ["betting_closed"] + ["hand_revealed"] * 6 + ["round_result"]
    assert events[0]["time"] == iso_time(115.0)
    assert [e["data"]["position"] for e in events[1:7]] == list(HAND_ORDER)
    assert events[1]["data"]["cards"] == ["AS", "KS"]
    assert machine.state == "ready" and machine.next_deadline() is None


def test_cards_after_betting_closed_complete_the_round() -> None:
    machine, b = ready_table()
    run(machine, [b.button("start_round")] + [b.card(c) for c in ROUND[:5]])
    closed = machine.handle(b.tick(b.t + 20))
    assert types(closed) == ["betting_closed"]
    assert machine.state == "dealing"
    assert machine.status()["prompt"] == "deal to P5"
    events = run(machine, [b.card(c) for c in ROUND[5:]])
    assert types(events)[-8:] == ["card_dealt"] + ["hand_revealed"] * 6 + ["round_result"]


def test_button_reveal_one_hand_per_press() -> None:
    machine, b = ready_table(MachineSettings(reveal="button", betting_seconds=10))
    run(machine, [b.button("start_round")] + [b.card(c) for c in ROUND])
    early = machine.handle(b.button("reveal"))
    assert types(early) == ["input_rejected"] and early[0]["data"]["code"] == "not_allowed"
    assert types(machine.handle(b.tick(b.t + 10))) == ["betting_closed"]
    assert machine.status()["prompt"] == "press REVEAL for P1"
    for position in HAND_ORDER[:-1]:
        events = machine.handle(b.button("reveal"))
        assert types(events) == ["hand_revealed"]
        assert events[0]["data"]["position"] == position
        assert position in machine.status()["hands"]
    final = machine.handle(b.button("reveal"))
    assert types(final) == ["hand_revealed", "round_result"]
    assert machine.state == "ready"


def test_pause_freezes_the_countdown_and_resume_restarts_it() -> None:
    machine, b = ready_table()
    b.at(10.0)
    run(machine, [b.button("start_round")])  # closes at 25
    b.at(15.0)
    paused = machine.handle(b.switch(True))
    assert paused[0]["data"]["code"] == "switch_pause"
    assert machine.next_deadline() is None
    assert run(machine, [b.tick(40.0)]) == []  # long past 25: frozen
    b.at(50.0)
    resumed = machine.handle(b.switch(False))
    assert types(resumed) == ["resumed"]
    assert resumed[0]["data"] == {"betting_closes_at": iso_time(60.0), "betting_seconds_left": 10.0}
    assert machine.next_deadline() == 60.0
    assert run(machine, [b.tick(59.9)]) == []
    closed = machine.handle(b.tick(60.0))
    assert types(closed) == ["betting_closed"] and closed[0]["time"] == iso_time(60.0)


def test_cut_card_between_rounds_makes_the_next_round_the_last() -> None:
    machine, b = ready_table()
    cut = machine.handle(b.cut_card())
    assert cut[0]["type"] == "cut_card_drawn" and cut[0]["round"] is None
    assert cut[0]["data"] == {"last_round": True}
    opened = machine.handle(b.button("start_round"))
    assert opened[0]["data"]["last_round"] is True
    events = run(machine, [b.card(c) for c in ROUND] + [b.tick(b.t + 20)])
    assert types(events)[-2:] == ["round_result", "shoe_ended"]
    assert events[-2]["data"]["last_round"] is True
    assert events[-1]["data"] == {"rounds": 1, "rounds_cancelled": 0, "cards_drawn": 17,
                                  "reason": "cut_card"}
    assert events[-1]["shoe"] == 1 and events[-1]["round"] is None
    assert machine.state == "no_shoe"
    second = machine.handle(b.button("new_shoe"))
    assert second[0]["shoe"] == 2


def test_cancel_round_refunds_and_round_numbers_go_on() -> None:
    machine, b = ready_table()
    run(machine, [b.button("start_round")] + [b.card(c) for c in ROUND[:4]])
    cancelled = machine.handle(b.button("cancel_round"))
    assert types(cancelled) == ["round_cancelled"]
    assert cancelled[0]["data"] == {"reason": "cancelled by the dealer", "refund_all": True}
    assert cancelled[0]["round"] == 1
    assert machine.state == "ready" and machine.next_deadline() is None
    assert machine.handle(b.button("start_round"))[0]["round"] == 2


def test_cancelled_last_round_ends_the_shoe() -> None:
    machine, b = ready_table()
    run(machine, [b.button("start_round"), b.card("9S"), b.cut_card()])
    events = machine.handle(b.supervisor("cancel_round"))
    assert types(events) == ["round_cancelled", "shoe_ended"]
    assert events[1]["data"]["reason"] == "cut_card"
    assert events[1]["data"]["rounds_cancelled"] == 1


def test_end_shoe_early() -> None:
    machine, b = ready_table()
    events = machine.handle(b.button("end_shoe"))
    assert types(events) == ["shoe_ended"]
    assert events[0]["data"] == {"rounds": 0, "rounds_cancelled": 0, "cards_drawn": 4,
                                 "reason": "ended_by_dealer"}
    machine2, b2 = ready_table()
    run(machine2, [b2.button("start_round"), b2.card("9S")])
    events = machine2.handle(b2.supervisor("end_shoe"))
    assert types(events) == ["round_cancelled", "shoe_ended"]
    assert events[1]["data"]["reason"] == "ended_by_supervisor"
    assert machine2.state == "no_shoe"


def test_status_is_sealed_until_betting_closed() -> None:
    machine, b = ready_table()
    run(machine, [b.button("start_round")] + [b.card(c) for c in ROUND])
    status = machine.status()
    text = json.dumps(status)
    for code in set(ROUND):
        card = parse_card(code)
        assert code not in text and card.display() not in text
    assert status["cards_dealt"] == 13 and status["betting_open"] is True
    assert status["hands"] == {}
    json.loads(text)  # JSON-able
    run(machine, [b.tick(b.t + 20)])
    assert machine.status()["hands"] == {}  # round settled: back to ready


def test_checkpoint_between_shoes_restores_an_equivalent_machine() -> None:
    settings = MachineSettings(table_id="t3")
    machine = TableMachine(settings)
    run(machine, shoe_script(5))
    machine.handle(Button(machine.clock + 1, "new_shoe"))
    with pytest.raises(ValueError, match="between shoes"):
        machine.checkpoint()
    machine.handle(Button(machine.clock + 1, "end_shoe"))
    checkpoint = json.loads(json.dumps(machine.checkpoint()))
    restored = TableMachine.from_checkpoint(settings, checkpoint)
    assert restored.checkpoint() == checkpoint
    later = shoe_script(6, start_at=machine.clock + 10)
    assert run(restored, later) == run(machine, later)
    assert restored.status() == machine.status()
    with pytest.raises(ValueError, match="table"):
        TableMachine.from_checkpoint(MachineSettings(table_id="other"), checkpoint)


@pytest.mark.parametrize("bad", [
    {"betting_seconds": 0}, {"reveal": "manual"}, {"decks": 0}, {"table_id": ""},
    {"table_id": "a:b"},
])
def test_settings_are_checked(bad: dict) -> None:
    with pytest.raises(ValueError):
        MachineSettings(**bad)


def test_status_counts_the_betting_seconds_down_and_freezes_them_while_paused() -> None:
    from controller.service.status_board import at_now

    machine, b = ready_table()
    b.at(10.0)
    run(machine, [b.button("start_round")])  # 15 s of betting: closes at 25
    assert machine.status()["betting_seconds_left"] == 15.0
    b.at(14.0)
    run(machine, [b.tick(14.0)])
    status = machine.status()
    assert status["betting_seconds_left"] == 11.0
    # a published status, read later: the countdown runs on between inputs
    assert at_now(status, 20.5)["betting_seconds_left"] == 4.5
    assert at_now(status, 30.0)["betting_seconds_left"] == 0.0
    b.at(16.0)
    run(machine, [b.switch(True)])
    paused = machine.status()
    assert paused["betting_seconds_left"] == 9.0
    assert at_now(paused, 99.0)["betting_seconds_left"] == 9.0  # frozen
    b.at(20.0)
    run(machine, [b.switch(False)])
    b.at(29.0)
    run(machine, [b.tick(29.0)])  # closes at 29 (20 + 9)
    assert machine.status()["betting_open"] is False
    assert machine.status()["betting_seconds_left"] is None
