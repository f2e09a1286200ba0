"""Retention benchmark: what one daemon archive run costs on a journal of N closed shoes.

The daemon runs ``archive_closed_shoes`` (in an idle child process) after every shoe end, so
these figures matter: a run that finds nothing old enough (the usual case with a 30-day
retention), first with no verified mark (it walks the whole chain: a journal's first run) and
then from the mark the first left (it checks only what is new: every run after); and a run that
archives every shoe (cuts of ~2,000 records: replay to each cut, gzip, delete; then the freed
pages go back), with the file's size before and after. The journal is written the daemon's way
(machine, then one append per input) with 8-deck shoes.

    python bench/retention_bench.py [--shoes 10]
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from controller.durability.archives.archive import archive_closed_shoes, verify_with_archives
from controller.durability.journal import Journal
from controller.table.generators.scriptgen import shoe_script
from controller.table.inputs import DeviceStatus
from controller.table.machine import MachineSettings, TableMachine

SETTINGS = MachineSettings(table_id="BENCH")


def write_journal(path: Path, shoes: int) -> int:
    machine = TableMachine(SETTINGS)
    journal = Journal(path)
    clock = 0.0
    try:
        for seed in range(1, shoes + 1):
            inputs = list(shoe_script(seed, decks=8, start_at=clock + 5))
            clock = max(inp.at for inp in inputs) + 1
            inputs.append(DeviceStatus(at=clock, name="panel", connected=True))
            for inp in inputs:
                journal.append(inp, machine.handle(inp))
        return journal.record_count()
    finally:
        journal.close()


def file_size(path: Path) -> int:
    """The journal file's size once its WAL is checkpointed into it."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", type=int, default=10, help="closed shoes in the journal")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="retention-bench-"))
    try:
        path = work / "journal.sqlite"
        started = time.perf_counter()
        records = write_journal(path, args.shoes)
        print(f"journal: {args.shoes} shoes, {records} records "
              f"(written in {time.perf_counter() - started:.1f} s)")
        for label in ("no mark: the whole chain", "from the mark"):
            started = time.perf_counter()
            kept = archive_closed_shoes(path, 30 * 86400, settings=SETTINGS, trust_mark=True)
            print(f"run with nothing old enough, {label}: "
                  f"{time.perf_counter() - started:.3f} s ({kept.describe()})")
        before = file_size(path)
        started = time.perf_counter()
        done = archive_closed_shoes(path, 0, settings=SETTINGS, trust_mark=True)
        seconds = time.perf_counter() - started
        size = sum(f.stat().st_size for f in done.file.parent.glob("*.gz")) if done.file else 0
        print(f"run archiving every shoe: {seconds:.3f} s for {done.records} records "
              f"({done.records / seconds:.0f} records/s) in {done.files} cut(s), archives "
              f"{size / 1024:.0f} KiB, journal file {before / 1024:.0f} KiB -> "
              f"{file_size(path) / 1024:.0f} KiB")
        started = time.perf_counter()
        check = verify_with_archives(path)
        print(f"verify with archives: {time.perf_counter() - started:.3f} s ({check.describe()})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
