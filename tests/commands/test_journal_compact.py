"""``pokdeng-table journal compact``: an older journal gives archived space back, and the
command never rewrites a journal another process has open."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from controller.durability import vacuum
from controller.durability.archives.archive import archive_closed_shoes, verify_with_archives
from controller.durability.journal import Journal, export_events
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine

SETTINGS = MachineSettings(table_id="T7", decks=1)


def compact(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "controller", "journal", "compact", str(path)],
                          capture_output=True, text=True, timeout=60)


def test_compact_switches_an_older_journal_and_refuses_one_in_use(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    conn = sqlite3.connect(path)  # a file from before incremental auto-vacuum
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    machine = TableMachine(SETTINGS)
    with Journal(path) as journal:
        clock = 0.0
        for seed in range(1, 6):
            script = shoe_script(seed, decks=1, start_at=clock + 5)
            for inp in script:
                journal.append(inp, machine.handle(inp))
            clock = max(inp.at for inp in script)
    assert archive_closed_shoes(path, 0.0, settings=SETTINGS).archived
    events = list(export_events(path))

    with Journal(path):                  # the table has it open: refused, file untouched
        refused = compact(path)
    assert refused.returncode == 1 and "open in another process" in refused.stderr
    conn = sqlite3.connect(path)
    assert not vacuum.incremental(conn)
    conn.close()

    done = compact(path)
    assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(path)
    assert vacuum.incremental(conn) and vacuum.free_pages(conn) == 0
    conn.close()
    assert list(export_events(path)) == events
    assert verify_with_archives(path).ok
