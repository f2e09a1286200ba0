"""The roadmap model: built from the real table machine's round_result events, checked bead by
bead against the hands in those events (worked out again here from the cards), strict about a
malformed round_result, blind to everything else (so nothing sealed can reach it)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.display.roadmap_svg import render_svg
from controller.rules.hands import evaluate_hand
from controller.table.generators.scriptgen import ScriptBuilder, shoe_script
from controller.table.inputs import read_script, to_dict
from controller.table.machine import MachineSettings, TableMachine
from controller.table.roadmap import POSITIONS, Bead, Counts, Roadmap, RoadmapError
from support.sealing import Leaks

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def play(inputs, settings: MachineSettings | None = None) -> list[dict]:
    machine = TableMachine(settings or MachineSettings())
    return [event for inp in inputs for event in machine.handle(inp)]


def seed1_events() -> list[dict]:
    with open(SCRIPTS / "shoe_seed1.jsonl", encoding="utf-8") as script:
        return play(list(read_script(script, "shoe_seed1.jsonl")))


def expected_bead(event: dict, position: int) -> Bead:
    """The bead the sheets define, from the round's cards alone: blue/grey/green by comparing
    the two hands' values, ring when the Player's two cards share a suit, dot when they share
    a rank."""
    hands = event["data"]["hands"]
    player_cards = hands[f"P{position}"]["cards"]
    player, banker = evaluate_hand(player_cards), evaluate_hand(hands["banker"]["cards"])
    outcome = ("win" if player.tenths > banker.tenths
               else "lose" if player.tenths < banker.tenths else "tie")
    first, second = player_cards
    return Bead(event["round"], outcome, first[1] == second[1], first[0] == second[0])


@pytest.fixture(scope="module")
def shoe_events() -> list[dict]:
    return seed1_events()


def test_a_whole_shoe_gives_one_bead_per_round_per_position_as_the_cards_say(shoe_events):
    roadmap = Roadmap.from_events(shoe_events)
    results = [e for e in shoe_events if e["type"] == "round_result"]
    ended = [e for e in shoe_events if e["type"] == "shoe_ended"][-1]
    assert roadmap.shoe == 1 and roadmap.table == "table-1"
    assert roadmap.rounds == tuple(range(1, ended["data"]["rounds"] + 1))
    assert len(results) == ended["data"]["rounds"] > 15
    for position in POSITIONS:
        assert list(roadmap.beads[position]) == [expected_bead(e, position) for e in results]
    # the shoe is varied enough to show every mark
    beads = [bead for position in POSITIONS for bead in roadmap.beads[position]]
    assert {bead.outcome for bead in beads} == {"win", "lose", "tie"}
    assert any(bead.flush for bead in beads) and any(bead.pair for bead in beads)


def test_counts_add_up_per_position(shoe_events):
    roadmap = Roadmap.from_events(shoe_events)
    for position in POSITIONS:
        beads = roadmap.beads[position]
        counts = roadmap.counts(position)
        assert counts == Counts(
            wins=len([b for b in beads if b.outcome == "win"]),
            losses=len([b for b in beads if b.outcome == "lose"]),
            ties=len([b for b in beads if b.outcome == "tie"]),
            flushes=len([b for b in beads if b.flush]),
            pairs=len([b for b in beads if b.pair]))
        assert counts.wins + counts.losses + counts.ties == len(roadmap.rounds)
    with pytest.raises(ValueError, match="position must be 1..5, got 6"):
        roadmap.counts(6)


def test_to_json_is_plain_json_of_the_same_beads(shoe_events):
    roadmap = Roadmap.from_events(shoe_events)
    data = json.loads(json.dumps(roadmap.to_json()))
    assert data["shoe"] == 1 and data["rounds"] == len(roadmap.rounds)
    for position in POSITIONS:
        entry = data["positions"][f"P{position}"]
        assert entry["counts"] == roadmap.counts(position)._asdict()
        assert [Bead(**bead) for bead in entry["beads"]] == list(roadmap.beads[position])


def test_add_says_when_it_changed_and_a_duplicate_changes_nothing(shoe_events):
    roadmap = Roadmap()
    changed = [event for event in shoe_events if roadmap.add(event)]
    assert {e["type"] for e in changed} == {"shoe_started", "round_result"}
    assert len(changed) == 1 + len(roadmap.rounds)
    before = roadmap.to_json()
    for event in changed:  # delivered again: at-least-once, or history then live
        assert roadmap.add(event) is False
    assert roadmap.to_json() == before


def test_a_new_shoe_starts_fresh_plates():
    first = shoe_script(5, decks=1)
    second = shoe_script(6, decks=1, start_at=first[-1].at + 10)
    events = play(first + second, MachineSettings(decks=1))
    roadmap = Roadmap()
    for event in events:
        roadmap.add(event)
        if event["type"] == "shoe_started":
            assert roadmap.shoe == event["shoe"] and roadmap.rounds == ()
    second_shoe = [e for e in events if e["shoe"] == 2]
    assert roadmap.shoe == 2
    assert roadmap.to_json() == Roadmap.from_events(second_shoe).to_json()
    assert len(roadmap.rounds) == second_shoe[-1]["data"]["rounds"]


def test_a_round_joined_mid_shoe_takes_that_shoe():
    """A roadmap fed from the middle (its shoe_started archived or missed) still shows the
    shoe the rounds belong to."""
    events = play(shoe_script(5, decks=1))
    results = [e for e in events if e["type"] == "round_result"]
    roadmap = Roadmap.from_events(results[1:])
    assert roadmap.shoe == 1 and roadmap.rounds == tuple(e["round"] for e in results[1:])


def test_a_cancelled_round_has_no_bead_and_the_numbers_go_on():
    b = ScriptBuilder()
    cards = iter(["3H", "2S", "2C", "2D"] + ["9S", "AS", "5H", "5D", "JC", "QD", "TH", "KS",
                                            "4C", "6C", "2H", "7D", "8H"] * 3)
    inputs = [b.button("new_shoe")] + [b.card(next(cards)) for _ in range(4)]

    def round_(cancel: bool) -> None:
        inputs.append(b.button("start_round"))
        inputs.extend(b.card(next(cards)) for _ in range(3 if cancel else 13))
        inputs.append(b.button("cancel_round") if cancel else b.tick(at=b.t + 20))

    round_(False)
    round_(True)
    round_(False)
    events = play(inputs)
    assert [e["type"] for e in events].count("round_cancelled") == 1
    roadmap = Roadmap.from_events(events)
    assert roadmap.rounds == (1, 3)
    assert all(len(roadmap.beads[p]) == 2 for p in POSITIONS)


@st.composite
def shoes(draw):
    decks = draw(st.integers(1, 3))
    return (decks, shoe_script(draw(st.integers(0, 2**31)), decks=decks,
                               reveal=draw(st.sampled_from(["auto", "button"])),
                               cut_depth=draw(st.floats(0.2, 0.95))))


def test_generated_scripts_tick_no_earlier_than_each_betting_deadline():
    """The generator's countdown tick is exactly at the deadline, never a rounding before it
    (Hypothesis found a shoe whose last round never closed: 115.165 + 15.0 is
    130.16500000000002, and a tick at round(…, 3) came too early to close anything)."""
    for seed in range(60):
        script = shoe_script(seed, decks=2, start_at=seed * 7.919)
        opened = [i.at for i in script if getattr(i, "name", None) == "start_round"]
        ticks = [i.at for i in script if i.kind == "tick"]
        assert ticks, f"seed {seed}: no round finished dealing before its deadline"
        for tick in ticks:
            start = max(t for t in opened if t < tick)
            assert tick >= start + 15.0, f"seed {seed}: tick at {tick!r} before the deadline"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shoes())
def test_property_beads_per_position_equal_the_rounds_of_the_shoe(shoe):
    decks, script = shoe
    reveal = "button" if any(getattr(i, "name", None) == "reveal" for i in script) else "auto"
    events = play(script, MachineSettings(decks=decks, reveal=reveal))
    ended = [e for e in events if e["type"] == "shoe_ended"]
    assert len(ended) == 1
    roadmap = Roadmap.from_events(events)
    for position in POSITIONS:
        assert len(roadmap.beads[position]) == ended[0]["data"]["rounds"]
    assert roadmap.rounds == tuple(range(1, ended[0]["data"]["rounds"] + 1))


# --- malformed round_result: a clear error naming the seq and the field, nothing lost ------

def _drop(path: str):
    def edit(event: dict) -> None:
        *parents, last = path.split(".")
        target = event
        for key in parents:
            target = target[key]
        del target[last]
    return edit


def _set(path: str, value):
    def edit(event: dict) -> None:
        *parents, last = path.split(".")
        target = event
        for key in parents:
            target = target[key]
        target[last] = value
    return edit


@pytest.mark.parametrize("edit,message", [
    (_drop("data.positions.P3"), r"round_result seq \d+: data\.positions\.P3\.bead is missing"),
    (_drop("data.positions.P2.bead"),
     r"round_result seq \d+: data\.positions\.P2\.bead is missing"),
    (_set("data.positions.P4.bead.result", "blue"),
     r"round_result seq \d+: data\.positions\.P4\.bead\.result is 'blue', expected one of "
     r"win, lose, tie"),
    (_set("data.positions.P5.bead.flush", "yes"),
     r"round_result seq \d+: data\.positions\.P5\.bead\.flush is 'yes', expected true/false"),
    (_drop("data.positions.P1.bead.pair"),
     r"round_result seq \d+: data\.positions\.P1\.bead\.pair is None"),
    (_set("data.positions", []), r"round_result seq \d+: data\.positions is missing"),
    (_drop("data"), r"round_result seq \d+: data is missing"),
    (_set("round", None), r"round_result seq \d+: round is not a round number \(None\)"),
    (_set("round", "7"), r"round_result seq \d+: round is not a round number \('7'\)"),
    (_set("shoe", 0), r"round_result seq \d+: shoe is not a shoe number \(0\)"),
    (_drop("seq"), r"round_result event without a whole-number seq \(None\)"),
    (_set("seq", True), r"round_result event without a whole-number seq \(True\)"),
])
def test_a_malformed_round_result_is_refused_naming_seq_and_field(shoe_events, edit, message):
    results = [e for e in shoe_events if e["type"] == "round_result"]
    roadmap = Roadmap.from_events(e for e in shoe_events if e["seq"] < results[3]["seq"])
    before = roadmap.to_json()
    bad = copy.deepcopy(results[3])
    edit(bad)
    with pytest.raises(RoadmapError, match=message):
        roadmap.add(bad)
    assert roadmap.to_json() == before  # nothing accepted is lost, nothing half-added
    assert roadmap.add(results[3]) is True  # and the good one still goes on


def test_a_round_already_on_the_plates_under_a_new_seq_is_refused(shoe_events):
    results = [e for e in shoe_events if e["type"] == "round_result"]
    roadmap = Roadmap.from_events(results[:3])
    replayed = dict(results[1], seq=results[2]["seq"] + 1)
    with pytest.raises(RoadmapError, match=rf"round_result seq {replayed['seq']}: round 2 of "
                                           r"shoe 1 is already on the roadmap \(last round 3\)"):
        roadmap.add(replayed)


# --- sealing: only round_result (after betting closed) ever adds a bead -------------------

def test_nothing_before_betting_closed_adds_anything_or_shows_a_card(shoe_events):
    """Feed the roadmap the whole shoe live. Every event and input of a round whose betting is
    open leaves it unchanged, and neither its JSON nor its SVG names a card of that round."""
    with open(SCRIPTS / "shoe_seed1.jsonl", encoding="utf-8") as script:
        inputs = list(read_script(script, "shoe_seed1.jsonl"))
    hands = {e["round"]: [c for h in e["data"]["hands"].values() for c in h["cards"]]
             for e in shoe_events if e["type"] == "round_result"}
    machine = TableMachine(MachineSettings())
    roadmap = Roadmap()
    open_round: int | None = None
    checked = 0
    for inp in inputs:
        for event in machine.handle(inp):
            if event["type"] == "round_opened":
                open_round = event["round"]
            elif event["type"] == "betting_closed" and open_round is not None:
                # what the roadmap shows at the end of the window, against that round's cards
                leaks = Leaks()
                for card in hands[open_round]:
                    leaks.add_card(card)
                leaks.check("roadmap JSON", roadmap.to_json())
                leaks.check("roadmap SVG", render_svg(roadmap))
                open_round = None
            if open_round is None:
                roadmap.add(event)
                continue
            before = roadmap.to_json()
            assert roadmap.add(event) is False, event["type"]
            assert roadmap.add(to_dict(inp)) is False  # the input itself, as journaled
            assert roadmap.to_json() == before
            checked += 1
    assert checked > 24 * 13  # every round's deal was fed while its betting was open
    assert len(roadmap.rounds) == 24
