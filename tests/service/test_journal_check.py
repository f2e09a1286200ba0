"""The full journal check after READY: its states, and a failure's words stay sealed."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from controller.durability.journal import Journal, record_hash
from controller.rules.cards import parse_card
from controller.service.trust.journal_check import JournalCheck
from controller.service.trust.journal_check_text import check_text
from controller.table.inputs import Button, CardScan
from controller.table.machine import MachineSettings, TableMachine
from support.sealing import Leaks

SETTINGS = MachineSettings(table_id="T7")


def journal_with_a_card(path: Path, card: str) -> int:
    """A journal whose last input deals ``card``; returns that input's record number."""
    machine = TableMachine(SETTINGS)
    with Journal(path) as journal:
        for inp in (Button(1.0, "new_shoe"), CardScan(2.0, parse_card("5H"))):
            journal.append(inp, machine.handle(inp))
        return journal.append(CardScan(3.0, parse_card(card)),
                              machine.handle(CardScan(3.0, parse_card(card))))


def run_check(path: Path) -> dict:
    changes: list[dict] = []
    check = JournalCheck(path)
    check._on_change = lambda: changes.append(check.status())
    check.start()
    check.join(30)
    assert [c["state"] for c in changes] == ["running", changes[-1]["state"]]
    return check.status()


def test_a_sound_journal_checks_ok(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    journal_with_a_card(path, "KD")
    status = run_check(path)
    assert status["state"] == "ok" and status["records"] > 3
    assert (check_text(status) or "").startswith("ok at ")


def test_an_invalid_input_is_named_without_its_contents(tmp_path: Path) -> None:
    """An input record made invalid (hash recomputed, so only the input check sees it) still
    holds its card: the reason says where and what kind of fault, never the card."""
    path = tmp_path / "j.db"
    n = journal_with_a_card(path, "KD")
    conn = sqlite3.connect(path)
    kind, seq, written, body, prev = conn.execute(
        "SELECT kind, event_seq, written, body, prev_hash FROM records WHERE n=?", (n,)).fetchone()
    data = json.loads(body)
    data["card"] = data["card"] + "X"  # not a card code any more, still names the card
    body = json.dumps(data, sort_keys=True, separators=(",", ":"))
    digest = record_hash(n, kind, seq, written, prev, body)
    conn.execute("UPDATE records SET body=?, hash=? WHERE n=?", (body, digest, n))
    # keep the chain after it intact, so the input check is what fails
    for m, k, s, w, b in conn.execute("SELECT n, kind, event_seq, written, body FROM records "
                                      "WHERE n > ? ORDER BY n", (n,)).fetchall():
        digest_next = record_hash(m, k, s, w, digest, b)
        conn.execute("UPDATE records SET prev_hash=?, hash=? WHERE n=?", (digest, digest_next, m))
        digest = digest_next
    conn.execute("UPDATE head SET last_hash=?", (digest,))
    conn.commit()
    conn.close()
    status = run_check(path)
    assert status["state"] == "failed"
    assert status["reason"] == f"record {n}: input is not valid"
    leaks = Leaks()
    leaks.add_card("KD")
    leaks.check("journal check status", status)
    leaks.check("status line", check_text(status))


def test_a_missing_journal_fails_the_check_without_raising(tmp_path: Path) -> None:
    status = run_check(tmp_path / "nowhere.db")
    assert status["state"] == "failed" and "no such journal file" in status["reason"]


def test_a_keyed_journal_is_checked_with_its_key_in_the_child(tmp_path: Path) -> None:
    """The daemon's check of a keyed journal: the key reaches the child (on its stdin) and
    the child holds the chain to it; without the key the check says so."""
    key = b"k" * 32
    path = tmp_path / "j.db"
    machine = TableMachine(SETTINGS)
    with Journal(path, key) as journal:
        for inp in (Button(1.0, "new_shoe"), CardScan(2.0, parse_card("5H"))):
            journal.append(inp, machine.handle(inp))
    check = JournalCheck(path, key=key)
    check.start()
    check.join(30)
    assert check.status()["state"] == "ok", check.status()
    unkeyed = run_check(path)
    assert unkeyed["state"] == "failed" and "keyed" in unkeyed["reason"]
    # a record changed and re-hashed without the key no longer holds
    conn = sqlite3.connect(path)
    kind, seq, written, body, prev = conn.execute(
        "SELECT kind, event_seq, written, body, prev_hash FROM records WHERE n=2").fetchone()
    conn.execute("UPDATE records SET written=?, hash=? WHERE n=2",
                 (written + 1, record_hash(2, kind, seq, written + 1, prev, body)))
    conn.commit()
    conn.close()
    check = JournalCheck(path, key=key)
    check.start()
    check.join(30)
    assert check.status()["state"] == "failed"
    assert check.status()["reason"].startswith("record 2: ")


def test_a_check_that_cannot_start_waits_and_tries_again_without_failing(tmp_path: Path) -> None:
    """Out of file descriptors, no check process can start: that is no verdict on the journal.
    The check says it is waiting (the table deals on, nothing paused) and runs once it can."""
    import os
    import resource
    import time

    path = tmp_path / "j.db"
    journal_with_a_card(path, "KD")
    failed: list[str] = []
    check = JournalCheck(path, retry_s=0.2, on_failed=failed.append)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # the limit at the lowest free descriptor number: every number below it is taken, so none
    # can be opened (a count of open descriptors left the gaps other tests had closed usable)
    lowest_free = os.dup(0)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        check.start()
        deadline = time.monotonic() + 10
        while check.status()["state"] != "waiting" and time.monotonic() < deadline:
            time.sleep(0.02)
        waiting = check.status()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    check.join(30)
    assert waiting["state"] == "waiting", waiting
    assert "could not start" in waiting["reason"]
    assert (check_text(waiting) or "").startswith("waiting to run: ")
    assert check.status()["state"] == "ok", check.status()
    assert failed == []  # the table was never paused for it
