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
