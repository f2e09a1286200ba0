"""The table-script format (docs/contracts.md "Table scripts")."""

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.rules.cards import parse_card
from controller.table.inputs import (
    MAX_DETAIL_CHARS,
    Actor,
    Button,
    CardScan,
    ControllerFault,
    CutCard,
    DeviceStatus,
    Misread,
    ScriptError,
    Supervisor,
    Switch,
    Tick,
    from_dict,
    parse_line,
    read_script,
    to_dict,
    to_json,
    with_time,
    write_script,
)

DESIGN_EXAMPLE = """\
{"at": 0.0,  "kind": "button", "name": "new_shoe"}
{"at": 1.0,  "kind": "card", "card": "7H"}
{"at": 9.0,  "kind": "button", "name": "start_round"}
{"at": 9.5,  "kind": "cut_card"}
{"at": 10.0, "kind": "misread"}
{"at": 11.0, "kind": "switch", "name": "pause", "on": true}
{"at": 12.0, "kind": "button", "name": "cancel_round"}
{"at": 13.0, "kind": "device", "name": "shoe", "connected": false}
{"at": 14.0, "kind": "supervisor", "action": "enter_card", "card": "9D"}
{"at": 40.0, "kind": "tick"}
"""


def test_the_design_example_parses():
    inputs = list(read_script(io.StringIO(DESIGN_EXAMPLE)))
    assert inputs == [
        Button(0.0, "new_shoe"), CardScan(1.0, parse_card("7H")), Button(9.0, "start_round"),
        CutCard(9.5), Misread(10.0), Switch(11.0, "pause", True), Button(12.0, "cancel_round"),
        DeviceStatus(13.0, "shoe", False), Supervisor(14.0, "enter_card", parse_card("9D")),
        Tick(40.0),
    ]


def test_round_trip_through_json():
    inputs = list(read_script(io.StringIO(DESIGN_EXAMPLE)))
    out = io.StringIO()
    write_script(inputs, out)
    assert list(read_script(io.StringIO(out.getvalue()))) == inputs


def test_card_spellings_are_normalised():
    assert to_dict(parse_line('{"at": 1, "kind": "card", "card": "10♥"}')) == {
        "at": 1.0, "kind": "card", "card": "TH"}


def test_misread_may_carry_the_driver_fault():
    inp = parse_line('{"at": 2, "kind": "misread", "code": "rfid_unknown_uid", '
                     '"reason": "tag 04A1 unknown"}')
    assert inp == Misread(2.0, "rfid_unknown_uid", "tag 04A1 unknown")
    assert to_json(inp) == ('{"at": 2.0, "kind": "misread", "code": "rfid_unknown_uid", '
                            '"reason": "tag 04A1 unknown"}')


def test_supervisor_input_may_say_who_took_it():
    line = ('{"at": 15.0, "kind": "supervisor", "action": "pause", '
            '"by": {"user": "alice", "uid": 1001}}')
    inp = parse_line(line)
    assert inp == Supervisor(15.0, "pause", None, Actor("alice", 1001))
    assert to_json(inp) == line
    assert parse_line('{"at": 1, "kind": "supervisor", "action": "pause"}').by is None


def test_controller_fault_input():
    inp = parse_line(
        '{"at": 3, "kind": "fault", "code": "journal_unwritable", "reason": "disk full"}')
    assert inp == ControllerFault(3.0, "journal_unwritable", "disk full")
    assert parse_line(to_json(inp)) == inp
    with pytest.raises(ScriptError, match='needs a "code" and a "reason"'):
        parse_line('{"at": 3, "kind": "fault", "code": "x"}')


def test_with_time_restamps():
    assert with_time(CardScan(1.0, parse_card("AS")), 5.5) == CardScan(5.5, parse_card("AS"))


@pytest.mark.parametrize("line, message", [
    ("{", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"kind": "tick"}', '"at" must be a number'),
    ('{"at": "1", "kind": "tick"}', '"at" must be a number'),
    ('{"at": true, "kind": "tick"}', '"at" must be a number'),
    ('{"at": -1, "kind": "tick"}', 'finite number >= 0'),
    ('{"at": 1, "kind": "bell"}', 'unknown kind "bell"'),
    ('{"at": 1, "kind": "button"}', '"button" input needs "name"'),
    ('{"at": 1, "kind": "button", "name": "deal"}', 'unknown button "deal"'),
    ('{"at": 1, "kind": "card", "card": "ZZ"}', "bad card code 'ZZ'"),
    ('{"at": 1, "kind": "card", "card": "AS", "colour": "red"}',
     'unknown key(s) for a "card" input: colour'),
    ('{"at": 1, "kind": "switch", "name": "pause", "on": "yes"}', '"on" must be true or false'),
    ('{"at": 1, "kind": "device", "name": "printer", "connected": true}',
     'unknown device "printer"'),
    ('{"at": 1, "kind": "supervisor", "action": "enter_card"}', '"supervisor" input needs "card"'),
    ('{"at": 1, "kind": "supervisor", "action": "pause", "card": "AS"}',
     '"card" only goes with "enter_card"'),
    ('{"at": 1, "kind": "misread", "code": 5}', '"code" must be a string'),
    ('{"at": 1, "kind": "supervisor", "action": "pause", "by": "root"}', '"by" must be'),
    ('{"at": 1, "kind": "supervisor", "action": "pause", "by": {"user": "a", "uid": -1}}',
     '"by" must be'),
    ('{"at": 1, "kind": "supervisor", "action": "pause", "by": {"user": "", "uid": 0}}',
     '"by" must be'),
])
def test_malformed_lines_name_the_line_and_the_fault(line, message):
    with pytest.raises(ScriptError) as info:
        parse_line(line, 7, "shoe.jsonl")
    assert str(info.value).startswith("shoe.jsonl:7: ")
    assert message in str(info.value)
    assert info.value.line_number == 7


def test_read_script_yields_everything_before_the_bad_line():
    text = ('{"at": 0, "kind": "tick"}\n\n# a comment\n{"at": 1, "kind": "tick"}\n'
            '{"at": 2, "kind": "nope"}\n')
    seen = []
    with pytest.raises(ScriptError) as info:
        for inp in read_script(io.StringIO(text)):
            seen.append(inp)
    assert seen == [Tick(0.0), Tick(1.0)]
    assert info.value.line_number == 5


def test_clock_must_not_go_backwards():
    text = '{"at": 5, "kind": "tick"}\n{"at": 4, "kind": "tick"}\n'
    with pytest.raises(ScriptError, match=r'line 2: "at" goes backwards: 4.0 after 5.0'):
        list(read_script(io.StringIO(text)))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**300) | st.floats()
    | st.text(max_size=5),
    lambda children: (st.lists(children, max_size=3)
                      | st.dictionaries(st.text(max_size=6), children, max_size=4)),
    max_leaves=8,
)
script_words = st.sampled_from(["button", "card", "tick", "misread", "switch", "device",
                                "supervisor", "fault", "new_shoe", "AS", "pause", "shoe",
                                "enter_card"])
script_values = json_values | script_words
# Mostly a usable "at", so that what follows it (kind, name, card, …) gets checked too.
script_objects = st.fixed_dictionaries(
    {"at": st.floats(min_value=0, max_value=1e9) | script_values},
    optional={key: script_values for key in ("kind", "name", "card", "on", "connected",
                                             "action", "code", "reason", "evidence", "by", "x")})


@pytest.mark.slow
@settings(deadline=None, max_examples=500)  # a slow moment on a busy machine is not a failure
@given(script_objects)
def test_from_dict_raises_only_script_errors(obj):
    try:
        inp = from_dict(obj)
    except ScriptError as exc:
        assert len(exc.detail) <= MAX_DETAIL_CHARS + 1
        return
    assert from_dict(to_dict(inp)) == inp


@settings(deadline=None)
@given(st.text(max_size=40) | st.builds(json.dumps, json_values))
def test_parse_line_raises_only_script_errors_naming_the_line(text):
    try:
        parse_line(text, 7, "script")
    except ScriptError as exc:
        assert str(exc).startswith("script:7: ")
