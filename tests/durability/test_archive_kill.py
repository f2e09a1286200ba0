"""A crash in the middle of an archive run loses nothing.

A real process runs ``archive_closed_shoes`` (many small cuts) or the incremental vacuum on a
real journal file and is SIGKILLed at points along the way: as soon as a cut is committed, as
soon as an archive file is written, and at timed moments. After every kill the archives and
the live journal still verify as one chain, every event is still exported once in order,
recovery rebuilds the same table, and the next run finishes the job.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.durability import vacuum
from controller.durability.archives.archive import (
    archive_closed_shoes,
    archive_dir_for,
    export_with_archives,
    verify_with_archives,
)
from controller.durability.journal import Journal, read_base
from controller.durability.recovery import recover
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import DeviceStatus
from controller.table.machine import MachineSettings, TableMachine

SETTINGS = MachineSettings(table_id="T7", decks=1)  # one-deck shoes: a few rounds each
SHOES = 14
ROOT = Path(__file__).resolve().parents[2]

# The child: archive every shoe in cuts of one shoe, pausing between cuts so kills land inside.
ARCHIVE_CHILD = """
import sys, time
from controller.durability.archives.archive import archive_closed_shoes
from controller.table.machine import MachineSettings
result = archive_closed_shoes(sys.argv[1], 0.0, settings=MachineSettings(table_id="T7", decks=1),
                              cut_records=1, between_cuts=lambda: time.sleep(0.03))
print(result.describe(), flush=True)
"""
# The child: release the journal's free pages one page per write transaction, pausing between.
VACUUM_CHILD = """
import sys, time
from controller.durability import vacuum
from controller.durability.journal import connect
conn = connect(sys.argv[1], synchronous="NORMAL")
print(vacuum.release_free_pages(conn, step_pages=1, between_steps=lambda: time.sleep(0.002)),
      flush=True)
"""


def write_table(path: Path) -> tuple[TableMachine, list[dict]]:
    """``SHOES`` closed shoes journaled the daemon's way, then a shoe left open mid-round."""
    machine = TableMachine(SETTINGS)
    events: list[dict] = []
    clock = 0.0
    with Journal(path) as journal:
        def feed(inputs) -> None:
            nonlocal clock
            for inp in inputs:
                produced = machine.handle(inp)
                journal.append(inp, produced)
                events.extend(produced)
                clock = max(clock, inp.at)

        for seed in range(1, SHOES + 1):
            feed(shoe_script(seed, decks=1, start_at=clock + 5))
            feed([DeviceStatus(at=clock + 1, name="panel", connected=True)])
        feed(shoe_script(SHOES + 1, decks=1, start_at=clock + 5)[:30])
    return machine, events


def first_live_record(path: Path) -> int | None:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT MIN(n) FROM records").fetchone()[0]
    finally:
        conn.close()


def archived_records(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        base = read_base(conn)
    finally:
        conn.close()
    return 0 if base is None else base.records


def assert_whole(path: Path, machine: TableMachine, events: list[dict]) -> None:
    """The chain holds across archives and live journal, every event is there once, and
    recovery (the daemon's start) rebuilds the same table."""
    check = verify_with_archives(path)
    assert check.ok, check.describe()
    assert check.events == len(events)
    assert [json.loads(body) for body in export_with_archives(path)] == events
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    with Journal(path) as journal:
        assert journal.last_event_seq() == len(events)
        assert recover(journal, SETTINGS).status() == machine.status()


def start(script: str, path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", script, str(path)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill(proc: subprocess.Popen[str]) -> bool:
    """SIGKILL; True when the process was still running (the kill landed mid-run)."""
    running = proc.poll() is None
    if running:
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    return running


def kill_when(proc: subprocess.Popen[str], ready, timeout: float = 60) -> bool:
    """SIGKILL the moment ``ready()`` holds (polled every millisecond)."""
    deadline = time.monotonic() + timeout
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)
    return kill(proc)


@pytest.mark.slow
def test_sigkill_during_an_archive_run_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    machine, events = write_table(path)
    directory = archive_dir_for(path)
    landed_mid_run = 0
    points = [
        # right after a cut's commit moved the archive cut
        lambda: (lambda before: lambda: archived_records(path) > before)(archived_records(path)),
        # as soon as records are gone from the live journal
        lambda: (lambda before: lambda: first_live_record(path) != before)(
            first_live_record(path)),
        # right after an archive file was written, before its records are removed
        lambda: (lambda before: lambda: len(list(directory.glob("records-*.gz"))) > before)(
            len(list(directory.glob("records-*.gz"))) if directory.is_dir() else 0),
    ]
    for attempt in range(8):
        proc = start(ARCHIVE_CHILD, path)
        if attempt < 6:
            landed = kill_when(proc, points[attempt % 3]())
        else:
            time.sleep(0.1 * attempt)
            landed = kill(proc)
        landed_mid_run += landed
        assert_whole(path, machine, events)
    assert landed_mid_run >= 4, "the kills should land while the run is cutting"
    assert 0 < archived_records(path), "some cuts should have been committed before the kills"

    archive_closed_shoes(path, 0.0, settings=SETTINGS)  # finishes what the kills left
    last_end = max(e["seq"] for e in events if e["type"] == "shoe_ended")
    conn = sqlite3.connect(path)
    base = read_base(conn)
    conn.close()
    assert base is not None and base.seq >= last_end  # every closed shoe is archived
    assert_whole(path, machine, events)
    manifest = json.loads((directory / "manifest.json").read_text())
    assert [a["first_record"] for a in manifest["archives"]][0] == 1
    assert not any(p.name.endswith(".tmp") for p in directory.iterdir())


@pytest.mark.slow
def test_sigkill_during_the_incremental_vacuum_loses_nothing(tmp_path: Path,
                                                             monkeypatch) -> None:
    path = tmp_path / "journal.sqlite"
    machine, events = write_table(path)
    # archive every closed shoe but keep the freed pages, for the child to release
    monkeypatch.setattr(vacuum, "release_free_pages", lambda conn, **kwargs: 0)
    assert archive_closed_shoes(path, 0.0, settings=SETTINGS).archived
    conn = sqlite3.connect(path)
    free_before = vacuum.free_pages(conn)
    conn.close()
    assert free_before > 10
    def free_pages() -> int:
        conn = sqlite3.connect(path)
        try:
            return vacuum.free_pages(conn)
        finally:
            conn.close()

    landed_mid_run = 0
    for fraction in (0.9, 0.5):  # as soon as the first steps, then half, are committed
        proc = start(VACUUM_CHILD, path)
        landed_mid_run += kill_when(proc, lambda f=fraction: free_pages() < free_before * f)
        assert_whole(path, machine, events)
        assert 0 < free_pages() < free_before
    finisher = start(VACUUM_CHILD, path)
    assert finisher.wait(60) == 0
    conn = sqlite3.connect(path)
    try:
        assert vacuum.free_pages(conn) == 0
    finally:
        conn.close()
    assert_whole(path, machine, events)
    assert landed_mid_run >= 1, "a kill should land while pages are being released"


def test_archiving_gives_the_space_back(tmp_path: Path) -> None:
    """A new journal is incremental: once its shoes are archived the file shrinks to what is
    left. An older (non-incremental) file keeps its size until ``compact`` rewrites it."""
    def size_after_checkpoint(path: Path) -> int:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        return path.stat().st_size

    new = tmp_path / "new.sqlite"
    machine, events = write_table(new)
    full = size_after_checkpoint(new)
    assert archive_closed_shoes(new, 0.0, settings=SETTINGS).archived
    assert size_after_checkpoint(new) < full / 4
    assert_whole(new, machine, events)

    old = tmp_path / "old.sqlite"
    old.write_bytes(b"")
    conn = sqlite3.connect(old)
    conn.execute("PRAGMA auto_vacuum=NONE")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    machine, events = write_table(old)  # an existing file: Journal leaves its auto_vacuum
    full = size_after_checkpoint(old)
    assert archive_closed_shoes(old, 0.0, settings=SETTINGS).archived
    assert size_after_checkpoint(old) >= full  # freed pages stay in the file for reuse
    before, after = vacuum.compact(old)
    assert before >= full and after < full / 4
    conn = sqlite3.connect(old)
    assert vacuum.incremental(conn)
    conn.close()
    assert_whole(old, machine, events)
