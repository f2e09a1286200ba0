"""Journal append rate on this disk: inputs/s with a durable (fsynced) commit per input.

Feeds whole simulated shoes through the table machine and journals each input with its events
in one transaction (WAL, synchronous=FULL), exactly as the daemon does. Prints the rate and the
per-append latency percentiles. A figure, not a test.

    python bench/journal_bench.py [--shoes 3] [--dir /var/lib/pokdeng-table]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from controller.journal import Journal
from controller.machine import MachineSettings, TableMachine
from controller.scriptgen import shoe_script


def percentile(sorted_values: list[float], fraction: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", type=int, default=3)
    parser.add_argument("--dir", help="directory for the journal (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        path = Path(folder) / "bench.sqlite"
        journal = Journal(path)
        machine = TableMachine(MachineSettings(table_id="BENCH"))
        latencies: list[float] = []
        events = 0
        started = time.perf_counter()
        for shoe in range(args.shoes):
            for inp in shoe_script(shoe, start_at=machine.clock):
                produced = machine.handle(inp)
                t0 = time.perf_counter()
                journal.append(inp, produced)
                latencies.append(time.perf_counter() - t0)
                events += len(produced)
        elapsed = time.perf_counter() - started
        t0 = time.perf_counter()
        result = journal.verify()
        verify_s = time.perf_counter() - t0
        journal.close()
        latencies.sort()
        print(f"journal: {path.parent} ({args.shoes} shoes)")
        print(f"inputs appended: {len(latencies)}, events: {events}, records: {result.records}")
        print(f"append rate: {len(latencies) / sum(latencies):.0f} inputs/s "
              f"({events / sum(latencies):.0f} events/s) with fsync per input; "
              f"end to end incl. machine {len(latencies) / elapsed:.0f} inputs/s")
        print(f"append latency ms: p50 {percentile(latencies, 0.5) * 1e3:.2f}  "
              f"p99 {percentile(latencies, 0.99) * 1e3:.2f}  "
              f"max {latencies[-1] * 1e3:.2f}  mean {statistics.mean(latencies) * 1e3:.2f}")
        print(f"verify: {result.records} records in {verify_s * 1e3:.0f} ms "
              f"({result.records / verify_s:.0f} records/s)")


if __name__ == "__main__":
    main()
