"""Real journals for the canonical-form tests: a shoe's first rounds through the table machine
into a real SQLite journal, written by this version or as an older version wrote them (whole
numbers as floats: ``"betting_seconds":15.0``), and the events as a backend received them."""

from __future__ import annotations

import contextlib
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
