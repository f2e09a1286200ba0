"""The event encoders keep one JSON encoder each instead of json.dumps' per-call one: the text
must be json.dumps' to the byte, for events and for the awkward values a journal may hold."""

from __future__ import annotations

import json
import math

import pytest

from controller.durability.journal import canonical_json
from controller.table.events import to_json_line
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine

AWKWARD = [
    {"b": 1, "a": [1.5, -0.0, 1e300, True, None], "é": "♥ Q\u2665 \x00 \ud800"},
    {"nested": {"z": {"y": [{}, []]}, "a": ""}, "int": 10**30},
    "a plain string ♠", 3, 2.5, None, [],
]


def test_the_texts_are_json_dumps_to_the_byte() -> None:
    machine = TableMachine(MachineSettings(table_id="tâble-♦"))
    events = [event for inp in shoe_script(3) for event in machine.handle(inp)]
    for value in events + AWKWARD:
        assert to_json_line(value) == json.dumps(  # type: ignore[arg-type]
            value, ensure_ascii=False, separators=(",", ":"))
        assert canonical_json(value) == json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@pytest.mark.parametrize("bad", [math.nan, math.inf, {"x": -math.inf}])
def test_canonical_json_still_refuses_what_json_cannot_hold(bad: object) -> None:
    with pytest.raises(ValueError):
        canonical_json(bad)


def test_no_event_holds_a_whole_number_as_a_float() -> None:
    """``15.0`` (a config's betting_seconds, a clock's 16.0) is written ``15``: the one form
    every JSON library writes back, so a backend in any language hashes the table's bytes;
    a real fraction (a hand's 7.1, a clock's 1.6e-05) stays a float."""
    from controller.table.inputs import ClockReport

    machine = TableMachine(MachineSettings(table_id="T01", betting_seconds=15.0))
    inputs = [ClockReport(0.0, "not_synchronised", 16.0),
              ClockReport(0.0, "synchronised", 1.6e-05, -2.0), *shoe_script(3)]
    events = [event for inp in inputs for event in machine.handle(inp)]
    floats: list[float] = []

    def walk(value: object) -> None:
        if isinstance(value, float):
            floats.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for event in events:
        walk(event)
    assert floats and not [value for value in floats if value.is_integer()]
    assert 1.6e-05 in floats and any(7 < value < 8 for value in floats)  # a combination
    opened = [e for e in events if e["type"] == "round_opened"]
    assert opened and all(type(e["data"]["betting_seconds"]) is int for e in opened)
    assert [e["data"] for e in events[:2]] == [
        {"sync": "not_synchronised", "max_error_s": 16},
        {"sync": "synchronised", "max_error_s": 1.6e-05, "step_s": -2}]
