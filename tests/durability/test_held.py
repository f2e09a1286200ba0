"""A backend's position held against a real journal file: the same history passes, a journal
that ends before it or holds another event at its seq is named a fork."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.delivery.held import (
    Held,
    event_digest,
    fork_problem,
    held_of,
    parse_held,
)
from controller.durability.journal import Journal
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
    assert found is not None
    assert f"up to seq {len(sent) + 1}" in found and f"ends at seq {len(sent)}" in found


def test_another_event_at_the_backends_seq_is_a_fork(journal_file: Path) -> None:
    sent = sent_events(journal_file)
    changed = [*sent[:4], {**sent[4], "data": {"index": 9, "target": "P2"}}]
    found = problem(journal_file, held_of(changed))
    assert found is not None and "forked at or before seq 5" in found
    # this journal's own digest is never named: its event may lie in an open betting window
    assert event_digest(sent[4])[:12] not in found
    # the same body with another anchor (a re-chained copy) is a fork too
    rechained = [*sent[:4], {**sent[4], "anchor": {"record": 99, "hash": "0" * 64}}]
    assert "forked" in (problem(journal_file, held_of(rechained)) or "")


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
