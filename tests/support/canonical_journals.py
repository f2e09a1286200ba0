"""For the canonical-form tests: real journals (a shoe's first rounds through the table machine
into a real SQLite journal, written by this version or as an older version wrote them, whole
numbers as floats: ``"betting_seconds":15.0``), the events as a backend received them, and
docs/backend.md's worked example of a digest."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.journal import Journal
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import ClockReport, Input
from controller.table.machine import MachineSettings, TableMachine

TABLE = "tâble-♦"


def table_inputs(inputs: int = 80) -> list[Input]:
    """Clock reports with awkward numbers (a whole 16.0, a tiny 1.6e-05 that Python and
    ECMAScript write differently, a fraction), then the start of a shoe."""
    clocks: list[Input] = [ClockReport(0.0, "not_synchronised", 16.0),
                           ClockReport(0.0, "synchronised", 1.6e-05, -0.25)]
    return clocks + shoe_script(5)[:inputs]


@contextlib.contextmanager
def older_writer() -> Iterator[None]:
    """The table machine as versions before RFC 8785 wrote events: whole-number floats kept."""
    with mock.patch("controller.table.events.whole_numbers_as_integers", lambda value: value):
        yield


def write_journal(path: Path, inputs: list[Input], settings: MachineSettings | None = None
                  ) -> TableMachine:
    machine = TableMachine(settings or MachineSettings(table_id=TABLE))
    with Journal(path) as journal:
        for inp in inputs:
            journal.append(inp, machine.handle(inp))
    return machine


def events_sent(path: Path) -> list[dict[str, Any]]:
    """Every event of the journal as the table sends it (anchors on)."""
    conn = sqlite3.connect(path)
    try:
        return anchored_events_after(conn, 0, 100_000)
    finally:
        conn.close()


BACKEND_DOC = Path(__file__).resolve().parents[2] / "docs" / "backend.md"


def worked_example() -> tuple[dict, str, str]:
    """The example's event (as received), its RFC 8785 text and the documented digest."""
    text = BACKEND_DOC.read_text(encoding="utf-8")
    section = text[text.index("**Worked example.**"):]
    received = re.search(r"```json\n(.*?)\n```", section, re.S)
    canonical = re.search(r"```text\n(.*?)\n```", section, re.S)
    digest = re.search(r'\{"seq": (\d+), "sha256": "([0-9a-f]{64})"\}', section)
    assert received and canonical and digest, "docs/backend.md's worked example is incomplete"
    event = json.loads(received.group(1))
    assert int(digest.group(1)) == event["seq"]
    return event, canonical.group(1), digest.group(2)
