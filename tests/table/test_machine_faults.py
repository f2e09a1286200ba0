"""Every fault pauses with a code and a reason and has a way out; every rejection is visible
and changes nothing. docs/faults.md is generated from controller/table/faults.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.rules.cards import new_shoe_cards
from controller.table import faults
from controller.table.events import validate_event
from controller.table.generators.scriptgen import ScriptBuilder
from controller.table.inputs import Actor
from controller.table.machine import MachineSettings, TableMachine

ROOT = Path(__file__).resolve().parents[2]
SETUP = ("3H", "2S", "2C", "2D")
ROUND = ("9S", "AS", "5H", "5D", "JC", "QD", "TH", "KS", "4C", "6C", "2H", "7D", "8H")


class Table:
    """A machine plus a script builder; every event is schema-checked as it comes."""

    def __init__(self, **settings):
        self.machine = TableMachine(MachineSettings(**settings))
        self.b = ScriptBuilder()
        self.events: list[dict] = []

    def feed(self, *inputs) -> list[dict]:
        out = []
        for inp in inputs:
            for event in self.machine.handle(inp):
                validate_event(event)
                out.append(event)
        self.events.extend(out)
        return out

    def ready(self) -> Table:
        self.feed(self.b.button("new_shoe"), *[self.b.card(c) for c in SETUP])
        assert self.machine.state == "ready"
        return self

    def open_round(self, cards: int = 0) -> Table:
        self.feed(self.b.button("start_round"), *[self.b.card(c) for c in ROUND[:cards]])
        return self

    def status(self) -> dict:
        return self.machine.status()


def types(events) -> list[str]:
    return [e["type"] for e in events]


def paused_with(events, code: str) -> dict:
    assert types(events)[-1] == "paused", types(events)
    data = events[-1]["data"]
    assert data["code"] == code and data["reason"]
    return data


def unchanged(before: dict, after: dict) -> bool:
    ignore = {"seq", "clock", "betting_seconds_left"}  # these move with the clock alone
    return {k: v for k, v in before.items() if k not in ignore} == {
        k: v for k, v in after.items() if k not in ignore}


# --- faults and their ways out ------------------------------------------------------------------


def test_card_with_no_round_open_pauses_and_resume_carries_on() -> None:
    t = Table().ready()
    data = paused_with(t.feed(t.b.card("7H")), faults.CARD_NO_ROUND)
    assert "7♥" in data["reason"]  # no round open: not sealed
    assert t.status()["cards_drawn"] == 5  # it left the shoe
    assert t.feed(t.b.button("start_round"))[0]["data"]["code"] == faults.TABLE_PAUSED
    assert types(t.feed(t.b.supervisor("resume"))) == ["resumed"]
    assert types(t.feed(t.b.button("start_round"))) == ["round_opened"]


def test_card_with_no_shoe_open_pauses_and_is_not_counted() -> None:
    t = Table()
    paused_with(t.feed(t.b.card("7H")), faults.CARD_NO_ROUND)
    assert t.events[-1]["shoe"] is None
    assert types(t.feed(t.b.supervisor("resume"))) == ["resumed"]
    assert types(t.feed(t.b.button("new_shoe"))) == ["shoe_started"]
    assert t.status()["cards_drawn"] == 0


def test_card_during_a_pause_is_set_aside_sealed() -> None:
    t = Table().ready().open_round(cards=3)
    paused_with(t.feed(t.b.switch(True)), faults.SWITCH_PAUSE)
    data = paused_with(t.feed(t.b.card("QH")), faults.CARD_WHILE_PAUSED)
    assert "a card" in data["reason"] and "Q" not in data["reason"]
    assert t.status()["cards_dealt"] == 3
    assert t.status()["fault"]["code"] == faults.CARD_WHILE_PAUSED
    assert types(t.feed(t.b.switch(False))) == ["resumed"]
    dealt = t.feed(t.b.card(ROUND[3]))
    assert dealt[0]["data"] == {"index": 3, "target": "P3"}


def test_fourteenth_card_is_set_aside_resume_or_cancel() -> None:
    t = Table().ready().open_round(cards=13)
    data = paused_with(t.feed(t.b.card("3S")), faults.TOO_MANY_CARDS)
    assert "a card" in data["reason"]  # betting still open: sealed
    assert t.status()["cards_drawn"] == 4 + 14
    assert types(t.feed(t.b.supervisor("resume"))) == ["resumed"]
    events = t.feed(t.b.tick(t.b.t + 30))
    assert types(events)[0] == "betting_closed" and types(events)[-1] == "round_result"

    t2 = Table().ready().open_round(cards=13)
    t2.feed(t2.b.misread("E7", "no tag"))
    assert t2.events[-1]["data"]["code"] == faults.TOO_MANY_CARDS
    cancelled = t2.feed(t2.b.button("cancel_round"))
    assert types(cancelled) == ["round_cancelled", "resumed"]
    assert t2.machine.state == "ready"


def test_ninth_copy_enter_the_real_card_or_set_aside() -> None:
    t = Table(decks=1).ready().open_round(cards=2)  # 9S burned, AS to P1
    data = paused_with(t.feed(t.b.card("AS")), faults.NINTH_COPY)
    assert "a card" in data["reason"] and "A♠" not in data["reason"]
    drawn = t.status()["cards_drawn"]
    assert drawn == 6  # the impossible read is not counted
    assert t.status()["card_owed"] == faults.NINTH_COPY
    events = t.feed(t.b.supervisor("enter_card", "AC"))
    assert types(events) == ["resumed", "card_dealt"]
    assert events[1]["data"] == {"index": 2, "target": "P2", "entered": True}
    # Or: set it aside and resume; the deal continues at the same place.
    t2 = Table(decks=1).ready().open_round(cards=2)
    t2.feed(t2.b.card("AS"))
    assert types(t2.feed(t2.b.supervisor("resume"))) == ["resumed"]
    assert t2.feed(t2.b.card("5H"))[0]["data"]["target"] == "P2"
    assert t2.feed(t2.b.supervisor("enter_card", "AC"))[0]["data"]["code"] == faults.NO_CARD_OWED


def test_more_cards_than_the_shoe_holds() -> None:
    t = Table(decks=1)
    deck = new_shoe_cards(1)
    t.feed(t.b.button("new_shoe"))
    # Flip the AS (1 burn), then deal whole rounds until 52 cards are out.
    order = [c for c in deck if c.code == "AS"] + [c for c in deck if c.code != "AS"]
    t.feed(t.b.card(order[0]), t.b.card(order[1]))
    position = 2
    while position + 13 <= 52:
        t.feed(t.b.button("start_round"), *[t.b.card(c) for c in order[position:position + 13]])
        t.feed(t.b.tick(t.b.t + 20))
        position += 13
    t.feed(t.b.button("start_round"), *[t.b.card(c) for c in order[position:]])
    assert t.status()["cards_left"] == 0
    data = paused_with(t.feed(t.b.card("KH")), faults.SHOE_OVERDRAWN)
    assert "53" in data["reason"]
    assert t.status()["cards_drawn"] == 52
    events = t.feed(t.b.button("cancel_round"), t.b.supervisor("end_shoe"))
    # the overdrawn card was sealed (betting open): its fault_detail follows the cancel
    assert types(events) == ["round_cancelled", "fault_detail", "resumed", "shoe_ended"]
    assert events[1]["data"]["evidence"] == {"card": "KH"}


def test_misread_owes_the_card_until_entered() -> None:
    t = Table().ready().open_round(cards=4)
    data = paused_with(t.feed(t.b.misread("E12", "RFID tag not in registry")), faults.MISREAD)
    assert data["detail"] == {"code": "E12", "reason": "RFID tag not in registry"}
    assert "E12" in data["reason"]
    # Resume is refused by the supervisor and by the key switch until the card is entered.
    refused = t.feed(t.b.supervisor("resume"))
    assert refused[0]["data"]["code"] == faults.RESUME_BLOCKED
    assert "enter_card" in refused[0]["data"]["reason"]
    t.feed(t.b.switch(True))
    assert t.feed(t.b.supervisor("enter_card", "5D"))[0]["data"]["code"] == faults.KEY_AT_PAUSE
    assert t.feed(t.b.switch(False))[0]["data"]["code"] == faults.RESUME_BLOCKED
    assert t.status()["paused"] is True
    entered = t.feed(t.b.supervisor("enter_card", "5D"))
    assert types(entered) == ["resumed", "card_dealt"]
    assert entered[1]["data"] == {"index": 4, "target": "P4", "entered": True}
    for event in entered:  # the entered card is sealed too
        assert "5D" not in json.dumps(event)
    rest = t.feed(*[t.b.card(c) for c in ROUND[5:]], t.b.tick(t.b.t + 30))
    result = rest[-1]
    assert result["type"] == "round_result"
    assert result["data"]["hands"]["P4"]["cards"] == ["5D", "2H"]


def test_misread_way_out_cancel_round() -> None:
    t = Table().ready().open_round(cards=4)
    t.feed(t.b.misread())
    assert t.events[-1]["data"]["reason"].startswith("the shoe could not read a card;")
    events = t.feed(t.b.supervisor("cancel_round"))
    assert types(events) == ["round_cancelled", "resumed"]
    assert t.status()["card_owed"] is None and t.status()["fault"] is None


def test_entered_card_the_shoe_cannot_hold_is_refused_and_still_owed() -> None:
    t = Table(decks=1).ready().open_round(cards=4)  # AS went to P1: the only ace of spades
    t.feed(t.b.misread())
    refused = t.feed(t.b.supervisor("enter_card", "AS"))
    assert types(refused) == ["input_rejected"]
    assert refused[0]["data"]["code"] == faults.CARD_NOT_IN_SHOE
    assert "AS" not in json.dumps(refused) and "A♠" not in json.dumps(refused)
    assert t.status()["paused"] is True and t.status()["card_owed"] == faults.MISREAD
    assert t.status()["cards_drawn"] == 8
    assert types(t.feed(t.b.supervisor("enter_card", "5S"))) == ["resumed", "card_dealt"]


def test_supervisor_actions_say_who_took_them() -> None:
    alice = Actor("alice", 1001)
    t = Table().ready().open_round(cards=4)
    assert t.feed(t.b.supervisor("pause", by=alice))[0]["data"]["by"] == alice.to_dict()
    refused = t.feed(t.b.supervisor("pause", by=alice))
    assert refused[0]["type"] == "input_rejected" and refused[0]["data"]["by"] == alice.to_dict()
    assert t.feed(t.b.supervisor("resume", by=alice))[0]["data"]["by"] == alice.to_dict()
    t.feed(t.b.misread())
    entered = t.feed(t.b.supervisor("enter_card", "5D", by=alice))
    assert [e["data"]["by"] for e in entered] == [alice.to_dict()] * 2  # resumed, card_dealt
    # Betting ran out before the cancel arrived: that close is the timer's doing, not hers.
    t.b.wait(60)
    cancelled = t.feed(t.b.supervisor("cancel_round", by=alice))
    assert types(cancelled) == ["betting_closed", "round_cancelled"]
    assert "by" not in cancelled[0]["data"] and cancelled[1]["data"]["by"] == alice.to_dict()
    ended = t.feed(t.b.supervisor("end_shoe", by=Actor("bob", 1002)))
    assert ended[0]["type"] == "shoe_ended" and ended[0]["data"]["by"]["user"] == "bob"
    # Without a caller (a script from before `by`) the events are as they always were.
    plain = Table().ready()
    assert "by" not in plain.feed(plain.b.supervisor("pause"))[0]["data"]


def test_misread_of_the_flip_card_entered_by_hand() -> None:
    t = Table()
    t.feed(t.b.button("new_shoe"))
    paused_with(t.feed(t.b.misread()), faults.MISREAD)
    events = t.feed(t.b.supervisor("enter_card", "2H"))
    assert types(events) == ["resumed", "burn_card_shown"]
    assert events[1]["data"] == {"card": "2H", "burn_count": 2}


def test_cancel_while_key_at_pause_stays_paused_until_run() -> None:
    t = Table().ready().open_round(cards=4)
    t.feed(t.b.switch(True), t.b.misread())
    events = t.feed(t.b.button("cancel_round"))
    assert types(events) == ["round_cancelled"]
    assert t.status()["paused"] is True
    assert t.status()["fault"]["code"] == faults.SWITCH_PAUSE
    assert types(t.feed(t.b.switch(False))) == ["resumed"]


def test_second_cut_card() -> None:
    t = Table().ready().open_round(cards=2)
    assert types(t.feed(t.b.cut_card())) == ["cut_card_drawn"]
    paused_with(t.feed(t.b.cut_card()), faults.SECOND_CUT_CARD)
    assert types(t.feed(t.b.supervisor("resume"))) == ["resumed"]
    assert t.status()["last_round"] is True


def test_cut_card_with_no_shoe() -> None:
    t = Table()
    paused_with(t.feed(t.b.cut_card()), faults.CUT_CARD_NO_SHOE)
    assert types(t.feed(t.b.supervisor("resume"))) == ["resumed"]


def test_shoe_lost_mid_round_until_back() -> None:
    t = Table().ready().open_round(cards=5)
    events = t.feed(t.b.device("shoe", False))
    assert types(events) == ["device_status", "paused"]
    assert events[0]["data"] == {"device": "shoe", "connected": False}
    paused_with(events, faults.SHOE_LOST)
    refused = t.feed(t.b.supervisor("resume"))
    assert refused[0]["data"]["code"] == faults.RESUME_BLOCKED
    assert "disconnected" in refused[0]["data"]["reason"]
    assert types(t.feed(t.b.device("shoe", True))) == ["device_status"]
    assert types(t.feed(t.b.supervisor("resume"))) == ["resumed"]
    assert t.feed(t.b.card(ROUND[5]))[0]["data"]["index"] == 5


def test_shoe_lost_between_rounds_blocks_start_round() -> None:
    t = Table().ready()
    assert types(t.feed(t.b.device("shoe", False))) == ["device_status"]
    assert t.status()["paused"] is False
    assert "reconnect" in t.status()["prompt"]
    before = t.status()
    refused = t.feed(t.b.button("start_round"))
    assert refused[0]["data"]["code"] == faults.SHOE_DISCONNECTED
    assert unchanged(before, t.status())
    t.feed(t.b.device("shoe", True))
    assert types(t.feed(t.b.button("start_round"))) == ["round_opened"]


def test_shoe_lost_after_all_cards_dealt_does_not_pause() -> None:
    t = Table().ready().open_round(cards=13)
    assert types(t.feed(t.b.device("shoe", False))) == ["device_status"]
    assert types(t.feed(t.b.tick(t.b.t + 30)))[-1] == "round_result"


def test_repeated_levels_are_not_news() -> None:
    t = Table().ready()
    assert t.feed(t.b.switch(False)) == []
    assert t.feed(t.b.device("panel", True)) == []
    assert types(t.feed(t.b.device("panel", False))) == ["device_status"]
    t.feed(t.b.switch(True))
    assert t.feed(t.b.switch(True)) == []


def test_fault_while_paused_replaces_the_shown_fault() -> None:
    t = Table().ready().open_round(cards=3)
    t.feed(t.b.supervisor("pause"))
    assert t.status()["fault"]["code"] == faults.SUPERVISOR_PAUSE
    t.feed(t.b.device("shoe", False))
    assert t.status()["fault"]["code"] == faults.SHOE_LOST
    assert t.status()["last_fault"]["code"] == faults.SHOE_LOST
    assert t.status()["prompt"].startswith("PAUSED: the shoe disconnected")


# --- rejections ------------------------------------------------------------------------------


@pytest.mark.parametrize("setup,inp,code", [
    ("round", ("button", "start_round"), faults.NOT_ALLOWED),
    ("round", ("button", "reveal"), faults.NOT_ALLOWED),
    ("round", ("button", "new_shoe"), faults.NOT_ALLOWED),
    ("round", ("button", "end_shoe"), faults.ROUND_OPEN),
    ("ready", ("button", "cancel_round"), faults.NOT_ALLOWED),
    ("ready", ("supervisor", "resume"), faults.NOT_PAUSED),
    ("ready", ("supervisor", "enter_card"), faults.NO_CARD_OWED),
    ("none", ("button", "start_round"), faults.NOT_ALLOWED),
    ("none", ("button", "end_shoe"), faults.NOT_ALLOWED),
    ("none", ("supervisor", "end_shoe"), faults.NOT_ALLOWED),
    ("paused", ("supervisor", "pause"), faults.ALREADY_PAUSED),
    ("paused", ("button", "start_round"), faults.TABLE_PAUSED),
    ("paused", ("supervisor", "resume"), faults.KEY_AT_PAUSE),
])
def test_rejections_are_visible_and_change_nothing(setup: str, inp: tuple, code: str) -> None:
    t = Table()
    if setup in ("ready", "round", "paused"):
        t.ready()
    if setup == "round":
        t.open_round(cards=5)
    if setup == "paused":
        t.feed(t.b.switch(True))
    before = t.status()
    kind, name = inp
    if kind == "button":
        event = t.feed(t.b.button(name))
    else:
        event = t.feed(t.b.supervisor(name, "AS" if name == "enter_card" else None))
    assert types(event) == ["input_rejected"]
    data = event[0]["data"]
    assert data["code"] == code and data["input"] == kind and data["name"] == name
    assert data["reason"]
    assert "AS" not in json.dumps(event)
    assert unchanged(before, t.status())


def test_dealer_reveal_on_an_automatic_table() -> None:
    t = Table().ready()
    event = t.feed(t.b.button("reveal"))
    assert event[0]["data"]["reason"] == "this table reveals the hands by itself"


# --- the fault table in the docs ------------------------------------------------------------------


def test_faults_doc_is_generated_from_the_fault_table() -> None:
    committed = (ROOT / "docs" / "faults.md").read_text(encoding="utf-8")
    assert committed == faults.faults_markdown(), (
        "docs/faults.md drifted: run `python -m controller.table.faults > docs/faults.md`")
    for code in list(faults.FAULTS) + list(faults.REJECTIONS):
        assert f"`{code}`" in committed


def test_controller_fault_input_pauses_until_resume() -> None:
    from controller.table.inputs import ControllerFault

    t = Table().ready().open_round(cards=2)
    known = t.feed(ControllerFault(t.b.t, "journal_unwritable", "disk full"))
    assert known[-1]["data"] == {"code": faults.JOURNAL_UNWRITABLE, "reason": "disk full"}
    assert t.machine.next_deadline() is None
    other = t.feed(ControllerFault(t.b.t, "clock_jump", "the clock jumped 3 s"))
    data = paused_with(other, faults.CONTROLLER_FAULT)
    assert data["detail"] == {"code": "clock_jump", "reason": "the clock jumped 3 s"}
    assert types(t.feed(t.b.supervisor("resume"))) == ["resumed"]
    assert t.machine.next_deadline() is not None


def test_misread_during_the_shoe_burns_way_out_end_shoe() -> None:
    t = Table()
    t.feed(t.b.button("new_shoe"), t.b.card("5C"), t.b.card("2D"))
    paused_with(t.feed(t.b.misread()), faults.MISREAD)
    assert t.feed(t.b.button("cancel_round"))[0]["data"]["code"] == faults.NOT_ALLOWED
    events = t.feed(t.b.supervisor("end_shoe"))
    assert types(events) == ["shoe_ended", "resumed"]
    assert events[0]["data"]["reason"] == "ended_by_supervisor"
    assert events[0]["data"]["cards_drawn"] == 2
    assert t.machine.state == "no_shoe" and t.status()["paused"] is False
    assert types(t.feed(t.b.button("new_shoe"))) == ["shoe_started"]
