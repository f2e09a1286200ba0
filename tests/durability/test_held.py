"""A backend's position held against a real journal file: the same history passes, a journal
that ends before it or holds another event at its seq is named a fork."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from controller.durability.canonical_form import event_digest, legacy_event_digest
from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.delivery.held import (
    DIGEST_DIFFERS,
    Held,
    fork_problem,
    held_of,
    parse_held,
)
from controller.durability.journal import Journal
from controller.table.inputs import Button
from support.journal_helpers import event, fill


def sent_events(path: Path) -> list[dict]:
    """The events as the backend received them (anchors on), from the journal file."""
    conn = sqlite3.connect(path)
    try:
        return anchored_events_after(conn, 0, 10_000)
    finally:
        conn.close()


def problem(path: Path, held: dict) -> str | None:
    conn = sqlite3.connect(path)
    try:
        last = conn.execute("SELECT MAX(event_seq) FROM records").fetchone()[0] or 0
        return fork_problem(conn, last, parse_held(held, "http"))
    finally:
        conn.close()


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    journal = Journal(tmp_path / "journal.sqlite")
    fill(journal, 12)
    journal.close()
    return tmp_path / "journal.sqlite"


def test_the_history_the_backend_holds_passes_wherever_it_stands(journal_file: Path) -> None:
    sent = sent_events(journal_file)
    assert all("anchor" in e for e in sent)  # the digest covers the anchor: the chain's head
    for upto in (0, 1, len(sent) // 2, len(sent)):
        assert problem(journal_file, held_of(sent[:upto])) is None, upto


def test_a_journal_that_ends_before_the_backend_is_an_earlier_copy(journal_file: Path) -> None:
    sent = sent_events(journal_file)
    ahead = held_of([*sent, {**event(len(sent) + 1)}])
    found = problem(journal_file, ahead)
    assert found is not None and found.startswith("the journal is behind the backend")
    assert f"up to seq {len(sent) + 1}" in found and f"ends at seq {len(sent)}" in found
    assert DIGEST_DIFFERS not in found


def test_another_digest_of_event_n_names_both_hashes_and_the_likely_cause(
        journal_file: Path) -> None:
    """The journal holds event 5 under the backend's id: the message names the backend's
    digest, the journal's (no round open: nothing sealed) and the canonical form, and says a
    hashing difference is the likely cause before it says fork."""
    sent = sent_events(journal_file)
    changed = [*sent[:4], {**sent[4], "data": {"index": 9, "target": "P2"}}]
    theirs = held_of(changed)["sha256"]
    found = problem(journal_file, held_of(changed))
    assert found is not None and found.startswith(f"{DIGEST_DIFFERS} 5 differs")
    assert theirs in found and event_digest(sent[4]) in found
    assert "RFC 8785" in found and f"same id ({sent[4]['id']})" in found
    assert "hashing difference is the likely cause" in found
    assert "forked at or before seq 5" in found and "behind" not in found
    # the same body with another anchor (a re-chained copy) differs too
    rechained = [*sent[:4], {**sent[4], "anchor": {"record": 99, "hash": "0" * 64}}]
    assert DIGEST_DIFFERS in (problem(journal_file, held_of(rechained)) or "")


def test_the_journals_digest_of_an_event_in_open_betting_is_not_shown(tmp_path: Path) -> None:
    """Event N lies in a round whose betting is open in this journal (plain chain, so it left
    unanchored): a digest of its body could be tried against the 52 cards, so only the
    backend's digest is named; once the journal holds the betting's close, both are."""
    path = tmp_path / "journal.sqlite"
    with Journal(path) as journal:
        journal.append(Button(1.0, "start_round"), [event(1, "round_opened", betting_seconds=15)])
        journal.append(Button(2.0, "start_round"), [event(2)])  # a card_dealt in the window
    sent = sent_events(path)
    assert "anchor" not in sent[1]  # sealed: the plain chain sends it bare
    other = {**sent[1], "data": {"index": 3, "target": "P4"}}
    found = problem(path, held_of([sent[0], other]))
    assert found is not None and held_of([sent[0], other])["sha256"] in found
    assert event_digest(sent[1]) not in found and legacy_event_digest(sent[1]) not in found
    assert "not shown" in found
    with Journal(path) as journal:
        journal.append(Button(3.0, "start_round"), [event(3, "betting_closed")])
    found = problem(path, held_of([sent[0], other]))
    assert found is not None and event_digest(sent[1]) in found


def test_a_backend_hashing_the_older_documented_form_is_accepted(journal_file: Path) -> None:
    """Tables before RFC 8785 documented the digest over Python's json.dumps text: a backend
    that still computes it is not told its history forked."""
    sent = sent_events(journal_file)
    for seq in (1, 5, len(sent)):
        assert problem(journal_file, {"seq": seq,
                                      "sha256": legacy_event_digest(sent[seq - 1])}) is None


@pytest.mark.parametrize("bad", [
    None, [], {"seq": -1}, {"seq": True}, {"seq": 3}, {"seq": 3, "sha256": "XYZ"},
    {"seq": 0, "sha256": "0" * 64}, {"seq": 3, "sha256": "0" * 64, "extra": 1}, {"sha256": "a"}])
def test_a_malformed_position_is_refused_with_what_is_wrong(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_held(bad, "mqtt")


def test_a_position_round_trips() -> None:
    digest = event_digest(event(3))
    assert parse_held({"seq": 3, "sha256": digest}, "mqtt") == Held(3, digest, "mqtt")
    assert parse_held({"seq": 0}, "mqtt") == Held(0, None, "mqtt")


@pytest.mark.parametrize("seq", [2**53, 2**63 - 1, 2**64])
def test_a_position_out_of_range_is_refused_naming_the_value(seq: int) -> None:
    """A number past 2^53-1 (bounds.py) never reaches the journal's queries."""
    with pytest.raises(ValueError, match=f"seq must be between 0 and {2**53 - 1}, got {seq}"):
        parse_held({"seq": seq, "sha256": "0" * 64}, "http")
    assert parse_held({"seq": 2**53 - 1, "sha256": "0" * 64}, "http").seq == 2**53 - 1
