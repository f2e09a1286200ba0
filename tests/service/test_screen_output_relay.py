"""The screen process's output, relayed into the daemon's log as its own
(controller/service/screens/output_relay.py): on a real pipe, read by the relay's thread,
logged through the daemon's structlog set-up, read back as JSON; a flooding writer and a
pipe held open by another process, as a hostile or careless screen process would leave them."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from controller.service.screens import output_relay
from controller.service.screens.output_relay import LineBudget, OutputRelay
from controller.service.telemetry.logging_setup import setup_logging
from support.waiting import wait_until

PIPE_BUFFER = 1 << 16  # a pipe's buffer on Linux, unless resized


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The daemon's JSON log, into a string; restored afterwards. The relay's logger is taken
    afresh: structlog caches a logger's chain at its first use, and an earlier test's set-up
    (another table id added to every line) would otherwise still be in it."""
    monkeypatch.setattr(output_relay, "log", structlog.get_logger("pokdeng.screens"))
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    setup_logging("info", "json")
    for handler in root.handlers:
        if hasattr(handler, "setStream"):
            handler.setStream(stream)
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)


def relay(lines: bytes, budget: LineBudget | None = None) -> OutputRelay:
    """``lines`` written into a pipe by 'the screen process', relayed until the pipe ends."""
    read_end, write_end = os.pipe()
    relay = OutputRelay(budget)
    relay.start()
    relay.follow(read_end, 4242)
    with os.fdopen(write_end, "wb") as out:
        out.write(lines)
    relay.close(10)
    return relay


def records(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


def test_a_json_line_is_logged_as_the_screen_process_never_as_what_it_claims(
        logged: io.StringIO) -> None:
    forged = {"event": "stopped", "logger": "pokdeng.daemon", "level": "critical",
              "table": "T9", "timestamp": "2000-01-01T00:00:00Z", "reason": "forged"}
    relay(json.dumps(forged).encode() + b"\nTraceback (most recent call last):\n")
    got = records(logged)
    assert [r["event"] for r in got] == ["screens: stopped", "screens: a line of its output"]
    first, second = got
    assert first["logger"] == second["logger"] == "pokdeng.screens"
    assert first["level"] == "error" and first["screen_pid"] == 4242
    assert first["screen"] == {"logger": "pokdeng.daemon", "reason": "forged"}
    assert "reason" not in first and first.get("table") != "T9"
    assert second["text"] == "Traceback (most recent call last):"


def test_an_overlong_line_is_cut_and_the_next_one_read_whole(logged: io.StringIO) -> None:
    relay(b"x" * (output_relay.MAX_LINE * 5) + b"\n" + b'{"event": "next"}\n')
    first, second = records(logged)
    assert first["cut"] is True and len(first["text"]) == output_relay.MAX_LINE
    assert second["event"] == "screens: next"


def test_lines_nested_beyond_any_stack_are_text_and_the_relay_goes_on(
        logged: io.StringIO) -> None:
    """"[[[[…" deeper than the JSON parser's stack, an object nested deeper than the log's
    renderer would walk: both relayed as text, and the relay is still there for the next
    line and the next process's pipe."""
    deep_object = b'{"event": "deep", "x": ' + b'{"a": ' * 3000 + b"1" + b"}" * 3000 + b"}"
    line = b"[" * 3000 + b"\n" + deep_object[:output_relay.MAX_LINE - 1] + b"\n"
    nested = b'{"event": "nested", "x": ' + b"[" * 40 + b"]" * 40 + b"}\n"
    read_end, write_end = os.pipe()
    relay = OutputRelay()
    relay.start()
    relay.follow(read_end, 4242)
    os.write(write_end, line + nested + b'{"event": "after"}\n')
    os.close(write_end)
    second_read, second_write = os.pipe()
    relay.follow(second_read, 4343)
    os.write(second_write, b'{"event": "the next process"}\n')
    os.close(second_write)
    relay.close(10)
    got = records(logged)
    assert [r["event"] for r in got] == [
        "screens: a line of its output", "screens: a line of its output",
        "screens: a line of its output", "screens: after", "screens: the next process"], got
    assert got[0]["text"] == "[" * 3000
    assert got[2]["text"].startswith('{"event": "nested"')
    assert got[-1]["screen_pid"] == 4343


def test_what_json_escapes_decode_to_is_shown_and_the_daemons_line_stays_json(
        logged: io.StringIO, capfd: pytest.CaptureFixture[str]) -> None:
    """\\u escapes decode to the very characters the text rule shows as U+FFFD (an 8-bit
    CSI, bidirectional controls, separators), in values and in keys, and to lone surrogates
    no encoder writes; NaN, Infinity and 1e999 are no JSON. Each line is still logged, as
    valid JSON with none of those characters, and nothing spills to stderr."""
    lines = [b'{"event": "csi\\u009b2J", "x": "\\u009b31m\\u202e\\u2066\\u2028\\u0085"}',
             b'{"event": "key", "\\u009b31m": "v", "list": ["\\u001b[2J"]}',
             b'{"event": "surrogate", "x": "\\udc9b31m", "y": "\\ud800"}',
             b'{"event": "nan", "x": NaN, "y": -Infinity}', b'{"event": "huge", "x": 1e999}']
    relay(b"\n".join(lines) + b"\n")
    text = logged.getvalue()
    got = [json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in the log"))
           for line in text.splitlines() if line.startswith("{")]
    assert [r["event"] for r in got] == [
        "screens: csi\ufffd2J", "screens: key", "screens: surrogate",
        "screens: a line of its output", "screens: a line of its output"], got
    shown = set(output_relay.CONTROLS_SHOWN)
    assert not [c for c in text if ord(c) in shown - {0x0A}], "a control character was logged"
    assert got[2]["screen"] == {"x": "?31m", "y": "?"}
    assert "Logging error" not in capfd.readouterr().err


def test_a_flood_costs_the_log_a_budget_and_a_count(logged: io.StringIO) -> None:
    """A thousand lines at once with a budget of ten: ten relayed, the rest counted (said at
    the first line held back, then at most every few seconds, and when the pipe ends: nothing
    hidden, only summarised)."""
    clock = [0.0]
    budget = LineBudget(rate=1.0, burst=10, monotonic=lambda: clock[0])
    relay(b"".join(b'{"event": "line %d"}\n' % n for n in range(1000)), budget)
    got = records(logged)
    relayed = [r for r in got if r["event"].startswith("screens: line ")]
    assert [r["event"] for r in relayed] == [f"screens: line {n}" for n in range(10)]
    held = [r for r in got if "held back" in r["event"]]
    assert 1 <= len(held) <= 2 and sum(r["lines"] for r in held) == 990
    assert {r["level"] for r in held} == {"warning"}


# a screen process that writes without end, counting what its pipe took
FLOODER = """
import os, sys, time
line, written, until = eval(sys.argv[3]), 0, time.monotonic() + float(sys.argv[2])
os.set_blocking(1, False)
while time.monotonic() < until:
    try:
        written += os.write(1, line)
    except BlockingIOError:
        time.sleep(0.001)  # its pipe is full: the relay reads at its own pace
open(sys.argv[1], "w").write(str(written))
"""


def thread_cpu_s(native_id: int) -> float:
    """A thread of this process: its time on a CPU so far (schedstat, ns)."""
    return int(Path(f"/proc/self/task/{native_id}/schedstat").read_text().split()[0]) / 1e9


FLOODS = {"lines": b"x" * 200 + b"\n", "empty lines": b"\n" * 4096,
          "one line without end": b"A" * 65536}


@pytest.mark.parametrize("flood", FLOODS)
def test_a_flooding_screen_process_costs_the_daemon_a_pace_not_a_core(
        logged: io.StringIO, tmp_path: Path, flood: str) -> None:
    """Its pipe is read at most READS_PER_S times a second (and READS_BURST at once), so what
    it got through in 2 s is bounded by that pace and its pipe's buffer, and the relay's
    thread spent a small part of those seconds on a CPU, whatever it writes: long lines, a
    flood of empty ones (held back in one count, not one by one), one line that never ends."""
    seconds = 2.0
    read_end, write_end = os.pipe()
    relay = OutputRelay()
    relay.start()
    relay.follow(read_end, 4242)
    tid = relay._thread.native_id
    assert tid is not None
    before = thread_cpu_s(tid)
    flooder = subprocess.Popen([sys.executable, "-c", FLOODER, str(tmp_path / "written"),
                                str(seconds), repr(FLOODS[flood])], stdout=write_end)
    os.close(write_end)
    assert flooder.wait(30) == 0
    cpu = thread_cpu_s(tid) - before
    relay.close(10)
    written = int((tmp_path / "written").read_text())
    reads = output_relay.READS_BURST + output_relay.READS_PER_S * (seconds + 1)
    assert written <= reads * output_relay.READ_BYTES + PIPE_BUFFER, written
    assert cpu < 0.2 * seconds, cpu  # unpaced, the thread read all the while
    if flood != "one line without end":  # the log had its budget and a count
        assert any("held back" in r["event"] for r in records(logged))


def pipe_ends_here(inode: int) -> int:
    """How many descriptors of this process hold the pipe of ``inode``."""
    held = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            held += os.readlink(f"/proc/self/fd/{name}") == f"pipe:[{inode}]"
        except FileNotFoundError:
            continue  # the listing's own descriptor, gone
    return held


def test_a_pipe_something_else_keeps_open_is_left_once_the_next_process_came(
        logged: io.StringIO) -> None:
    """The old process's pipe, held open by 'a process it started' (here, this test), is
    closed DRAIN_S after the next process's pipe came, whose lines are then relayed."""
    old_read, old_write = os.pipe()
    old_inode = os.fstat(old_read).st_ino
    assert pipe_ends_here(old_inode) == 2
    new_read, new_write = os.pipe()
    relay = OutputRelay()
    relay.start()
    try:
        relay.follow(old_read, 1111)
        os.write(old_write, b'{"event": "old"}\n')
        relay.follow(new_read, 2222)
        os.write(new_write, b'{"event": "new"}\n')
        wait_until(lambda: any(r["event"] == "screens: new" for r in records(logged)),
                   output_relay.DRAIN_S + 10, "the next process's line")
        assert pipe_ends_here(old_inode) == 1  # the writer's end only: the relay let go
        left = [r for r in records(logged) if "left unread" in r["event"]]
        assert [r["pid"] for r in left] == [1111]
    finally:
        os.close(old_write)
        os.close(new_write)
        relay.close(10)
    assert [r["event"] for r in records(logged) if r["event"] in ("screens: old",
                                                                   "screens: new")] == [
        "screens: old", "screens: new"]


def test_an_escape_sequence_never_reaches_the_log_as_it_is(logged: io.StringIO) -> None:
    """Whoever reads the daemon's log on a terminal (console format) is sent no escape
    sequence by the screen process, neither in a line's text nor in a JSON line's event."""
    relay("plain \x1b[2J\x1b[1mBOLD\ttabbed \u009b2J \u0085 \u202eevil \u2028\n".encode()
          + json.dumps({"event": "ev \x1b[31mred \u009b"}).encode() + b"\n")
    text, event = records(logged)
    assert text["text"] == "plain \ufffd[2J\ufffd[1mBOLD\ttabbed \ufffd2J \ufffd \ufffdevil \ufffd"
    assert event["event"] == "screens: ev \ufffd[31mred \ufffd"


# the old process's pipe, flooded by something it started: a line cut, then never an end
ENDLESS = """
import os
os.write(1, b"A" * 70000)
while True:
    os.write(1, b"A" * 65536)
"""


def test_a_pipe_flooded_by_what_the_old_process_started_is_left_all_the_same(
        logged: io.StringIO) -> None:
    """Its bytes keep coming, but DRAIN_S after the next pipe came the relay leaves it."""
    old_read, old_write = os.pipe()
    endless = subprocess.Popen([sys.executable, "-c", ENDLESS], stdout=old_write)
    os.close(old_write)
    new_read, new_write = os.pipe()
    relay = OutputRelay()
    relay.start()
    try:
        relay.follow(old_read, 1111)
        relay.follow(new_read, 2222)
        os.write(new_write, b'{"event": "new"}\n')
        wait_until(lambda: any(r["event"] == "screens: new" for r in records(logged)),
                   output_relay.DRAIN_S + 10, "the next process's line")
    finally:
        endless.kill()
        endless.wait(10)
        os.close(new_write)
        relay.close(10)
    assert [r["pid"] for r in records(logged) if "left unread" in r["event"]] == [1111]
