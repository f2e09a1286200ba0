"""The screens' words and memory, from a real table machine's events and status views."""

from __future__ import annotations

from typing import Any

from controller.display.screen import Screen, banner, next_step, result_summary
from controller.rules.cards import parse_card
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import Actor, Button, CardScan, Supervisor, Switch, Tick
from controller.table.machine import MachineSettings, TableMachine
from support.sealing import Leaks


def played(seed: int = 3) -> tuple[TableMachine, list[dict[str, Any]]]:
    machine = TableMachine(MachineSettings())
    events: list[dict[str, Any]] = []
    for inp in shoe_script(seed):
        events += machine.handle(inp)
    return machine, events


def open_round(machine: TableMachine, cards: int, at: float = 1.0) -> list[str]:
    """New shoe, flip 2 (burn 2), start a round ``at`` + 4 s (seconds since the epoch) and deal
    ``cards`` (the burn first)."""
    dealt = ["2S", "3S", "4S", "5D", "6D", "7D", "8D", "9D", "TD", "JD", "QD", "KD", "AC",
             "2C", "3C", "4C"]
    for inp in (Button(at, "new_shoe"), CardScan(at + 1, parse_card("2H")),
                CardScan(at + 2, parse_card("3H")), CardScan(at + 3, parse_card("4H")),
                Button(at + 4, "start_round")):
        machine.handle(inp)
    for index in range(cards):
        machine.handle(CardScan(at + 5 + index * 0.1, parse_card(dealt[index])))
    return dealt[:cards]


def test_the_next_step_names_the_card_and_where_it_goes() -> None:
    machine = TableMachine(MachineSettings())
    open_round(machine, 0)
    assert next_step(machine.status()) == "burn 1 card"
    open_round(machine := TableMachine(MachineSettings()), 8)  # burn + 7: the 8th goes to P2
    status = machine.status()
    assert status["next_target"] == "P2"
    assert next_step(status) == "deal card 8 of 12: Player 2, second card"
    open_round(machine := TableMachine(MachineSettings()), 6)
    assert next_step(machine.status()) == "deal card 6 of 12: Banker, first card"


def test_no_hand_is_shown_while_betting_is_open_and_all_are_after() -> None:
    machine = TableMachine(MachineSettings())
    cards = open_round(machine, 13)
    leaks = Leaks()
    for card in cards:
        leaks.add_card(card)
    view = Screen().view(machine.status())
    assert view["betting"]["open"] and view["hands"] == {}
    leaks.check("the screen's view", view)
    assert view["step"] == "all cards dealt — wait for betting to close"
    closes = machine.next_deadline()
    assert closes is not None
    screen = Screen()
    for event in machine.handle(Tick(closes + 0.1)):  # betting closes; auto reveal settles
        screen.apply(event)
    assert not screen.view(machine.status())["betting"]["open"]
    shown = screen.results_message()[0]["seats"]
    assert [seat["seat"] for seat in shown] == ["P1", "P2", "P3", "P4", "P5", "banker"]
    assert sorted(c for seat in shown for c in seat["cards"]) == sorted(cards[1:])


def test_a_supervisor_pause_names_the_role_never_the_login_and_the_way_out() -> None:
    machine = TableMachine(MachineSettings())
    open_round(machine, 3)
    pause = Supervisor(10.0, "pause", by=Actor("maria", 1001))
    events = machine.handle(pause)
    status = dict(machine.status(), last_actions=[
        {"action": "pause", "outcome": "done", "by": {"user": "maria", "uid": 1001}}])
    shown = banner(status)
    assert shown is not None and events[0]["type"] == "paused"
    assert shown["code"] == "supervisor_pause"
    assert shown["by"] == "a supervisor"  # the journal keeps who; a screen may be on camera
    assert "maria" not in str(Screen().view(status))
    assert "resume" in shown["way_out"]
    assert Screen().view(status)["betting"]["frozen"] is True
    machine.handle(Supervisor(11.0, "resume"))
    assert banner(machine.status()) is None


def test_the_key_switch_pause_says_the_key_did_it() -> None:
    machine = TableMachine(MachineSettings())
    open_round(machine, 2)
    machine.handle(Switch(10.0, "pause", True))
    shown = banner(machine.status())
    assert shown is not None and shown["code"] == "switch_pause"
    assert shown["by"] == "the key switch" and "RUN" in shown["way_out"]


def test_the_roadmap_and_results_follow_the_round_results_once() -> None:
    _, events = played()
    results = [e for e in events if e["type"] == "round_result"]
    screen = Screen()
    changed = [screen.apply(event) for event in events]
    assert sum("roadmap" in c for c in changed) == len(results) + 1  # + the shoe_started
    assert screen.roadmap.rounds == tuple(e["round"] for e in results)
    for event in events:  # the same events again (history, then live): nothing changes
        assert screen.apply(event) == set()
    last = screen.results_message()[0]
    assert last == dict(result_summary(results[-1]), game=screen.game_id(
        results[-1]["shoe"], results[-1]["round"]))
    assert last["game"].startswith(f"{results[-1]['table']}-{results[-1]['shoe']}-"
                                   f"{results[-1]['round']}-")
    positions = results[-1]["data"]["positions"]
    assert last["pairs_won"] == [p for p in ("P1", "P2", "P3", "P4", "P5")
                                 if positions[p]["pair"]]
    svg = screen.roadmap_message()["svg"]
    assert svg.count('class="bead"') == 5 * len(results)


def test_health_lists_devices_key_backends_journal_and_clock() -> None:
    machine = TableMachine(MachineSettings())
    status = dict(machine.status(), journal="ok")
    rows = Screen().view(status, {"http": {"backlog": 120, "state": "ok"},
                                  "file": {"backlog": 0, "state": "ok"}})["health"]
    by_name = {row["name"]: row for row in rows}
    assert set(by_name) == {"shoe", "panel", "key", "http", "file", "journal", "clock"}
    def said(row: dict) -> tuple:
        return row["ok"], row["label"], row["text"], row["key"], row["args"]
    assert said(by_name["http"]) == (False, "Results to http", "120 waiting", "health.to_send",
                                     {"n": 120})
    assert said(by_name["file"]) == (True, "Results to file", "all sent", "health.up_to_date", {})
    assert by_name["key"]["ok"] and by_name["journal"]["ok"]
    assert said(by_name["clock"]) == (False, "Clock", "unknown", "health.unknown", {})
    assert said(by_name["shoe"])[:3] == (True, "Card shoe", "connected")


def test_health_says_why_a_backend_or_the_journal_is_in_trouble() -> None:
    status = dict(TableMachine(MachineSettings()).status(), journal="ok",
                  clock_sync="synchronised",
                  backends_unreachable={"mqtt": "no subscriber for 30 s"},
                  journal_check={"state": "failed", "reason": "record 7: hash differs"})
    rows = Screen().view(status, {"http": {"backlog": 3, "state": "refused"},
                                  "mqtt": {"backlog": 40, "state": "no subscriber"},
                                  "file": {"error": "gone"}})["health"]
    by_name = {row["name"]: (row["ok"], row["text"]) for row in rows}
    assert by_name["http"] == (False, "REFUSED · 3 waiting")
    assert by_name["mqtt"] == (False, "UNREACHABLE · 40 waiting")
    assert by_name["file"] == (False, "no status")
    assert by_name["journal"] == (False, "CHECK FAILED")
    assert by_name["clock"] == (True, "synced")
    assert by_name["key"] == (True, "RUN")


def test_a_backend_whose_word_is_awaited_is_starting_not_disconnected() -> None:
    """Its events wait until it has said where it stands (docs/backend.md)."""
    from controller.durability.delivery.outbox import WAITING_FOR_WORD

    status = dict(TableMachine(MachineSettings()).status(), journal="ok")
    rows = Screen().view(status, {"http": {"backlog": 5, "state": WAITING_FOR_WORD}})["health"]
    by_name = {row["name"]: (row["ok"], row["text"]) for row in rows}
    assert by_name["http"] == (False, "starting · 5 waiting")


def test_the_roadmap_message_carries_the_beads_the_pages_draw() -> None:
    """The pages draw the bead plates themselves (their language, their room): the message
    carries every bead as the roadmap has it, and roadmap_svg's colours."""
    from controller.display.roadmap_svg import COLOURS

    _, events = played()
    screen = Screen()
    for event in events:
        screen.apply(event)
    message = screen.roadmap_message()
    board = screen.roadmap.to_json()
    assert message["colours"] == COLOURS
    assert message["beads"] == {p: plate["beads"] for p, plate in board["positions"].items()}
    assert sum(len(b) for b in message["beads"].values()) == 5 * board["rounds"] > 0
