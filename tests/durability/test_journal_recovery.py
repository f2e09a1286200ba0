"""Recovery: replaying the journal rebuilds the table exactly, and refuses when it cannot."""

from __future__ import annotations

import sqlite3

import pytest

from controller.durability.journal import Journal, JournalCorrupt
from controller.durability.recovery import RecoveryError, recover
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine

TABLE = "T7"


def journal_run(journal: Journal, inputs, settings: MachineSettings) -> TableMachine:
    machine = TableMachine(settings)
    for inp in inputs:
        journal.append(inp, machine.handle(inp))
    return machine


@pytest.mark.slow
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


def troubled_script() -> list:
    """Two rounds of a shoe with a pause mid-deal, a misread entered by hand and a shoe lost
    and back between rounds (what the machine makes of them does not matter here: recovery
    must reproduce it exactly)."""
    from controller.table.inputs import (
        Button,
        DeviceStatus,
        Misread,
        Supervisor,
        Switch,
        Tick,
        with_time,
    )

    base = shoe_script(3)
    second_round = next(i for i, inp in enumerate(base) if i > 10 and inp.kind == "button")
    script = list(base[:second_round + 6])        # new shoe, round 1, round 2 under way
    t = script[-1].at
    script += [Switch(t + 0.1, "pause", True), Tick(t + 5), Switch(t + 6, "pause", False)]
    nxt = base[second_round + 6]
    script += [Misread(t + 6.5, "no_read", "smudged"),
               Supervisor(t + 7, "enter_card", nxt.card), Supervisor(t + 7.5, "resume")]
    for inp in base[second_round + 7:second_round + 16]:
        script.append(with_time(inp, max(inp.at, t + 8) + 0.01))
    t = script[-1].at
    script += [Tick(t + 30), DeviceStatus(t + 31, "shoe", False),
               DeviceStatus(t + 35, "shoe", True), Tick(t + 36)]
    # a round whose betting closes mid-deal: the rest of the cards come after the countdown
    t += 40
    rest = [inp for inp in base[second_round + 16:] if inp.kind == "card"][:13]
    script.append(Button(t, "start_round"))
    script += [with_time(card, t + 1 + i * 0.5) for i, card in enumerate(rest[:5])]
    script.append(Tick(t + 20))
    script += [with_time(card, t + 21 + i * 0.5) for i, card in enumerate(rest[5:])]
    script.append(Tick(t + 40))
    return script


@pytest.mark.slow
def test_recovery_at_every_point_of_a_troubled_stretch(tmp_path):
    settings = MachineSettings(table_id=TABLE)
    script = troubled_script()
    seen = set()
    for stop_at in range(len(script) + 1):
        path = tmp_path / f"j{stop_at}.db"
        with Journal(path) as journal:
            original = journal_run(journal, script[:stop_at], settings)
            recovered = recover(journal, settings)
        assert recovered.status() == original.status(), stop_at
        status = original.status()
        seen.add("paused" if status["paused"] else status["state"])
        for inp in script[stop_at:stop_at + 3]:
            assert recovered.handle(inp) == original.handle(inp), stop_at
    assert {"no_shoe", "burning", "ready", "betting", "paused"} <= seen, seen
    assert seen & {"dealing", "revealing"}, seen
