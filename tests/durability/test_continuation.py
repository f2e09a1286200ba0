"""A table's history continued after the seq its backend holds (durability/continuation.py):
the new journal numbers on after the backend, opens, recovers, verifies, archives and resends
as any journal does; a journal that is not behind, one in use, a wrong event or a tampered
continuation are refused. The journal being replaced is believed over the event handed in
(its delivery rows, archives, head file, the event's anchor), numbers from outside are
bounded, and the next shoe is past every shoe the backend or the old journal names."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from controller.durability import continuation
from controller.durability.archives.archive import archive_closed_shoes, verify_with_archives
from controller.durability.archives.archive_resend import ArchiveSource, archived_events
from controller.durability.canonical_form import event_digest, legacy_event_digest
from controller.durability.delivery.anchors import anchored_events_after, strip_anchor
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


def stored_event(seq: int, shoe: int | None, table: str = "T7") -> dict[str, Any]:
    """An event as a backend stored it."""
    return {"v": 1, "id": f"{table}:{seq}", "table": table, "seq": seq, "shoe": shoe,
            "round": 3, "type": "card_dealt", "time": "2026-11-30T21:00:00.000Z",
            "data": {"anchor": "as the backend stored it"}}


def backend_event(seq: int, shoe: int, table: str = "T7") -> continuation.BackendEvent:
    """What the supervisor brings from the backend: its last event, as it stored it."""
    return continuation.read_backend_event(json.dumps(stored_event(seq, shoe, table)), "T7",
                                           "event.json")


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
                          ('{"table": "T7", "seq": 0}', "seq must be between 1")):
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


def sent_events(path: Path) -> list[dict[str, Any]]:
    """The journal's events as the backends received them (anchors included)."""
    with sqlite3.connect(path) as conn:
        return anchored_events_after(conn, 0, 10_000)


def as_given(event: dict[str, Any]) -> continuation.BackendEvent:
    return continuation.read_backend_event(json.dumps(event), "T7", "event.json")


def test_numbers_from_outside_are_bounded(tmp_path: Path) -> None:
    """A seq, shoe or round past bounds.py's MAX_EXTERNAL_NUMBER (2^53 - 1), negative, or not
    a whole number is refused where it enters, naming it: not stored to fail every start; so
    is a seq or shoe whose next (the table's first event and shoe after it) would be past it."""
    for field, value, problem in (
            ("seq", 2**63 - 1, "seq must be between 1 and 9007199254740991, got 922"),
            ("seq", 2**53, "seq must be between 1 and 9007199254740991"),
            # the table issues the next one: it too must be within the bound
            ("seq", 2**53 - 1, "seq 9007199254740991 leaves no next seq within"),
            ("shoe", 2**53 - 1, "shoe 9007199254740991 leaves no next shoe within"),
            ("seq", "12", "seq must be a whole number, got '12'"),
            ("seq", True, "seq must be a whole number"),
            ("shoe", 2**53, "shoe must be between 0 and 9007199254740991"),
            ("shoe", -1, "shoe must be between 0"),
            ("round", 2**63, "round must be between 0 and 9007199254740991"),
            ("round", 1.5, "round must be a whole number")):
        event = stored_event(40, 2)
        event[field] = value
        if field == "seq":
            event["id"] = f"T7:{value}"
        with pytest.raises(continuation.BadBackendEvent, match=problem):
            as_given(event)
    for anchor, problem in (({"record": 2**64, "hash": "a" * 64}, "anchor record must be"),
                            ({"record": 0, "hash": "a" * 64}, "anchor record must be"),
                            ({"record": 5}, "anchor must be"), ("a", "anchor must be")):
        with pytest.raises(continuation.BadBackendEvent, match=problem):
            as_given({**stored_event(40, 2), "anchor": anchor})
    # the largest accepted: a journal continued after it opens and recovers, and its next
    # event and shoe are still within the bound
    path = tmp_path / "journal.sqlite"
    top = as_given({**stored_event(2**53 - 2, 2**53 - 2), "id": f"T7:{2**53 - 2}"})
    continuation.continue_history(path, KEY, top, "http", SETTINGS)
    machine = recovered(path)
    assert machine.seq == 2**53 - 2 and machine.state == "no_shoe"
    assert machine.checkpoint()["shoe"] == 2**53 - 2  # the next shoe: 2^53 - 1


def test_every_line_handed_in_is_checked(tmp_path: Path) -> None:
    lines = [stored_event(39, 2), {**stored_event(40, 2), "shoe": 2**60}, stored_event(41, 2)]
    with pytest.raises(continuation.BadBackendEvent, match=r"event.json:2: the event's shoe"):
        continuation.read_backend_event("\n".join(json.dumps(e) for e in lines), "T7",
                                        "event.json")
    with pytest.raises(continuation.BadBackendEvent, match="event.json:2: not JSON"):
        continuation.read_backend_event(json.dumps(lines[0]) + "\n{\n", "T7", "event.json")
    # the last line is the backend's last event: none before it may come after it
    backwards = [stored_event(41, 2), stored_event(40, 2)]
    with pytest.raises(continuation.BadBackendEvent, match="event.json:1: seq 41 is not before"):
        continuation.read_backend_event("\n".join(json.dumps(e) for e in backwards), "T7",
                                        "event.json")


def test_delivery_rows_past_the_event_refuse_it(tmp_path: Path) -> None:
    """A journal ahead of the event handed in whose transports were delivered past it: the
    backend got more than that event (an old or edited one), whatever it claims."""
    path = tmp_path / "journal.sqlite"
    deal_shoes(path, 1, TableMachine(SETTINGS))
    sent = sent_events(path)
    last = sent[-1]["seq"]
    edited = as_given({**strip_anchor(sent[39]), "time": "2026-01-01T00:00:00.000Z"})  # seq 40
    continuation.refuse_unless_behind(path, edited)  # another body at seq 40: a "fork"
    continuation.refuse_if_proven_past(path, KEY, edited)  # nothing delivered: no proof yet
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO delivery(transport, last_seq, updated) VALUES (?, ?, 0)",
                         [("file", last), ("http", 57), ("mqtt", 30)])
    with pytest.raises(continuation.ContinueRefused) as refused:
        continuation.refuse_if_proven_past(path, KEY, edited)
    message = str(refused.value)
    assert f"delivered to 'file' up to seq {last}, 'http' up to seq 57" in message
    assert "mqtt" not in message and "seq 40" in message
    assert "ask the backend's operator again" in message
    # at or behind every delivered position: no proof
    continuation.refuse_if_proven_past(path, KEY, backend_event(last, 1))


def test_an_edited_event_whose_anchor_is_the_journals_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    deal_shoes(path, 1, TableMachine(SETTINGS))
    sent = sent_events(path)
    genuine = sent[-1]
    assert "anchor" in genuine  # a keyed chain anchors every event
    edited = as_given({**genuine, "time": "2026-01-01T00:00:00.000Z"})
    continuation.refuse_unless_behind(path, edited)  # its body differs: looks like a fork
    with pytest.raises(continuation.ContinueRefused, match="it was edited"):
        continuation.refuse_if_proven_past(path, KEY, edited)
    moved = as_given({**genuine, "seq": 5000, "id": "T7:5000"})  # the seq edited
    with pytest.raises(continuation.ContinueRefused, match="not seq 5000: the event handed"):
        continuation.refuse_if_proven_past(path, KEY, moved)
    # another history's anchor (another hash at that record) proves nothing
    other = as_given({**genuine, "anchor": {**genuine["anchor"], "hash": "c" * 64}})
    continuation.refuse_if_proven_past(path, KEY, other)


def test_a_head_file_or_archive_past_the_event_refuses_it(tmp_path: Path) -> None:
    from controller.durability.head_file import head_path, mark_of, write_head

    path = tmp_path / "journal.sqlite"
    deal_shoes(path, 2, TableMachine(SETTINGS))
    sent = sent_events(path)
    first_shoe_end = max(e["seq"] for e in sent if e["shoe"] == 1)
    fork = backend_event(first_shoe_end - 5, 1)  # another body at that seq: a "fork"
    continuation.refuse_unless_behind(path, fork)
    continuation.refuse_if_proven_past(path, KEY, fork)

    with Journal(path, KEY) as journal:
        write_head(head_path(path), mark_of(journal, 1.8e9), journal.chain)
    with pytest.raises(continuation.ContinueRefused,
                       match=f"its head file .* says the journal reached seq {sent[-1]['seq']}"):
        continuation.refuse_if_proven_past(path, KEY, fork)
    # a head file not signed with this chain's key proves nothing
    head = json.loads(head_path(path).read_text())
    head_path(path).write_text(json.dumps({**head, "mac": "d" * 64}))
    continuation.refuse_if_proven_past(path, KEY, fork)
    head_path(path).unlink()

    assert archive_closed_shoes(path, 0.0, settings=SETTINGS, key=KEY).archived
    with pytest.raises(continuation.ContinueRefused,
                       match=f"its archives hold events up to seq {sent[-1]['seq']}"):
        continuation.refuse_if_proven_past(path, KEY, fork)


def test_the_next_shoe_is_past_every_shoe_named(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    deal_shoes(path, 2, TableMachine(SETTINGS))  # shoes 1 and 2
    assert continuation.shoe_rule(path, backend_event(999, 5)).last == 5
    assert continuation.shoe_rule(path, backend_event(999, 1)).last == 2  # the journal's
    assert continuation.shoe_rule(tmp_path / "gone.sqlite", backend_event(999, 1)).last == 1

    def lines(*events: dict[str, Any]) -> continuation.BackendEvent:
        return continuation.read_backend_event("\n".join(json.dumps(e) for e in events),
                                               "T7", "events.jsonl")

    # a last event naming no shoe (a clock_status) tells nothing alone ...
    clock = {**stored_event(61, None), "type": "clock_status", "round": None}
    with pytest.raises(continuation.ContinueRefused, match="names no shoe"):
        continuation.shoe_rule(path, lines(clock))
    # ... nor with a gap before it: seq 60 could have started shoe 9
    with pytest.raises(continuation.ContinueRefused, match="names no shoe"):
        continuation.shoe_rule(path, lines(stored_event(59, 8), clock))
    # the events back to one that names a shoe tell it
    rule = continuation.shoe_rule(path, lines(stored_event(59, 8), stored_event(60, 8), clock))
    assert rule.last == 8 and "the dealer starts shoe 9" in rule.describe()
    # from seq 1 on, naming none: the backend holds no shoe; the journal's still count
    first = [{**stored_event(seq, None), "type": "clock_status"} for seq in (1, 2)]
    assert continuation.shoe_rule(tmp_path / "gone.sqlite", lines(*first)).last == 0
    assert continuation.shoe_rule(path, lines(*first)).last == 2


def test_a_continued_journal_names_its_shoe_to_the_next_continuation(tmp_path: Path) -> None:
    """The shoe a continued journal started after is in its archive base: continuing it
    again (its first event, a clock_status, is the backend's last) deals past it."""
    path = tmp_path / "journal.sqlite"
    done = continuation.continue_history(path, KEY, backend_event(500, 7), "http", SETTINGS)
    assert done.shoes.last == 7
    clock = {**stored_event(501, None), "type": "clock_status", "round": None}
    again = continuation.read_backend_event(
        json.dumps(stored_event(500, 7)) + "\n" + json.dumps(clock), "T7", "events.jsonl")
    assert continuation.shoe_rule(path, again).last == 7
    clock_only = continuation.read_backend_event(
        json.dumps({**clock, "seq": 1, "id": "T7:1"}), "T7", "e.json")
    assert continuation.shoe_rule(path, clock_only).last == 7  # from seq 1: the journal's
    machine = recovered(path)
    assert machine.state == "no_shoe"


def test_an_unconfirmed_continuation_is_recorded_in_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    who = {"by": "supervisor-ana", "reason": "the backend's database is being restored"}
    continuation.continue_history(path, KEY, backend_event(500, 7), "unconfirmed", SETTINGS,
                                  now=1.8e9, unconfirmed=who)
    with sqlite3.connect(path) as conn:
        recorded = read_continuation(conn)
    assert recorded is not None and recorded.unconfirmed == who
    assert recorded.source == "unconfirmed" and recorded.at == "2027-01-15T08:00:00Z"
    deal_shoes(path, 1, recovered(path))
    assert verify_file(path, KEY).ok
    # the record is part of the chain's origin: edited, the journal no longer verifies
    with sqlite3.connect(path) as conn:
        text = conn.execute("SELECT value FROM meta WHERE key='continued'").fetchone()[0]
        conn.execute("UPDATE meta SET value=? WHERE key='continued'",
                     (text.replace("supervisor-ana", "nobody"),))
    result = verify_file(path, KEY)
    assert not result.ok and "origin" in result.reason


def test_a_file_transports_position_is_its_last_complete_event(tmp_path: Path) -> None:
    """What the file sink's file ends with, read backwards: a torn last write (the sink cuts
    it off and sends it again) is not an event it holds; long files are not read whole."""
    from controller.durability.continuation_evidence import file_position

    path = tmp_path / "events.jsonl"
    assert file_position(path, "T7", "file") is None  # no file: it cannot tell
    path.write_bytes(b"")
    assert file_position(path, "T7", "file") is None
    events = [{**stored_event(seq, 1), "data": {"pad": "x" * 900}} for seq in range(1, 201)]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))  # ~200 KB: several chunks
    held = file_position(path, "T7", "file")
    assert held is not None and (held.seq, held.sha256) == (200, event_digest(events[-1]))
    with path.open("a") as file:
        file.write(json.dumps(stored_event(201, 1))[:40])  # a write cut short
    held = file_position(path, "T7", "file")
    assert held is not None and held.seq == 200
    path.write_text(json.dumps(stored_event(5, 1, table="T8")) + "\n")
    with pytest.raises(ValueError, match="not an event of table 'T7'"):
        file_position(path, "T7", "file")
    path.write_text(json.dumps({**stored_event(5, 1), "seq": 2**63}) + "\n")
    with pytest.raises(ValueError, match="seq must be between 1 and 9007199254740991"):
        file_position(path, "T7", "file")


def test_a_journal_continued_past_the_bounds_before_they_existed_is_continued_again(
        tmp_path: Path) -> None:
    """A journal continued after seq 2^63 - 1 (an event read before numbers were bounded):
    it is refused with a message naming the way out, not an OverflowError at every start,
    and continuing again after the backend's true last event sets it aside."""
    path = tmp_path / "journal.sqlite"
    continuation.continue_history(path, KEY, continuation.BackendEvent(2**63 - 1, 1, "a" * 64),
                                  "given", SETTINGS)
    with pytest.raises(JournalError, match="beyond 9007199254740991, which no backend can "
                                           "hold.*journal continue` again"):
        Journal(path, KEY)
    event = backend_event(80, 1)
    continuation.refuse_unless_behind(path, event)
    continuation.refuse_if_proven_past(path, KEY, event)
    done = continuation.continue_history(path, KEY, event, "http", SETTINGS)
    assert done.set_aside is not None and done.shoes.last == 1
    machine = recovered(path)
    assert machine.seq == 80 and machine.state == "no_shoe"


def test_a_shoe_told_only_by_lines_before_the_last_is_not_confirmed() -> None:
    """Only the last line is the event a backend confirms: when it names no shoe, the shoe
    the lines before it tell is marked unconfirmed (an earlier line edited to a lower shoe
    would have a shoe dealt again); when it names one, that shoe is the backend's last."""
    def told(*events: dict[str, Any]) -> continuation.BackendEvent:
        return continuation.read_backend_event("".join(json.dumps(e) + "\n" for e in events),
                                               "T7", "events.jsonl")

    edited_lower = told(stored_event(49, 1), stored_event(50, None))
    assert edited_lower.told_shoe == 1 and edited_lower.shoe_unconfirmed
    # the nearest line back that names a shoe tells it, not the highest of all lines
    assert told(stored_event(48, 3), stored_event(49, 2), stored_event(50, None)).told_shoe == 2
    # the last line names a shoe: it is the backend's last shoe, confirmed with the event
    named = told(stored_event(49, 9), stored_event(50, 2))
    assert named.told_shoe == 2 and not named.shoe_unconfirmed
    assert not backend_event(50, 2).shoe_unconfirmed


def test_a_continued_journal_is_held_to_the_event_it_continued_from(tmp_path: Path) -> None:
    """A backend that later holds seq N, the continuation's origin (no event of the new
    journal), with another digest than the continuation recorded: the history forked there.
    Its digest in the older form (a backend written before RFC 8785) is the same event."""
    from controller.durability.delivery.held import Held, fork_problem
    from controller.durability.journal import last_seq_of, open_read_only

    for unconfirmed in (None, {"by": "floor", "reason": "backend down"}):
        path = tmp_path / f"journal-{unconfirmed is None}.sqlite"
        given = backend_event(50, 2)
        continuation.continue_history(path, KEY, given, "http", SETTINGS,
                                      unconfirmed=unconfirmed)
        conn = open_read_only(path)
        try:
            def problem(digest: str, conn: sqlite3.Connection = conn) -> str | None:
                return fork_problem(conn, last_seq_of(conn), Held(50, digest, "http"))

            assert problem(given.sha256) is None
            assert given.older_sha256 and problem(given.older_sha256) is None
            forked = problem("c" * 64)
            assert forked is not None and "forked at seq 50" in forked
            assert given.sha256 in forked and "c" * 64 in forked
            assert fork_problem(conn, last_seq_of(conn), Held(49, "c" * 64, "http")) is None
        finally:
            conn.close()
