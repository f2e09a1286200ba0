"""Supervisor ``reveal``: the panel's reveal for a button-reveal table that lost its panel,
allowed exactly where the button would be, attributed to who took it."""

from __future__ import annotations

from controller.rules.hands import HAND_ORDER
from controller.table.events import validate_event
from controller.table.generators.scriptgen import ScriptBuilder
from controller.table.inputs import Actor, Button, Supervisor, parse_line, to_json
from controller.table.machine import MachineSettings, TableMachine

SETUP = ("3H", "2S", "2C", "2D")
ROUND = ("9S", "AS", "5H", "5D", "JC", "QD", "TH", "KS", "4C", "6C", "2H", "7D", "8H")
ALICE = Actor("alice", 1001)


def table(reveal: str = "button") -> tuple[TableMachine, ScriptBuilder]:
    machine = TableMachine(MachineSettings(reveal=reveal, betting_seconds=10))
    b = ScriptBuilder()
    for inp in [b.button("new_shoe"), *(b.card(c) for c in SETUP), b.button("start_round"),
                *(b.card(c) for c in ROUND)]:
        machine.handle(inp)
    return machine, b


def reveal(machine: TableMachine, at: float) -> list[dict]:
    return machine.handle(Supervisor(at, "reveal", by=ALICE))


def test_refused_before_the_hands_can_be_revealed_naming_the_state():
    machine, b = table()
    events = reveal(machine, b.t)
    assert [e["type"] for e in events] == ["input_rejected"]
    data = events[0]["data"]
    assert data["code"] == "not_allowed" and data["name"] == "reveal"
    assert data["reason"].startswith("nothing to reveal yet: ") and data["by"] == ALICE.to_dict()


def test_reveals_one_hand_per_action_like_the_button_each_attributed():
    machine, b = table()
    machine.handle(b.tick(b.t + 10))
    assert machine.state == "revealing"
    seen = []
    for _ in HAND_ORDER:
        events = reveal(machine, b.t)
        revealed = [e for e in events if e["type"] == "hand_revealed"]
        assert len(revealed) == 1 and revealed[0]["data"]["by"] == ALICE.to_dict()
        for event in events:
            validate_event(event)  # the contract allows "by" on hand_revealed
        seen.append(revealed[0]["data"]["position"])
    assert seen == list(HAND_ORDER) and machine.state == "ready"


def test_refused_while_paused_as_the_button_is():
    machine, b = table()
    machine.handle(b.tick(b.t + 10))
    machine.handle(Supervisor(b.t, "pause"))
    events = reveal(machine, b.t)
    assert [e["data"]["code"] for e in events] == ["table_paused"]
    assert machine.handle(Button(b.t, "reveal"))[0]["data"]["code"] == "table_paused"


def test_refused_on_an_automatic_reveal_table():
    machine, b = table("auto")
    events = reveal(machine, b.t)
    assert events[0]["data"]["reason"] == "this table reveals the hands by itself"


def test_the_action_in_a_table_script():
    line = to_json(Supervisor(3.0, "reveal", by=ALICE))
    assert parse_line(line) == Supervisor(3.0, "reveal", None, ALICE)
