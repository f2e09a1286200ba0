"""The players' status (scoreboard, overlay): from a real table machine's events and status,
what a pause, a misread and a cancel mean for the bets, a cancelled round kept in its place,
the game id, and nothing a player must not see (no fault code, no login, no device)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from test_screen import open_round

from controller.display.players import players_view
from controller.display.screen import Screen
from controller.display.server import DisplayServer
from controller.display.settings import DisplaySettings
from controller.display.studio import parse_studio
from controller.rules.cards import parse_card
from controller.service.screens.wire import SealedFilter
from controller.table.inputs import Actor, Button, CardScan, Misread, Supervisor, Tick
from controller.table.machine import MachineSettings, TableMachine
from support.display_helpers import request
from support.waiting import wait_until

#: an internal code as a player must never read it: a snake_case word
SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")


def screen_of(machine: TableMachine, events: list[dict[str, Any]]) -> Screen:
    screen = Screen()
    for event in SealedFilter().events(events):
        screen.apply(event)
    return screen


def shown_to_players(machine: TableMachine, screen: Screen) -> dict[str, Any]:
    status = SealedFilter.status(dict(machine.status(), last_actions=[
        {"action": "pause", "outcome": "done", "by": {"user": "maria", "uid": 1001}}]))
    return players_view(screen.view(status), screen)


def words_in(view: dict[str, Any]) -> str:
    """The players' view as text, without the words' keys (``notice.paused`` is a key the page
    translates, not a word it shows)."""
    text = json.dumps(view)
    for key in ("notice", "call"):
        if isinstance(view.get(key), dict):
            text = text.replace(view[key]["key"], "").replace(view[key]["kind"], "")
        elif isinstance(view.get(key), str):
            text = text.replace(view[key], "")
    return text


def test_a_supervisor_pause_tells_players_the_round_continues_and_names_nobody() -> None:
    machine = TableMachine(MachineSettings())
    open_round(machine, 3)
    events = machine.handle(Supervisor(10.0, "pause", by=Actor("maria", 1001)))
    view = shown_to_players(machine, screen_of(machine, events))
    assert view["paused"] and view["notice"] == {"kind": "paused", "key": "notice.paused",
                                                 "args": {}}
    assert view["call"] is None  # no "place your bets" while paused
    text = words_in(view)
    assert "maria" not in text and "supervisor" not in text
    assert not SNAKE.findall(text.replace("rounds_played", "").replace("cards_left", "")
                             .replace("last_round", "").replace("seconds_left", "")
                             .replace("result_held", "")), text
    assert not {"banner", "health", "step", "step_words", "target"} & set(view)


def test_a_misread_tells_players_a_card_is_being_checked() -> None:
    machine = TableMachine(MachineSettings())
    open_round(machine, 4)
    events = machine.handle(Misread(10.0, code="beetek_card_not_read"))
    view = shown_to_players(machine, screen_of(machine, events))
    assert view["notice"]["key"] == "notice.misread"
    assert "beetek_card_not_read" not in json.dumps(view) and "misread" not in words_in(view)


def test_a_cancelled_round_keeps_its_place_and_says_all_bets_are_refunded() -> None:
    machine = TableMachine(MachineSettings())
    open_round(machine, 5)
    events = machine.handle(Supervisor(10.0, "cancel_round", by=Actor("maria", 1001)))
    assert any(e["type"] == "round_cancelled" for e in events)
    screen = screen_of(machine, events)
    number = next(e["round"] for e in events if e["type"] == "round_cancelled")
    view = shown_to_players(machine, screen)
    assert view["notice"] == {"kind": "cancelled", "key": "notice.cancelled",
                              "args": {"n": number}}
    last = screen.results_message()[0]
    assert last["cancelled"] and last["round"] == number and last["seats"] == []
    assert screen.roadmap_message()["cancelled"] == [number]
    assert "maria" not in json.dumps(view)


def test_the_cancel_notice_lasts_through_the_next_round_until_its_result() -> None:
    machine = TableMachine(MachineSettings())
    open_round(machine, 5)
    screen = Screen()
    for event in machine.handle(Supervisor(10.0, "cancel_round")):
        screen.apply(event)
    assert screen.cancelled_round is not None
    opened = machine.handle(Button(20.0, "start_round"))
    for event in opened:
        screen.apply(event)
    assert any(e["type"] == "round_opened" for e in opened)
    view = players_view(screen.view(machine.status()), screen)
    assert view["notice"]["key"] == "notice.cancelled" and view["call"] == "call.place_bets"
    # a pause in that next round is the news of the moment
    paused = machine.handle(Supervisor(21.0, "pause"))
    for event in paused:
        screen.apply(event)
    assert players_view(screen.view(machine.status()), screen)["notice"]["key"] == "notice.paused"
    machine.handle(Supervisor(22.0, "resume"))
    # the next round's result ends it; the cancelled round keeps its place
    for event in settle(machine, 23.0):
        screen.apply(event)
    view = players_view(screen.view(machine.status()), screen)
    assert view["notice"] is None
    assert [r.get("cancelled", False) for r in screen.results_message()] == [False, True]
    assert screen.roadmap_message()["cancelled"] == [screen.results_message()[1]["round"]]


def settle(machine: TableMachine, at: float) -> list[dict[str, Any]]:
    """Deal the open round's burn and twelve cards, then let betting close: its result."""
    events: list[dict[str, Any]] = []
    cards = iter(["5C", "6C", "7C", "8C", "9C", "TC", "JC", "QC", "KC", "AH", "5H", "6H", "7H"])
    while machine.status().get("next_target") is not None:
        at += 0.1
        events += machine.handle(CardScan(at, parse_card(next(cards))))
    closes = machine.next_deadline()
    assert closes is not None
    events += machine.handle(Tick(closes + 0.1))
    assert any(e["type"] == "round_result" for e in events), [e["type"] for e in events]
    return events


def test_the_game_id_names_table_shoe_round_and_day() -> None:
    screen = Screen(ZoneInfo("UTC"))
    screen.apply({"seq": 1, "type": "round_opened", "table": "PD07", "shoe": 3, "round": 12,
                  "time": "2026-12-02T11:30:00.000Z", "data": {"betting_seconds": 15}})
    assert screen.game_id(3, 12) == "PD07-3-12-20261202"
    assert screen.game_id(3, None) is None  # no round open and no result yet


#: a round opened half an hour before midnight in London: already the next morning in Manila
LATE_EVENING_UTC = datetime(2026, 12, 1, 23, 30, tzinfo=UTC).timestamp()


def opened_late_evening_utc() -> tuple[TableMachine, list[dict[str, Any]]]:
    """A table machine whose round opened at 2026-12-01T23:30Z, and its events."""
    machine = TableMachine(MachineSettings())
    events: list[dict[str, Any]] = []
    for inp in (Button(LATE_EVENING_UTC - 4, "new_shoe"),
                CardScan(LATE_EVENING_UTC - 3, parse_card("2H")),
                CardScan(LATE_EVENING_UTC - 2, parse_card("3H")),
                CardScan(LATE_EVENING_UTC - 1, parse_card("4H")),
                Button(LATE_EVENING_UTC, "start_round")):
        events += machine.handle(inp)
    opened = [e for e in events if e["type"] == "round_opened"]
    assert [e["time"][:16] for e in opened] == ["2026-12-01T23:30"], opened
    return machine, events


@pytest.mark.parametrize("zone, day", [("Asia/Manila", "20261202"),
                                       ("Europe/London", "20261201")])
def test_the_game_id_has_the_tables_local_day(zone: str, day: str) -> None:
    machine, events = opened_late_evening_utc()
    screen = Screen(ZoneInfo(zone))
    for event in SealedFilter().events(events):
        screen.apply(event)
    status = machine.status()
    view = players_view(screen.view(status), screen)
    assert view["game"] == f"{status['table']}-{status['shoe']}-{status['round']}-{day}"
    # the round's result keeps the day it opened on
    events = settle(machine, LATE_EVENING_UTC + 1)
    for event in SealedFilter().events(events):
        screen.apply(event)
    assert screen.results_message()[0]["game"] == view["game"]


def test_the_display_server_dates_game_ids_in_the_studios_zone() -> None:
    machine, events = opened_late_evening_utc()
    studio, problems = parse_studio({"timezone": "Asia/Manila"})
    assert not problems, problems
    status = machine.status()
    display = DisplayServer(DisplaySettings(port=0, studio=studio), lambda: (1, dict(status)))
    display.start()
    try:
        display.offer_events(SealedFilter().events(events))
        wanted = f"{status['table']}-{status['shoe']}-{status['round']}-20261202"

        def game() -> object:
            shown = json.loads(request(display.port, "/players/state.json")[2])
            return (shown.get("status") or {}).get("game")
        wait_until(lambda: game() == wanted, 10, f"the game id {wanted}")
    finally:
        display.close()
