"""`pokdeng-table replay` as a user runs it: a real subprocess, files and standard input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.table.events import validate_event
from controller.table.inputs import read_script
from controller.table.machine import MachineSettings, TableMachine

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "scripts"
GOOD_LINES = [
    '{"at": 0.0, "kind": "button", "name": "new_shoe"}',
    '{"at": 1.0, "kind": "card", "card": "2H"}',
    '{"at": 2.0, "kind": "card", "card": "10s"}',
    '{"at": 3.0, "kind": "card", "card": "♣4"}',
]


def replay(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "controller", "replay", *args],
        input=stdin.encode("utf-8") if stdin is not None else None,
        capture_output=True, cwd=ROOT, timeout=60,
    )


def test_whole_shoe_replays_to_the_same_events_as_the_machine() -> None:
    script = SCRIPTS / "shoe_seed1.jsonl"
    done = replay(str(script))
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    lines = done.stdout.decode("utf-8").splitlines()
    events = [json.loads(line) for line in lines]
    machine = TableMachine(MachineSettings())
    with script.open(encoding="utf-8") as handle:
        expected = [e for inp in read_script(handle) for e in machine.handle(inp)]
    assert events == expected
    assert events[-1]["type"] == "shoe_ended" and events[-1]["data"]["reason"] == "cut_card"
    for event in events[:50]:
        validate_event(event)
    # Deterministic: a second run prints the very same bytes, also from standard input.
    again = replay("-", stdin=script.read_text(encoding="utf-8"))
    assert again.returncode == 0 and again.stdout == done.stdout


def test_config_sets_table_id_and_reveal_mode() -> None:
    done = replay(str(SCRIPTS / "shoe_seed2_button.jsonl"),
                  "--config", str(SCRIPTS / "shoe_seed2_button.yaml"))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["id"] == "table-7:1"
    assert not [e for e in events if e["type"] in ("input_rejected", "paused")]
    assert sum(e["type"] == "round_result" for e in events) > 15
    # The same script on an automatic-reveal table rejects every reveal press, visibly.
    auto = replay(str(SCRIPTS / "shoe_seed2_button.jsonl"))
    rejected = [json.loads(line) for line in auto.stdout.splitlines()
                if b'"input_rejected"' in line]
    assert rejected and all(e["data"]["name"] == "reveal" for e in rejected)


def test_malformed_line_exits_2_naming_it_after_printing_earlier_events(tmp_path: Path) -> None:
    script = tmp_path / "bad.jsonl"
    script.write_text("\n".join(GOOD_LINES[:2] + ["# a comment", '{"at": 2.5, "kind": "card"']
                                + GOOD_LINES[2:]) + "\n", encoding="utf-8")
    done = replay(str(script))
    assert done.returncode == 2
    stderr = done.stderr.decode("utf-8")
    assert f"{script}:4:" in stderr and "not valid JSON" in stderr
    printed = [json.loads(line)["type"] for line in done.stdout.splitlines()]
    assert printed == ["shoe_started", "burn_card_shown"]


@pytest.mark.slow
def test_bad_inputs_name_line_and_fault() -> None:
    cases = {
        '{"at": 4.0, "kind": "dance"}': "unknown kind",
        '{"at": 4.0, "kind": "card", "card": "1X"}': "bad card code",
        '{"at": 0.5, "kind": "tick"}': "goes backwards",
        '{"at": 4.0, "kind": "button", "name": "deal"}': "unknown button",
    }
    for line, fault in cases.items():
        done = replay("-", stdin="\n".join(GOOD_LINES + [line]) + "\n")
        assert done.returncode == 2, line
        stderr = done.stderr.decode("utf-8")
        assert "<stdin>:5:" in stderr and fault in stderr, stderr
        assert len(done.stdout.splitlines()) == 5  # shoe_started, flip, 2 burns, burn_completed


def test_missing_script_and_bad_config_exit_2(tmp_path: Path) -> None:
    missing = replay(str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and b"nope.jsonl" in missing.stderr
    config = tmp_path / "table.yaml"
    config.write_text("table:\n  id: t1\n  reveal: sideways\nshoe:\n  driver: beetek\n"
                      "  url: loop://\n", encoding="utf-8")
    bad = replay(str(SCRIPTS / "shoe_seed1.jsonl"), "--config", str(config))
    assert bad.returncode == 2
    assert b"reveal" in bad.stderr and str(config).encode() in bad.stderr
    assert bad.stdout == b""


def test_empty_script_prints_nothing() -> None:
    done = replay("-", stdin="# nothing yet\n\n")
    assert done.returncode == 0 and done.stdout == b""


#: a malformed 5th line of every kind -> what the message must say about it
MALFORMED = {
    b'{"at": 4, "kind": []}': b"unknown kind a list",
    b'{"at": 4, "kind": {"a": 1}}': b"unknown kind an object",
    b'{"at": [4], "kind": "tick"}': b'"at" must be a number of seconds, got a list',
    b'{"at": 4, "kind": "button", "name": ["new_shoe"]}': b"unknown button a list",
    b'{"at": 4, "kind": "switch", "name": "pause", "on": {"x": 1}}': b'"on" must be true or false',
    b'{"at": 4, "kind": "card", "card": 7}': b"bad card code 7",
    b'{"at": 4, "kind": "misread", "code": 1e999}': b'"code" must be a string, got Infinity',
    b'{"at": 4, "kind": "supervisor", "action": null}': b"unknown supervisor action null",
    b'{"at": NaN, "kind": "tick"}': b'"at" must be a finite number >= 0, got NaN',
    b'{"at": Infinity, "kind": "tick"}': b'"at" must be a finite number >= 0, got Infinity',
    b'{"at": -Infinity, "kind": "tick"}': b'"at" must be a finite number >= 0, got -Infinity',
    b'{"at": ' + b"9" * 5001 + b', "kind": "tick"}': b"not usable JSON: a number too long",
    b'{"at": 1' + b"0" * 400 + b', "kind": "tick"}': b'"at" must be a finite number >= 0, got 1000',
    b'{"at": 4, "kind": "tick", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}":
        b"not usable JSON: nested too deeply",
    b"[4, \"tick\"]": b"expected a JSON object, got list",
    b"4": b"expected a JSON object, got int",
    b'"tick"': b"expected a JSON object, got str",
    b"null": b"expected a JSON object, got NoneType",
    b'{"at": 4, "kind": "card", "card": "A\xff"}': b"not UTF-8 text at column 37",
    b'\xfe\xff{"at": 4, "kind": "tick"}': b"not UTF-8 text at column 1",
    b'{"at": 4, "kind": "card", "card": "' + b"Q" * 1_000_000 + b'"}': b"bad card code 'QQQ",
}


@pytest.mark.slow
@pytest.mark.parametrize("line", list(MALFORMED), ids=range(len(MALFORMED)))
def test_every_malformed_line_exits_2_naming_it_whatever_it_holds(line: bytes) -> None:
    good = "\n".join(GOOD_LINES).encode("utf-8") + b"\n"
    done = subprocess.run([sys.executable, "-m", "controller", "replay", "-"],
                          input=good + line + b"\n", capture_output=True, cwd=ROOT, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert b"<stdin>:5: " in done.stderr and MALFORMED[line] in done.stderr, done.stderr
    assert b"Traceback" not in done.stderr
    assert len(done.stderr) < 1000  # a megabyte line is not quoted whole
    assert len(done.stdout.splitlines()) == 5  # the good lines' events came first
