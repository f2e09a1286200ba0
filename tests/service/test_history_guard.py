"""The history guard lets a transport send only once its backend's word on where it stands
has been compared with the journal: a real journal file, the real file sink (its file as the
backend's copy) and an HTTP transport whose backend is not there."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.delivery.held import held_at
from controller.durability.delivery.outbox import WAITING_FOR_WORD
from controller.durability.journal import Journal
from controller.service.trust.history_guard import HistoryGuard, behind_delivered
from controller.transports.file import FileSink, FileSinkSettings
from controller.transports.http import HttpTransport, HttpTransportSettings
from support.journal_helpers import TABLE, fill
from support.waiting import wait_until
from testkit.backends import free_port


@pytest.fixture
def journal_file(tmp_path: Path) -> Path:
    journal = Journal(tmp_path / "journal.sqlite")
    fill(journal, 12)
    journal.close()
    return tmp_path / "journal.sqlite"


def sent(path: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(path)
    try:
        return anchored_events_after(conn, 0, 10_000)
    finally:
        conn.close()


def sink_holding(tmp_path: Path, events: list[dict[str, Any]], name: str = "file") -> FileSink:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return FileSink(FileSinkSettings(path=str(path)), table=TABLE, name=name)


def guard_for(journal_file: Path) -> tuple[HistoryGuard, list[str]]:
    forks: list[str] = []
    return HistoryGuard(str(journal_file), on_fork=forks.append), forks


def test_the_same_history_lets_the_file_send(journal_file: Path, tmp_path: Path) -> None:
    events = sent(journal_file)
    same, empty = sink_holding(tmp_path, events[:7]), sink_holding(tmp_path, [], "empty")
    guard, _ = guard_for(journal_file)
    guard.watch([same, empty])
    assert guard.waiting_for("file") == WAITING_FOR_WORD  # nothing heard yet
    assert guard.wait_first([same, empty], 10) is None
    assert guard.waiting_for("file") is None and guard.waiting_for("empty") is None
    assert guard.waiting_for("not a transport of this guard") is None


def test_a_file_ahead_of_the_journal_is_a_fork(journal_file: Path, tmp_path: Path) -> None:
    events = sent(journal_file)
    ahead = [*events, {**events[-1], "seq": events[-1]["seq"] + 1,
                       "id": f"{TABLE}:{events[-1]['seq'] + 1}"}]
    guard, _ = guard_for(journal_file)
    sink = sink_holding(tmp_path, ahead)
    guard.watch([sink])
    problem = guard.wait_first([sink], 10)
    assert problem is not None and f"up to seq {ahead[-1]['seq']}" in problem
    assert guard.waiting_for("file") == WAITING_FOR_WORD  # never let go


def test_another_event_at_the_files_last_seq_is_a_fork(journal_file: Path,
                                                       tmp_path: Path) -> None:
    events = sent(journal_file)
    other = [*events[:4], {**events[4], "time": "2020-01-01T00:00:00.000Z"}]
    guard, _ = guard_for(journal_file)
    sink = sink_holding(tmp_path, other)
    guard.watch([sink])
    assert "forked at or before seq 5" in (guard.wait_first([sink], 10) or "")


def test_a_backend_that_does_not_answer_keeps_its_events_waiting(journal_file: Path,
                                                                 tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s" * 32)
    down = HttpTransport(HttpTransportSettings(
        url=f"http://127.0.0.1:{free_port()}/events", secret_file=str(secret),
        allow_insecure=True), table=TABLE)
    guard, forks = guard_for(journal_file)
    guard.watch([down])
    try:
        assert guard.wait_first([down], 0.3) is None  # deals on
        assert guard.waiting_for("http") == WAITING_FOR_WORD
        guard.start()
        down.report_held({"seq": 2**63 - 1, "sha256": "0" * 64})  # refused: still waiting
        waiting = guard.waiting_for("http") or ""
        assert waiting.startswith(WAITING_FOR_WORD) and str(2**63 - 1) in waiting
        down.report_held({"seq": 3, "sha256": hashlib.sha256(b"x").hexdigest()})  # readable,
        # and not this journal's event 3: a fork
        wait_until(lambda: forks, 10, "the fork told")
    finally:
        guard.stop()
        down.close()
    assert "forked at or before seq 3" in forks[0]


def test_an_answer_that_goes_backwards_after_one_that_held_holds_the_events_back(
        journal_file: Path, tmp_path: Path) -> None:
    """A backend that said seq 7 (this journal's event 7) is let go; its next word, seq 4 or
    "nothing", falls short of it: its events wait again, and why says both positions. Its
    position at 7 again lets them go."""
    secret = tmp_path / "secret"
    secret.write_text("s" * 32)
    backend = HttpTransport(HttpTransportSettings(
        url=f"http://127.0.0.1:{free_port()}/events", secret_file=str(secret),
        allow_insecure=True), table=TABLE)
    events = sent(journal_file)
    guard, forks = guard_for(journal_file)
    guard.watch([backend])
    try:
        guard.wait_first([backend], 0.3)  # nobody there: it waits
        guard.start()
        backend.report_held(held_at(events[6]))
        wait_until(lambda: guard.waiting_for("http") is None, 10, "the backend let go")
        for less, says in ((held_at(events[3]), "holds up to seq 4"),
                           ({"seq": 0}, "holds nothing of this table")):
            backend.report_held(less)
            assert guard.waiting_for("http") == f"{WAITING_FOR_WORD}: " + behind_delivered(
                "http", says, 7)
        backend.report_held(held_at(events[6]))
        wait_until(lambda: guard.waiting_for("http") is None, 10, "the backend let go again")
    finally:
        guard.stop()
        backend.close()
    assert forks == []
