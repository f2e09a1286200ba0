"""A backend's delivery state enters the table as a journaled input: recorded and sent on as
an event, kept across a checkpoint, never a pause."""

from __future__ import annotations

from controller.table.checkpoint import capture
from controller.table.events import validate_event
from controller.table.generators.scriptgen import ScriptBuilder
from controller.table.inputs import BackendStatus, from_dict, to_dict
from controller.table.machine import MachineSettings, TableMachine

SETUP = ("3H", "2S", "2C", "2D")


def feed(machine: TableMachine, *inputs) -> list[dict]:
    events = []
    for inp in inputs:
        for event in machine.handle(inp):
            validate_event(event)
            events.append(event)
    return events


def ready() -> tuple[TableMachine, ScriptBuilder]:
    machine, b = TableMachine(MachineSettings()), ScriptBuilder()
    feed(machine, b.button("new_shoe"), *[b.card(c) for c in SETUP])
    return machine, b


def test_unreachable_and_restored_are_events_once_each_and_the_table_deals_on() -> None:
    machine, b = ready()
    down = BackendStatus(b.t, "http", False, "failing for 30s: POST … -> 404 Not Found")
    events = feed(machine, down)
    assert [(e["type"], e["data"]) for e in events] == [
        ("backend_unreachable", {"transport": "http", "reason": down.reason})]
    assert feed(machine, BackendStatus(b.t, "http", False, "still failing")) == []
    assert machine.status()["backends_unreachable"] == {"http": down.reason}
    assert machine.status()["paused"] is False
    assert [e["type"] for e in feed(machine, b.button("start_round"))] == ["round_opened"]
    restored = feed(machine, BackendStatus(b.t, "http", True, "delivering again"))
    assert [e["type"] for e in restored] == ["backend_restored"]
    assert machine.status()["backends_unreachable"] == {}
    # a recovery never reported down is not news
    assert feed(machine, BackendStatus(b.t, "mqtt", True, "delivering again")) == []


def test_the_unreachable_backends_survive_a_checkpoint() -> None:
    machine, b = TableMachine(MachineSettings()), ScriptBuilder()
    feed(machine, BackendStatus(b.t, "http", False, "connection refused"))
    again = TableMachine.from_checkpoint(MachineSettings(), capture(machine))
    assert again.status()["backends_unreachable"] == {"http": "connection refused"}
    assert [e["type"] for e in feed(again, BackendStatus(b.t, "http", True, "ok"))] == \
        ["backend_restored"]
    old = capture(machine)
    del old["backends_unreachable"]  # a checkpoint written before backends were recorded
    assert TableMachine.from_checkpoint(MachineSettings(), old).backends_unreachable == {}


def test_the_script_form_round_trips_and_bad_lines_say_what_is_wrong() -> None:
    inp = BackendStatus(5.0, "http", False, "timed out")
    assert from_dict(to_dict(inp)) == inp
    for bad, words in (({"name": "", "reachable": True}, '"name" must be a transport name'),
                       ({"name": "http", "reachable": "no"}, '"reachable" must be true or false'),
                       ({"name": "http"}, 'needs "reachable"')):
        try:
            from_dict({"at": 1.0, "kind": "backend", **bad})
        except ValueError as exc:
            assert words in str(exc)
        else:
            raise AssertionError(bad)
