"""The JSON Schemas in controller/table/schemas/ cover every event type, are valid draft 2020-12,
accept every event the sample scripts produce and refuse malformed ones."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from controller.commands.replay import settings_from_config
from controller.table.events import EVENT_TYPES, EventSchemaError, load_schema, validate_event
from controller.table.inputs import read_script
from controller.table.machine import MachineSettings, TableMachine

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "tests" / "scripts").glob("*.jsonl"))


def replay_file(path: Path) -> list[dict]:
    config = path.with_suffix(".yaml")
    settings = settings_from_config(str(config)) if config.exists() else MachineSettings()
    machine = TableMachine(settings)
    with path.open(encoding="utf-8") as handle:
        return [event for inp in read_script(handle, str(path)) for event in machine.handle(inp)]


@pytest.fixture(scope="module")
def sample_events() -> dict[str, list[dict]]:
    return {path.name: replay_file(path) for path in SCRIPTS}


def test_one_schema_per_event_type_and_all_valid() -> None:
    files = {p.stem for p in (ROOT / "controller" / "table" / "schemas").glob("*.json")}
    assert files == set(EVENT_TYPES) | {"envelope", "common"}
    for name in files:
        schema = load_schema(name)
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"].endswith(f"/{name}.json")
    assert load_schema("envelope")["properties"]["type"]["enum"] == list(EVENT_TYPES)


def test_every_sample_event_validates_and_every_type_occurs(sample_events) -> None:
    assert len(SCRIPTS) >= 3
    seen = set()
    for name, events in sample_events.items():
        assert events, name
        for event in events:
            validate_event(event)
            seen.add(event["type"])
    assert seen == set(EVENT_TYPES)


def _first(sample_events, type_: str) -> dict:
    for events in sample_events.values():
        for event in events:
            if event["type"] == type_:
                return copy.deepcopy(event)
    raise AssertionError(type_)


@pytest.mark.parametrize("type_,mutate,message", [
    ("card_dealt", lambda e: e["data"].update(card="AS"), "'card' was unexpected"),
    ("card_dealt", lambda e: e["data"].update(index=13), "13"),
    ("card_dealt", lambda e: e["data"].update(target="P6"), "P6"),
    ("hand_revealed", lambda e: e["data"].update(value=7.6), "7.6"),
    ("hand_revealed", lambda e: e["data"].update(cards=["AS", "1S"]), "1S"),
    ("round_result", lambda e: e["data"]["positions"]["P1"].update(player_bet_return=5), "5"),
    ("round_result", lambda e: e["data"]["hands"].pop("banker"), "banker"),
    ("paused", lambda e: e["data"].update(code="coffee_break"), "coffee_break"),
    ("round_cancelled", lambda e: e["data"].update(refund_all=False), "True was expected"),
    ("shoe_started", lambda e: e.update(time="2026-01-01 00:00:00"), "does not match"),
    ("shoe_started", lambda e: e.update(seq=0), "minimum"),
    ("shoe_started", lambda e: e.pop("round"), "'round' is a required property"),
    ("shoe_started", lambda e: e.update(type="shoe_exploded"), "shoe_exploded"),
    ("shoe_started", lambda e: e.update(extra=1), "'extra' was unexpected"),
    ("input_rejected", lambda e: e["data"].update(card="AS"), "'card' was unexpected"),
])
def test_malformed_events_are_refused(sample_events, type_, mutate, message) -> None:
    event = _first(sample_events, type_)
    validate_event(event)
    mutate(event)
    with pytest.raises(EventSchemaError) as raised:
        validate_event(event)
    assert message in str(raised.value)
    assert event["id"] in str(raised.value)


def test_sample_events_are_json_round_trippable(sample_events) -> None:
    for events in sample_events.values():
        for event in events:
            assert json.loads(json.dumps(event)) == event


def test_schema_codes_follow_the_fault_table() -> None:
    from controller.table import faults

    paused = load_schema("paused")["properties"]["data"]["properties"]["code"]["enum"]
    rejected = load_schema("input_rejected")["properties"]["data"]["properties"]["code"]["enum"]
    assert paused == list(faults.FAULTS)
    assert rejected == list(faults.REJECTIONS)
