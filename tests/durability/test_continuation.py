"""A table's history continued after the seq its backend holds (durability/continuation.py):
the new journal numbers on after the backend, opens, recovers, verifies, archives and resends
as any journal does; a journal that is not behind, one in use, a wrong event or a tampered
continuation are refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from controller.durability import continuation
from controller.durability.archives.archive import archive_closed_shoes, verify_with_archives
from controller.durability.archives.archive_resend import ArchiveSource, archived_events
from controller.durability.canonical_form import event_digest, legacy_event_digest
from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.journal import (
    Journal,
    JournalError,
    export_events,
    read_continuation,
    verify_file,
)
from controller.durability.recovery import recover
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine

SETTINGS = MachineSettings(table_id="T7", decks=1)
KEY = b"k" * 32


def deal_shoes(path: Path, shoes: int, machine: TableMachine, key: bytes | None = KEY,
               seed: int = 1, start_at: float = 0.0) -> float:
    """Deal whole shoes into the journal at ``path``; the table clock after the last."""
    clock = start_at
    with Journal(path, key) as journal:
        for offset in range(shoes):
            script = shoe_script(seed + offset, decks=1, start_at=clock + 5)
            for inp in script:
                journal.append(inp, machine.handle(inp))
            clock = max(inp.at for inp in script)
    return clock


def journal_last_seq(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0])


def recovered(path: Path) -> TableMachine:
    """The machine the daemon would start with on this journal."""
    journal = Journal(path, KEY)
    try:
        machine: TableMachine = recover(journal, SETTINGS, machine_factory=TableMachine)
    finally:
        journal.close()
    return machine


def backend_event(seq: int, shoe: int, table: str = "T7") -> continuation.BackendEvent:
    """What the supervisor brings from the backend: its last event, as it stored it."""
    event = {"v": 1, "id": f"{table}:{seq}", "table": table, "seq": seq, "shoe": shoe,
             "round": 3, "type": "card_dealt", "time": "2026-11-30T21:00:00.000Z",
             "data": {"anchor": "as the backend stored it"}}
    return continuation.read_backend_event(json.dumps(event), "T7", "event.json")


def test_a_continued_journal_numbers_on_after_the_backend(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    deal_shoes(path, 1, TableMachine(SETTINGS))
    old_events = list(export_events(path))
    mine = json.loads(old_events[-1])["seq"]
    event = backend_event(mine + 40, shoe=3)   # the backend holds 40 events more, 2 shoes on

    continuation.refuse_unless_behind(path, event)  # behind: may continue
    done = continuation.continue_history(path, KEY, event, "http", SETTINGS, now=1.8e9)

    # the old files, untouched, set aside for the audit
    assert done.set_aside is not None and done.moved[0] == "journal.sqlite"
    assert list(export_events(done.set_aside / "journal.sqlite")) == old_events
    assert not (path.parent / "journal.sqlite.head").exists()
    with sqlite3.connect(path) as conn:
        assert read_continuation(conn) == done.continuation
    assert done.continuation.after_seq == mine + 40

    # the table recovers it as a table with no shoe open, numbering after the backend
    machine = recovered(path)
    assert machine.state == "no_shoe" and machine.seq == mine + 40
    assert verify_file(path, KEY).ok
    deal_shoes(path, 2, machine, start_at=100.0)
    events = [json.loads(line) for line in export_events(path)]
    assert [e["seq"] for e in events] == list(range(mine + 41, mine + 41 + len(events)))
    assert {e["shoe"] for e in events if e["shoe"] is not None} == {4, 5}
    assert verify_file(path, KEY).ok

    # archiving the first continued shoe: the archives link to the continuation's origin
    assert archive_closed_shoes(path, 0.0, settings=SETTINGS, key=KEY).archived
    assert verify_with_archives(path, key=KEY).ok
    with sqlite3.connect(path) as conn:
        source = ArchiveSource.beside(path, key=KEY)
        resent = archived_events(source, conn, mine + 41, mine + 45)
    assert [e["seq"] for e in resent] == list(range(mine + 41, mine + 46))


def test_a_journal_that_is_not_behind_is_not_continued(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    deal_shoes(path, 1, TableMachine(SETTINGS))
    with sqlite3.connect(path) as conn:  # as the backend received them: anchors included
        before, last = anchored_events_after(conn, journal_last_seq(conn) - 2, 2)
    same = continuation.BackendEvent(last["seq"], last["shoe"], event_digest(last))
    with pytest.raises(continuation.ContinueRefused, match="not behind the backend"):
        continuation.refuse_unless_behind(path, same)
    # the backend one event behind this journal: it catches up, nothing to continue
    with pytest.raises(continuation.ContinueRefused, match="not behind"):
        continuation.refuse_unless_behind(path, continuation.BackendEvent(
            before["seq"], before["shoe"], event_digest(before)))
    # another event at the journal's last seq: a fork, which may be continued
    continuation.refuse_unless_behind(path, backend_event(last["seq"], 1))


def test_a_journal_open_in_another_process_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    deal_shoes(path, 1, TableMachine(SETTINGS))
    with Journal(path, KEY), pytest.raises(continuation.ContinueRefused,
                                           match="open in another process"):
        continuation.continue_history(path, KEY, backend_event(999, 2), "http", SETTINGS)
    assert not list(tmp_path.glob("forked-*")) and verify_file(path, KEY).ok


def test_the_backends_event_must_be_this_tables_and_agree(tmp_path: Path) -> None:
    event = {"v": 1, "id": "T8:5", "table": "T8", "seq": 5, "shoe": 1}
    with pytest.raises(continuation.ContinueRefused, match="not of this table 'T7'"):
        continuation.read_backend_event(json.dumps(event), "T7", "e.json")
    for text, problem in (("", "empty"), ("{", "not JSON"), ("[1]", "JSON object"),
                          ('{"table": "T7", "seq": 0}', "no seq")):
        with pytest.raises(continuation.ContinueRefused, match=problem):
            continuation.read_backend_event(text, "T7", "e.json")
    given = backend_event(50, 2)
    from controller.durability.delivery.held import Held
    with pytest.raises(continuation.ContinueRefused, match="up to seq 51"):
        continuation.agreeing_position(given, {"http": Held(51, "a" * 64, "http")})
    with pytest.raises(continuation.ContinueRefused, match="another event seq 50"):
        continuation.agreeing_position(given, {"http": Held(50, "a" * 64, "http")})
    continuation.agreeing_position(given, {"http": Held(50, given.sha256, "http")})


def test_a_backend_holding_the_older_digest_form_agrees_with_its_event() -> None:
    """A backend written before RFC 8785 holds the older form's digest of its last event (an
    older table's ``15.0`` in it): the event it brings is the one it holds."""
    from controller.durability.delivery.held import Held
    event = {"v": 1, "id": "T7:50", "table": "T7", "seq": 50, "shoe": 2, "round": 3,
             "type": "round_opened", "data": {"betting_seconds": 15.0}}
    given = continuation.read_backend_event(json.dumps(event), "T7", "e.json")
    assert given.sha256 == event_digest(event) != legacy_event_digest(event)
    for digest in (event_digest(event), legacy_event_digest(event)):
        continuation.agreeing_position(given, {"mqtt": Held(50, digest, "mqtt")})
    with pytest.raises(continuation.ContinueRefused, match="another event seq 50"):
        continuation.agreeing_position(given, {"mqtt": Held(50, "b" * 64, "mqtt")})


def test_a_tampered_continuation_does_not_hold(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    continuation.continue_history(path, KEY, backend_event(500, 7), "http", SETTINGS)
    deal_shoes(path, 1, recovered(path))
    assert verify_file(path, KEY).ok
    conn = sqlite3.connect(path)
    text = conn.execute("SELECT value FROM meta WHERE key='continued'").fetchone()[0]
    # another backend digest recorded: the chain's origin no longer comes from it
    conn.execute("UPDATE meta SET value=? WHERE key='continued'",
                 (text.replace(json.loads(text)["sha256"], "b" * 64),))
    conn.commit()
    result = verify_file(path, KEY)
    assert not result.ok and "origin" in result.reason
    # numbering moved: the base no longer continues what the record says
    conn.execute("UPDATE meta SET value=? WHERE key='continued'",
                 (text.replace('"after_seq":500', '"after_seq":400'),))
    conn.commit()
    conn.close()
    with pytest.raises(JournalError, match="does not continue a history after that seq"):
        Journal(path, KEY)
