"""The screen process's output, relayed into the daemon's log as its own
(controller/service/screens/output_relay.py): on a real pipe, read by the relay's thread,
logged through the daemon's structlog set-up, read back as JSON."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator

import pytest
import structlog

from controller.service.screens import output_relay
from controller.service.screens.output_relay import LineBudget, OutputRelay
from controller.service.telemetry.logging_setup import setup_logging


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
