"""What the keyed chain and the anchors cost: plain SHA-256 against HMAC-SHA256.

Journals the same simulated shoes twice (plain, then keyed), exactly as the daemon does, then
times ``verify`` of each (best of 5) and the outbox's read of every event in batches of 100,
with and without anchors. A figure, not a test.

    python bench/chain_bench.py [--shoes 3] [--dir /var/lib/pokdeng-table]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone: bench.*

from controller.durability.delivery.anchors import anchored_events_after
from controller.durability.journal import Journal, read_events_after, verify_file
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine

BATCH = 100


def _best(run: Callable[[], object], times: int = 5) -> float:
    best = float("inf")
    for _ in range(times):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def _read_all(path: Path, read: Callable[[sqlite3.Connection, int, int], list]) -> None:
    conn = sqlite3.connect(path)
    try:
        seq = 0
        while True:
            batch = read(conn, seq, BATCH)
            if not batch:
                return
            seq = batch[-1]["seq"]
    finally:
        conn.close()


def measure(shoes: int = 3, directory: str | None = None) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    for name, key in (("plain", None), ("keyed", os.urandom(32))):
        with tempfile.TemporaryDirectory(dir=directory) as folder:
            path = Path(folder) / "bench.sqlite"
            machine = TableMachine(MachineSettings(table_id="B1"))
            inputs = 0
            with Journal(path, key) as journal:
                at = 5.0
                started = time.perf_counter()
                for shoe in range(shoes):
                    for inp in shoe_script(shoe + 1, start_at=at):
                        journal.append(inp, machine.handle(inp))
                        at = max(at, inp.at)
                        inputs += 1
                    at += 60
                append_s = time.perf_counter() - started
                records, events = journal.record_count(), journal.last_event_seq()
            verify_s = _best(lambda p=path, k=key: verify_file(p, k))
            figures[name] = {
                "records": records, "events": events,
                "append_per_s": inputs / append_s,
                "verify_records_per_s": records / verify_s,
                "read_plain_events_per_s": events / _best(
                    lambda p=path: _read_all(p, read_events_after)),
                "read_anchored_events_per_s": events / _best(
                    lambda p=path: _read_all(p, anchored_events_after)),
            }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to put the journals (default /tmp)")
    args = parser.parse_args()
    for name, f in measure(args.shoes, args.dir).items():
        print(f"{name}: {f['records']:.0f} records, {f['events']:.0f} events; append "
              f"{f['append_per_s']:.0f} inputs/s (fsync each); verify "
              f"{f['verify_records_per_s']:.0f} records/s; outbox read "
              f"{f['read_plain_events_per_s']:.0f} events/s bare, "
              f"{f['read_anchored_events_per_s']:.0f} events/s with anchors")


if __name__ == "__main__":
    main()
