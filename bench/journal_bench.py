"""Journal append rate on this disk: inputs/s with a durable (fsynced) commit per input.

Feeds whole simulated shoes through the table machine and journals each input with its events
in one transaction (WAL, synchronous=FULL), exactly as the daemon does. Prints the rate and the
per-append latency percentiles. A figure, not a test.

``--checkpoints background`` runs the WAL checkpoints as the daemon does, on a thread of their
own (controller/durability/wal_checkpoints.py); ``inline`` leaves them to SQLite's default, on
the committing connection every 1,000 pages; ``both`` runs each, alternating, for the
difference.

    python bench/journal_bench.py [--shoes 3] [--dir /var/lib/pokdeng-table]
                                  [--checkpoints background|inline|both] [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone: bench.measuring

from bench.measuring import percentile
from controller.durability.journal import Journal
from controller.durability.wal_checkpoints import WalCheckpointer
from controller.table.generators.scriptgen import shoe_script
from controller.table.machine import MachineSettings, TableMachine


def measure(shoes: int = 3, directory: str | None = None,
            checkpoints: str = "background") -> dict[str, Any]:
    """Append rate, latency (fsync per input) and verify speed, in a temp dir on ``directory``."""
    with tempfile.TemporaryDirectory(dir=directory) as folder:
        path = Path(folder) / "bench.sqlite"
        journal = Journal(path)
        checkpointer = None
        if checkpoints == "background":
            checkpointer = WalCheckpointer(path).start()
            journal.leave_checkpoints_to_background(checkpointer.wal_bytes)
        machine = TableMachine(MachineSettings(table_id="BENCH"))
        latencies: list[float] = []
        events = 0
        started = time.perf_counter()
        for shoe in range(shoes):
            for inp in shoe_script(shoe, start_at=machine.clock):
                produced = machine.handle(inp)
                t0 = time.perf_counter()
                journal.append(inp, produced)
                latencies.append(time.perf_counter() - t0)
                events += len(produced)
        elapsed = time.perf_counter() - started
        if checkpointer is not None:
            checkpointer.stop()
        t0 = time.perf_counter()
        result = journal.verify()
        verify_s = time.perf_counter() - t0
        journal.close()
    latencies.sort()
    return {
        "directory": str(Path(folder).parent), "shoes": shoes, "checkpoints": checkpoints,
        "inputs": len(latencies), "events": events, "records": result.records,
        "inputs_per_s": len(latencies) / sum(latencies), "events_per_s": events / sum(latencies),
        "end_to_end_inputs_per_s": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 50) * 1e3, "p99_ms": percentile(latencies, 99) * 1e3,
        "max_ms": latencies[-1] * 1e3, "mean_ms": statistics.mean(latencies) * 1e3,
        "verify_ms": verify_s * 1e3, "verify_records_per_s": result.records / verify_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shoes", type=int, default=3)
    parser.add_argument("--dir", help="directory for the journal (default: a temp dir)")
    parser.add_argument("--checkpoints", choices=("background", "inline", "both"),
                        default="background", help="where WAL checkpoints run (default: "
                        "background, as the daemon runs them)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each (default 1)")
    args = parser.parse_args()
    kinds = ("inline", "background") if args.checkpoints == "both" else (args.checkpoints,)
    for _ in range(max(1, args.repeat)):
        for kind in kinds:
            report(measure(args.shoes, args.dir, kind))


def report(f: dict[str, Any]) -> None:
    print(f"journal: {f['directory']} ({f['shoes']} shoes), WAL checkpoints {f['checkpoints']}")
    print(f"inputs appended: {f['inputs']}, events: {f['events']}, records: {f['records']}")
    print(f"append rate: {f['inputs_per_s']:.0f} inputs/s ({f['events_per_s']:.0f} events/s) "
          f"with fsync per input; end to end incl. machine {f['end_to_end_inputs_per_s']:.0f} "
          f"inputs/s")
    print(f"append latency ms: p50 {f['p50_ms']:.2f}  p99 {f['p99_ms']:.2f}  "
          f"max {f['max_ms']:.2f}  mean {f['mean_ms']:.2f}")
    print(f"verify: {f['records']} records in {f['verify_ms']:.0f} ms "
          f"({f['verify_records_per_s']:.0f} records/s)")


if __name__ == "__main__":
    main()
