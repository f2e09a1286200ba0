"""A frame the shoe driver does not know pauses an open shoe (it may be a cut card that
``cut_card_frames`` does not name); its content stays sealed until betting closes."""

from __future__ import annotations

from controller.rules.cards import parse_card
from controller.table import faults
from controller.table.inputs import Button, CardScan, Misread, Supervisor, Tick
from controller.table.machine import MachineSettings, TableMachine

FRAME = {"frame": "<Shoe:7H>"}


def unknown(at: float) -> Misread:
    return Misread(at, faults.UNKNOWN_SHOE_FRAME, "the shoe sent a frame of unknown meaning",
                   FRAME)


def betting_table() -> TableMachine:
    machine = TableMachine(MachineSettings(betting_seconds=10, decks=8))
    machine.handle(Button(0.0, "new_shoe"))
    machine.handle(CardScan(1.0, parse_card("AS")))  # flip: one burn
    machine.handle(CardScan(2.0, parse_card("2S")))
    machine.handle(Button(3.0, "start_round"))
    assert machine.state == "betting"
    return machine


def test_with_no_shoe_open_it_is_only_logged(caplog):
    machine = TableMachine(MachineSettings())
    caplog.set_level("INFO")
    assert machine.handle(unknown(1.0)) == []
    assert machine.hold == "running"
    assert "unknown shoe frame with no shoe open" in caplog.text and "7H" not in caplog.text


def test_during_betting_it_pauses_and_the_frame_follows_when_betting_closes():
    machine = betting_table()
    events = machine.handle(unknown(4.0))
    assert [e["type"] for e in events] == ["paused"]
    paused = events[0]["data"]
    assert paused["code"] == faults.UNKNOWN_SHOE_FRAME
    assert "7H" not in str(events) and "Shoe" not in str(events)
    assert machine.card_owed is None  # nothing was dealt: resume is not blocked by a card
    assert "7H" not in str(machine.status())
    resumed = machine.handle(Supervisor(5.0, "resume"))
    assert [e["type"] for e in resumed] == ["resumed"]
    closed = machine.handle(Tick(30.0))
    detail = [e for e in closed if e["type"] == "fault_detail"]
    assert [e["data"] for e in detail] == [{"code": faults.UNKNOWN_SHOE_FRAME,
                                           "paused_seq": events[0]["seq"], "evidence": FRAME}]


def test_between_rounds_the_frame_is_published_at_once():
    machine = betting_table()
    machine.handle(Supervisor(4.0, "cancel_round"))
    events = machine.handle(unknown(5.0))
    assert [e["type"] for e in events] == ["paused", "fault_detail"]
    assert events[1]["data"]["evidence"] == FRAME


def test_it_is_a_documented_fault():
    assert faults.UNKNOWN_SHOE_FRAME in faults.FAULTS
    assert "read-shoe --learn-cut" in faults.FAULTS[faults.UNKNOWN_SHOE_FRAME].way_out
