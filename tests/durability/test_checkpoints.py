"""Shoe-end checkpoints: recovery starts from the last one, checks and replays only what follows,
and refuses a checkpoint that does not sit on the chain (replaying from further back)."""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from controller.durability import checkpoints
from controller.durability.archives.archive import archive_closed_shoes
from controller.durability.journal import Journal, JournalCorrupt, verify_file
from controller.durability.recovery import recover, recover_report
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import Supervisor, Switch
from controller.table.machine import MachineSettings, TableMachine
from testkit.journals import build_journal, next_shoe_start

SETTINGS = MachineSettings(table_id="T7")


def three_shoes_and_a_half(path: Path, checkpoints_on: bool = True) -> TableMachine:
    """Three whole shoes, then the next one stopped in the middle of its third round."""
    at = next_shoe_start(3, SETTINGS)
    script = shoe_script(99, start_at=at)
    rounds = [i for i, inp in enumerate(script) if getattr(inp, "name", None) == "start_round"]
    return build_journal(path, 3, SETTINGS, checkpoints=checkpoints_on,
                         partial=script[:rounds[2] + 5])


def stored(path: Path) -> dict:
    conn = sqlite3.connect(path)
    try:
        return json.loads(conn.execute("SELECT base FROM checkpoint").fetchone()[0])
    finally:
        conn.close()


def store_raw(path: Path, base: dict, digest: str | None = None) -> None:
    """Write a checkpoint row by hand (an edit behind the journal's back)."""
    text = json.dumps(base, sort_keys=True, separators=(",", ":"))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE checkpoint SET base=?, digest=?",
                 (text, digest if digest is not None else checkpoints.digest(text)))
    conn.commit()
    conn.close()


def test_recovery_starts_at_the_last_shoe_end_and_replays_only_the_rest(tmp_path):
    path = tmp_path / "j.db"
    original = three_shoes_and_a_half(path)
    with Journal(path) as journal:
        total = journal.record_count()
        report = recover_report(journal, SETTINGS)
    base = stored(path)
    assert base["checkpoint"]["shoe"] == 3 and base["seq"] == base["checkpoint"]["seq"]
    assert report.start == (f"the checkpoint after shoe 3 (record {base['records']}, "
                            f"seq {base['seq']})")
    assert report.refused is None
    assert report.records == total - base["records"] > 0 and report.shoes_ended == 0
    assert report.machine.status() == original.status()
    assert report.machine.next_deadline() == original.next_deadline()


def test_the_same_table_either_way_and_it_carries_on_identically(tmp_path):
    with_cp, without = tmp_path / "a.db", tmp_path / "b.db"
    three_shoes_and_a_half(with_cp)
    three_shoes_and_a_half(without, checkpoints_on=False)
    with Journal(with_cp) as a, Journal(without) as b:
        fast, slow = recover_report(a, SETTINGS), recover_report(b, SETTINGS)
    assert slow.start == "record 1" and slow.shoes_ended == 3
    assert fast.records < slow.records / 3
    assert fast.machine.status() == slow.machine.status()
    rest = shoe_script(99, start_at=next_shoe_start(3, SETTINGS))
    for inp in rest[len(rest) // 2:][:200]:
        assert fast.machine.handle(inp) == slow.machine.handle(inp)


def refused(path: Path) -> str:
    with Journal(path) as journal:
        report = recover_report(journal, SETTINGS)
    assert report.start == "record 1", report.start  # replayed from the start instead
    assert report.refused is not None
    return report.refused


def test_a_checkpoint_edited_without_its_digest_is_refused(tmp_path):
    path = tmp_path / "j.db"
    original = three_shoes_and_a_half(path)
    base = stored(path)
    base["checkpoint"]["rounds_total"] += 5
    store_raw(path, base, digest=checkpoints.digest("something else"))
    assert "does not match its digest" in refused(path)
    with Journal(path) as journal:
        assert recover(journal, SETTINGS).status() == original.status()


@pytest.mark.parametrize("edit, words", [
    (lambda b, head: b.update(records=head + 40), "points past the journal's head"),
    (lambda b, head: b.update(hash="ab" * 32), "names hash"),
    (lambda b, head: b.update(records=b["records"] - 1), "names hash"),
    (lambda b, head: b.update(seq=b["seq"] - 1), "is not event seq"),
    (lambda b, head: b["checkpoint"].update(seq=b["seq"] - 1), "its table state is at seq"),
    (lambda b, head: b["checkpoint"].update(shoe=2), "does not end shoe 2"),
    (lambda b, head: b["checkpoint"].update(table="T9"), "does not load"),
    (lambda b, head: b.update(checkpoint={"v": 1, "seq": b["seq"], "shoe": 3}), "does not load"),
])
def test_a_checkpoint_off_the_chain_is_refused_and_the_journal_replayed(tmp_path, edit, words):
    """Each edit recomputes the digest, as someone who read this code would."""
    path = tmp_path / "j.db"
    original = three_shoes_and_a_half(path)
    with Journal(path) as journal:
        head = journal.record_count()
    base = stored(path)
    edit(base, head)
    store_raw(path, base)
    assert words in refused(path)
    with Journal(path) as journal:
        assert recover(journal, SETTINGS).status() == original.status()


def test_a_checkpoint_on_a_record_moved_in_place_is_refused(tmp_path):
    """The record the checkpoint names was edited (and its own hash recomputed): the chain
    check from the checkpoint on would not see it, the checkpoint check does."""
    from controller.durability.journal import record_hash

    path = tmp_path / "j.db"
    three_shoes_and_a_half(path)
    n = stored(path)["records"]
    conn = sqlite3.connect(path)
    kind, seq, written, body, prev = conn.execute(
        "SELECT kind, event_seq, written, body, prev_hash FROM records WHERE n=?", (n,)).fetchone()
    body = body.replace('"shoe_ended"', '"shoe_ended" ')
    conn.execute("UPDATE records SET body=?, hash=? WHERE n=?",
                 (body, record_hash(n, kind, seq, written, prev, body), n))
    conn.commit()
    conn.close()
    with Journal(path) as journal:
        with pytest.raises(JournalCorrupt, match=rf"record {n + 1}: prev_hash does not match"):
            recover_report(journal, SETTINGS)


def test_a_broken_record_after_the_checkpoint_stops_recovery(tmp_path):
    path = tmp_path / "j.db"
    three_shoes_and_a_half(path)
    bad = stored(path)["records"] + 7
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET written = written + 1 WHERE n=?", (bad,))
    conn.commit()
    conn.close()
    with Journal(path) as journal:
        with pytest.raises(JournalCorrupt, match=rf"record {bad}: hash does not match"):
            recover_report(journal, SETTINGS)


def test_a_broken_record_before_the_checkpoint_is_left_to_the_full_check(tmp_path):
    """The start does not read it (that is the point); `journal verify` and the daemon's check
    after READY do, and name it."""
    path = tmp_path / "j.db"
    original = three_shoes_and_a_half(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE records SET written = written + 1 WHERE n=5")
    conn.commit()
    conn.close()
    with Journal(path) as journal:
        assert recover(journal, SETTINGS).status() == original.status()
    result = verify_file(path)
    assert not result.ok and result.bad_record == 5


def test_a_journal_written_before_checkpoints_recovers_with_progress(tmp_path):
    path = tmp_path / "j.db"
    original = build_journal(path, 6, SETTINGS, checkpoints=False)  # > PROGRESS_RECORDS
    seen: list[int] = []
    with Journal(path) as journal:
        report = recover_report(journal, SETTINGS, progress=seen.append)
        total = journal.record_count()
    assert report.start == "record 1" and report.records == total and report.refused is None
    assert seen and seen == sorted(seen) and seen[-1] <= total
    assert report.machine.status() == original.status()


def test_replay_is_silent_about_the_past(tmp_path, caplog):
    """Old pauses are not news: the machine's WARNINGs are dropped while it replays."""
    path = tmp_path / "j.db"
    at = next_shoe_start(1, SETTINGS)
    build_journal(path, 1, SETTINGS, checkpoints=False, partial=[
        Supervisor(at, "pause"), Supervisor(at + 1, "resume"),
        Switch(at + 2, "pause", True), Switch(at + 3, "pause", False)])
    caplog.set_level(logging.DEBUG, logger="controller.table.machine")
    caplog.clear()  # building the journal was the live table: it spoke then
    with Journal(path) as journal:
        recover(journal, SETTINGS)
    assert not [r for r in caplog.records if r.name == "controller.table.machine"]
    # outside a replay the machine still speaks
    TableMachine(SETTINGS).handle(Supervisor(1.0, "pause"))
    assert any("table paused" in r.getMessage() for r in caplog.records)


def test_a_checkpoint_older_than_the_archive_cut_gives_way_to_it(tmp_path):
    path = tmp_path / "j.db"
    original = three_shoes_and_a_half(path)
    archive_closed_shoes(path, 0.0, settings=SETTINGS)
    with Journal(path) as journal:
        base = journal.base()
        report = recover_report(journal, SETTINGS)
    assert base is not None and base.records == stored(path)["records"]
    assert report.start == f"the archive cut after record {base.records}"
    assert report.refused is None
    assert report.machine.status() == original.status()
