"""Group commit in the owner loop: device inputs queued together are journaled in one
transaction, give exactly the events they give one by one, end a group at a shoe's start or
end (the shoe-end checkpoint is taken where the journal stops), and on any failure the group is
undone and its inputs handled one by one."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.durability import checkpoints
from controller.durability.journal import Journal, JournalError
from controller.durability.recovery import recover_report
from controller.rules.cards import parse_card
from controller.service.daemon import Daemon
from controller.table.inputs import Button, CardScan, Input
from controller.table.machine import TableMachine
from support.daemon_helpers import in_process_daemon
from support.waiting import wait_until

FLIP_AND_BURNS = ("5H", "2C", "3C", "4C", "6C", "7C")  # a 5 flipped: five burns


@pytest.fixture
def state_dirs() -> Iterator[list[Path]]:
    made: list[Path] = []

    def make() -> Path:
        made.append(Path(tempfile.mkdtemp(prefix="pdg-", dir="/tmp")))
        return made[-1]

    yield make  # type: ignore[misc]
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def make_daemon(state_dir: Path, group_max: int | None = None) -> Daemon:
    daemon = in_process_daemon(state_dir, "G1")
    if group_max is not None:
        daemon.group_max = group_max
    return daemon


class Gate:
    """Holds the owner thread inside the next event listener call, so that what the test
    posts meanwhile is queued together, as a burst of frames from a driver is."""

    def __init__(self, daemon: Daemon):
        self.armed = threading.Event()
        self.entered = threading.Event()
        self.opened = threading.Event()
        daemon.add_event_listener(self)

    def __call__(self, events: list[dict[str, Any]]) -> None:
        if self.armed.is_set():
            self.armed.clear()
            self.entered.set()
            assert self.opened.wait(10)


def run_burst(daemon: Daemon, inputs: list[Input], until: str) -> None:
    """Start the daemon, post new_shoe, then ``inputs`` while the owner is held: one burst;
    wait until the status's ``state`` is ``until`` ("paused": until the table pauses)."""
    gate = Gate(daemon)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    try:
        assert daemon.ready.wait(10)
        gate.armed.set()
        daemon.post(Button(0.0, "new_shoe"))
        assert gate.entered.wait(10)
        for inp in inputs:
            daemon.post(inp)
        gate.opened.set()
        key, value = ("paused", True) if until == "paused" else ("state", until)
        wait_until(lambda: daemon.snapshot().get(key) == value, 10, f"{key} {value}")
    finally:
        daemon.request_stop()
        thread.join(10)


def cards(*codes: str) -> list[Input]:
    return [CardScan(0.0, parse_card(code)) for code in codes]


def input_rows(state_dir: Path) -> list[tuple[float, str]]:
    """(written, body) of every input record the table's own devices sent, in order."""
    conn = sqlite3.connect(f"file:{state_dir / 'journal.sqlite'}?mode=ro", uri=True)
    try:
        return [(written, body) for written, body in conn.execute(
            "SELECT written, body FROM records WHERE kind='input' AND "
            "json_extract(body, '$.kind') IN ('card', 'button') ORDER BY n")]
    finally:
        conn.close()


def event_content(state_dir: Path) -> list[tuple[str, Any]]:
    """Each event's type and data, times left out (the two runs ran at other moments)."""
    with Journal(state_dir / "journal.sqlite") as journal:
        events = journal.events_after(0, 10_000)
    return [(e["type"], {k: v for k, v in (e.get("data") or {}).items()
                         if not k.endswith("_at") and k not in ("at", "software")})
            for e in events if e["type"] not in ("clock_status", "software_changed")]


def test_inputs_queued_together_share_one_transaction_and_give_the_same_events(
        state_dirs) -> None:
    burst = [*cards(*FLIP_AND_BURNS), Button(0.0, "start_round")]
    grouped, single = state_dirs(), state_dirs()
    run_burst(make_daemon(grouped), burst, "betting")
    run_burst(make_daemon(single, group_max=1), burst, "betting")

    grouped_rows, single_rows = input_rows(grouped), input_rows(single)
    assert [body for _, body in grouped_rows][1:] != []
    # new_shoe alone (a shoe's start ends a group), then the seven inputs of the burst in one
    assert len({written for written, _ in grouped_rows[1:]}) == 1
    assert len({written for written, _ in single_rows[1:]}) == len(burst)
    assert event_content(grouped) == event_content(single)
    with Journal(grouped / "journal.sqlite") as journal:
        assert journal.verify().ok
        report = recover_report(journal, make_daemon(grouped).settings)  # byte for byte
    assert report.machine.status()["state"] == "betting"


def test_a_shoe_end_inside_a_burst_ends_the_group_and_checkpoints_there(state_dirs) -> None:
    state = state_dirs()
    burst = [*cards(*FLIP_AND_BURNS), Button(0.0, "end_shoe"), Button(0.0, "new_shoe"),
             *cards("3H")]
    run_burst(make_daemon(state), burst, "burning")
    rows = input_rows(state)
    assert len(rows) == 10
    # [new_shoe] [flip, burns, end_shoe] [new_shoe] [flip]
    groups = [len({w for w, _ in rows[a:b]}) for a, b in ((1, 8), (8, 9), (9, 10))]
    assert groups == [1, 1, 1] and len({w for w, _ in rows}) == 4
    with Journal(state / "journal.sqlite") as journal:
        base = checkpoints.latest(journal.database(), journal.chain)
        assert base is not None
        ended = [e for e in journal.events_after(0, 1000) if e["type"] == "shoe_ended"]
        assert len(ended) == 1 and base.seq == ended[0]["seq"]  # right after the shoe's end
        report = recover_report(journal, make_daemon(state).settings)
    assert report.refused is None and "checkpoint" in report.start
    assert report.machine.status()["state"] == "burning"


def test_a_failure_inside_a_group_undoes_it_and_handles_each_input_alone(
        state_dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    real_handle = TableMachine.handle

    def handle(self: TableMachine, inp: Input) -> list[dict[str, Any]]:
        if isinstance(inp, CardScan) and inp.card.code == "4C":
            raise RuntimeError("a bug met the 4C (test)")
        return real_handle(self, inp)

    monkeypatch.setattr(TableMachine, "handle", handle)
    state = state_dirs()
    daemon = make_daemon(state)
    run_burst(daemon, cards(*FLIP_AND_BURNS), "paused")
    rows = input_rows(state)
    codes = [body for _, body in rows]
    # every card but the one that failed, in order, each in its own transaction
    assert [c for c in ("5H", "2C", "3C", "4C", "6C", "7C") if any(c in b for b in codes)] == \
        ["5H", "2C", "3C", "6C", "7C"]
    assert len({w for w, _ in rows}) == len(rows)
    with Journal(state / "journal.sqlite") as journal:
        pauses = [e["data"]["code"] for e in journal.events_after(0, 1000)
                  if e["type"] == "paused"]
    # the bug paused the table; the cards after it met a paused table, as one by one
    assert pauses == ["controller_fault", "card_while_paused", "card_while_paused"]


def test_a_group_the_journal_refuses_is_written_one_input_at_a_time(
        state_dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    real_append_many = Journal.append_many
    refused: list[int] = []

    def append_many(self: Journal, entries: list) -> int:
        if len(entries) > 1:  # a transient refusal of the group's transaction
            refused.append(len(entries))
            raise JournalError("database is locked (test)")
        return real_append_many(self, entries)

    monkeypatch.setattr(Journal, "append_many", append_many)
    state = state_dirs()
    daemon = make_daemon(state)
    run_burst(daemon, cards(*FLIP_AND_BURNS), "ready")
    assert refused == [len(FLIP_AND_BURNS)]
    assert len(input_rows(state)) == 1 + len(FLIP_AND_BURNS)
    snap = daemon.snapshot()
    assert snap["storage_fault"] is None and not snap["paused"]
