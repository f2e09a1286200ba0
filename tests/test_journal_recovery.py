"""Recovery: replaying the journal rebuilds the table exactly, and refuses when it cannot."""

from __future__ import annotations

import sqlite3

import pytest

from controller.journal import Journal, JournalCorrupt
from controller.machine import MachineSettings, TableMachine
from controller.recovery import RecoveryError, recover
from controller.scriptgen import shoe_script

TABLE = "T7"


def journal_run(journal: Journal, inputs, settings: MachineSettings) -> TableMachine:
    machine = TableMachine(settings)
    for inp in inputs:
        journal.append(inp, machine.handle(inp))
    return machine


@pytest.mark.parametrize("stop_at", [0, 1, 5, 40, 111, 250, None])
def test_recovered_machine_continues_exactly_like_the_uninterrupted_one(tmp_path, stop_at):
    settings = MachineSettings(table_id=TABLE)
    inputs = shoe_script(3)
    stop_at = len(inputs) if stop_at is None else stop_at
    with Journal(tmp_path / "j.db") as journal:
        original = journal_run(journal, inputs[:stop_at], settings)
        records = journal.record_count()
        recovered = recover(journal, settings)
        assert journal.record_count() == records  # recovery appends nothing
    assert recovered.status() == original.status()
    assert recovered.next_deadline() == original.next_deadline()
    # both carry on with the rest of the shoe and produce the same events, same ids
    for inp in inputs[stop_at:]:
        assert recovered.handle(inp) == original.handle(inp)


def test_rules_that_disagree_with_the_journal_are_named(tmp_path):
    with Journal(tmp_path / "j.db") as journal:
        journal_run(journal, shoe_script(4)[:30], MachineSettings(table_id=TABLE))
        with pytest.raises(RecoveryError, match=r"record \d+ .*the journal and the rules "
                                                r"disagree: event seq \d+: .*betting"):
            recover(journal, MachineSettings(table_id=TABLE, betting_seconds=20))


def test_a_broken_chain_is_refused_before_replay(tmp_path):
    path = tmp_path / "j.db"
    with Journal(path) as journal:
        journal_run(journal, shoe_script(5)[:20], MachineSettings(table_id=TABLE))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET body = replace(body, '\"card\"', '\"card \"') WHERE n = 3")
    conn.commit()
    conn.close()
    with Journal(path) as journal:
        with pytest.raises(JournalCorrupt, match="record 3: hash does not match"):
            recover(journal, MachineSettings(table_id=TABLE))
