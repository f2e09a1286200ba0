"""The tags of the open shoe, read back from a real journal file (controller/durability/
shoe_tags.py), and the ``tag`` of card inputs in the table-script form."""

from __future__ import annotations

from controller.durability.journal import Journal
from controller.durability.recovery import recover
from controller.durability.shoe_tags import open_shoe_tags
from controller.rules.cards import parse_card
from controller.table.inputs import Button, CardScan, CutCard, Input, parse_line, to_json
from controller.table.machine import MachineSettings, TableMachine

SETTINGS = MachineSettings(betting_seconds=600, decks=8)


def play(journal: Journal, machine: TableMachine, inputs: list[Input]) -> None:
    for inp in inputs:
        journal.append(inp, machine.handle(inp))


def shoe(start: float, tags: list[tuple[str, str]]) -> list[Input]:
    inputs: list[Input] = [Button(start, "new_shoe")]
    for i, (code, tag) in enumerate(tags, start=1):
        inputs.append(CutCard(start + i, tag) if code == "CUT"
                      else CardScan(start + i, parse_card(code), tag))
    return inputs


def test_no_shoe_ever_started_means_no_tags(tmp_path):
    with Journal(tmp_path / "journal.sqlite") as journal:
        assert open_shoe_tags(journal) == []


def test_the_tags_since_the_newest_shoe_started(tmp_path):
    machine = TableMachine(SETTINGS)
    with Journal(tmp_path / "journal.sqlite") as journal:
        play(journal, machine, shoe(0.0, [("AS", "5A00000000"), ("2S", "5A00000001")]))
        play(journal, machine, [Button(10.0, "end_shoe")])
        play(journal, machine, shoe(20.0, [("AS", "5A00000034"), ("3S", "5A00000002"),
                                           ("CUT", "5ACC00C007")]))
        play(journal, machine, [CardScan(30.0, parse_card("4S"))])  # a line reader: no tag
        assert open_shoe_tags(journal) == ["5A00000034", "5A00000002", "5ACC00C007"]
        # the tags change nothing the table does: recovery replays the same events
        assert recover(journal, SETTINGS).status() == machine.status()


def test_card_inputs_carry_their_tag_in_the_script_form():
    card = CardScan(1.0, parse_card("7H"), "5A00000006")
    line = to_json(card)
    assert '"tag": "5A00000006"' in line
    again = parse_line(line)
    assert isinstance(again, CardScan) and again.tag == "5A00000006"
    assert to_json(CardScan(1.0, parse_card("7H"))) == '{"at": 1.0, "kind": "card", "card": "7H"}'
    cut = parse_line('{"at": 2, "kind": "cut_card", "tag": "5ACC00C007"}')
    assert isinstance(cut, CutCard) and cut.tag == "5ACC00C007"
