"""An upgrade on a running table: a journal an older version wrote (``"betting_seconds":15.0``
in its events) still verifies, recovers under this version (which writes ``15``) and deals
on; a backend that holds an old-form digest of one of its events is accepted, and so is one
holding the RFC 8785 digest; ``journal verify --against`` takes a backend's ``15`` for the
journal's ``15.0``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from controller.durability.canonical_form import event_digest, legacy_event_digest
from controller.durability.delivery.against import verify_against
from controller.durability.delivery.held import DIGEST_DIFFERS, fork_problem, parse_held
from controller.durability.journal import Journal, verify_file
from controller.durability.recovery import recover
from controller.table.events import to_json_line, whole_numbers_as_integers
from controller.table.machine import MachineSettings
from support.canonical_journals import TABLE, events_sent, older_writer, table_inputs, write_journal

INPUTS = table_inputs(120)
SPLIT = 80  # the older version journals the first inputs, this one the rest


def old_journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal.sqlite"
    with older_writer():
        write_journal(path, INPUTS[:SPLIT])
    return path


def event_bodies(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [body for (body,) in conn.execute(
            "SELECT body FROM records WHERE kind='event' ORDER BY n")]
    finally:
        conn.close()


def test_an_older_versions_journal_verifies_recovers_and_deals_on(tmp_path) -> None:
    path = old_journal(tmp_path)
    assert verify_file(path).ok
    settings = MachineSettings(table_id=TABLE)
    old_bodies = event_bodies(path)
    assert any('"betting_seconds":15.0' in body for body in old_bodies)
    with Journal(path) as journal:
        machine = recover(journal, settings)  # replay writes 15 where the journal holds 15.0
        for inp in INPUTS[SPLIT:]:
            journal.append(inp, machine.handle(inp))
    assert verify_file(path).ok
    bodies = event_bodies(path)
    assert bodies[:len(old_bodies)] == old_bodies  # records as they were written
    new_opened = [json.loads(body) for body in bodies[len(old_bodies):]
                  if json.loads(body)["type"] == "round_opened"]
    assert new_opened and all(type(e["data"]["betting_seconds"]) is int for e in new_opened)
    # and the whole journal, old and new records, recovers again
    with Journal(path) as journal:
        recover(journal, settings)


def test_a_backend_holding_either_digest_of_an_old_event_is_accepted(tmp_path) -> None:
    path = old_journal(tmp_path)
    sent = events_sent(path)
    conn = sqlite3.connect(path)
    try:
        last = sent[-1]["seq"]
        for event in sent:
            if "15.0" not in to_json_line(event) and "16.0" not in to_json_line(event):
                continue
            assert event_digest(event) != legacy_event_digest(event)
            for digest in (legacy_event_digest(event), event_digest(event)):
                held = parse_held({"seq": event["seq"], "sha256": digest}, "http")
                assert fork_problem(conn, last, held) is None, event["type"]
        wrong = parse_held({"seq": sent[5]["seq"], "sha256": "0" * 64}, "http")
        assert (fork_problem(conn, last, wrong) or "").startswith(DIGEST_DIFFERS)
    finally:
        conn.close()


def test_verify_against_takes_a_backends_whole_numbers_for_the_journals_floats(
        tmp_path) -> None:
    """A JavaScript backend stores ``15`` for the ``15.0`` an older table sent it."""
    path = old_journal(tmp_path)
    received = tmp_path / "received.jsonl"
    received.write_text("".join(json.dumps(whole_numbers_as_integers(event)) + "\n"
                                for event in events_sent(path)))
    assert "15.0" not in received.read_text()
    result = verify_against(path, received)
    assert result.ok, result.describe()
    # a changed number is still a difference
    lines = received.read_text().replace('"betting_seconds": 15', '"betting_seconds": 16', 1)
    received.write_text(lines)
    assert "differs from the journal's" in verify_against(path, received).describe()
