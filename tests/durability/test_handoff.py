"""Events handed to the delivery threads in memory leave the table exactly as reading them
back from the journal would give them: same order, same bodies, same anchors (none inside a
plain chain's betting windows); the journal fills every gap the handoff leaves."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.delivery.handoff import HandedEvent, Handoff
from controller.durability.delivery.outbox import Outbox
from controller.durability.journal import Journal
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine
from controller.transports.file import FileSink, FileSinkSettings
from support.journal_helpers import TABLE

KEY = b"k" * 32


def read_back(path: Path) -> list[dict]:
    conn = sqlite3.connect(path)
    try:
        return anchored_events_after(conn, 0, 1_000_000)
    finally:
        conn.close()


def sink_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def deal(journal: Journal, outbox: Outbox, inputs, machine: TableMachine,
         unpublished: set[int] = frozenset()) -> None:
    """Journal each input's events and hand them over, as the daemon's loop does; the inputs
    at the indexes in ``unpublished`` are journaled without being handed over."""
    for index, inp in enumerate(inputs):
        events = machine.handle(inp)
        journal.append(inp, events)
        if index in unpublished:
            continue
        outbox.publish(journal.appended_events())


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "keyed"])
def test_handed_over_events_are_sent_exactly_as_the_journal_reads_them(tmp_path, key):
    inputs = shoe_script(3, betting_seconds=15.0)[:400]
    sink = tmp_path / "sink.jsonl"
    with Journal(tmp_path / "journal.db", key) as journal:
        machine = TableMachine(MachineSettings(table_id=TABLE))
        with Outbox(journal.path, [FileSink(FileSinkSettings(str(sink)), table=TABLE)]) as box:
            deal(journal, box, inputs, machine)
            assert box.wait_delivered(journal.last_event_seq(), 10)
            from_memory, from_journal = box.sources()["file"]
    expected = read_back(tmp_path / "journal.db")
    assert sink_events(sink) == expected
    assert from_memory > len(expected) // 2  # the handoff carried the stream, not the disk
    if key is None:  # the plain chain's sealed events went without an anchor, as read back
        sealed = [e for e in expected if "anchor" not in e]
        assert sealed and all(e["type"] != "round_opened" for e in sealed)


def test_events_journaled_behind_the_handoffs_back_are_read_from_the_journal(tmp_path):
    """Appends that never reach ``publish`` leave a gap and an unknown betting window: the
    thread reads the journal for them and the anchors still match it."""
    inputs = shoe_script(5, betting_seconds=15.0)[:300]
    sink = tmp_path / "sink.jsonl"
    skipped = set(range(20, 300, 17))
    with Journal(tmp_path / "journal.db") as journal:
        machine = TableMachine(MachineSettings(table_id=TABLE))
        with Outbox(journal.path, [FileSink(FileSinkSettings(str(sink)), table=TABLE)]) as box:
            deal(journal, box, inputs, machine, skipped)
            box.notify()
            assert box.wait_delivered(journal.last_event_seq(), 10)
    assert sink_events(sink) == read_back(tmp_path / "journal.db")


def test_an_outbox_opened_on_a_journal_mid_round_hands_over_sealed_events_sealed(tmp_path):
    """The betting window's state at start comes from the journal: a restart inside a round
    keeps its remaining cards unanchored, as reading them back would."""
    inputs = shoe_script(7, betting_seconds=15.0)[:200]
    sink = tmp_path / "sink.jsonl"
    machine = TableMachine(MachineSettings(table_id=TABLE))
    with Journal(tmp_path / "journal.db") as journal:
        opened_at = None
        for index, inp in enumerate(inputs):
            events = machine.handle(inp)
            journal.append(inp, events)
            if index > 60 and any(e["type"] == "round_opened" for e in events):
                opened_at = index
                break
        assert opened_at is not None
        with Outbox(journal.path, [FileSink(FileSinkSettings(str(sink)), table=TABLE)]) as box:
            box.notify()
            deal(journal, box, inputs[opened_at + 1:], machine)
            assert box.wait_delivered(journal.last_event_seq(), 10)
    assert sink_events(sink) == read_back(tmp_path / "journal.db")


def test_notify_alone_sends_the_threads_to_the_journal_at_once(tmp_path):
    """Appends announced by ``notify()`` only (no hand-over) go out without waiting for the
    idle poll, also once the thread has caught up through the handoff."""
    sink = tmp_path / "sink.jsonl"
    inputs = shoe_script(9, betting_seconds=15.0)[:120]
    with Journal(tmp_path / "journal.db") as journal:
        machine = TableMachine(MachineSettings(table_id=TABLE))
        with Outbox(journal.path, [FileSink(FileSinkSettings(str(sink)), table=TABLE)],
                    idle_poll_s=60, position_record_s=60) as box:
            deal(journal, box, inputs[:60], machine)
            assert box.wait_delivered(journal.last_event_seq(), 10)
            for inp in inputs[60:]:
                journal.append(inp, machine.handle(inp))
                box.notify()
            assert box.wait_delivered(journal.last_event_seq(), 3)
    assert sink_events(sink) == read_back(tmp_path / "journal.db")


def test_the_handoff_says_when_it_does_not_follow_on():
    handoff = Handoff(capacity=3)
    assert handoff.take(0, 10) == []
    handoff.put([HandedEvent(seq, json.dumps({"seq": seq}), None) for seq in (1, 2)])
    assert handoff.take(0, 1) == [{"seq": 1}]
    assert handoff.take(5, 10) == []          # older than the position: dropped
    handoff.put([HandedEvent(seq, json.dumps({"seq": seq}), None) for seq in (7, 8)])
    assert handoff.take(5, 10) is None        # a gap: read the journal
    assert handoff.take(6, 10) == [{"seq": 7}, {"seq": 8}]
    handoff.put([HandedEvent(seq, json.dumps({"seq": seq}), None) for seq in range(9, 14)])
    assert handoff.take(8, 10) is None        # overflowed: events were dropped
    assert handoff.take(10, 10) == [{"seq": 11}, {"seq": 12}, {"seq": 13}]
    handoff.put([HandedEvent(14, "{}", "unknown")])
    assert handoff.take(13, 10) is None       # an anchor memory could not decide
