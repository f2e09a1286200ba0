"""How late a journal writer gets the write lock after the writer before it lets go: SQLite's
busy handler against write_lock.py (``journal`` part of ``pokdeng-table bench``).

A first writer holds a write transaction on a real journal file for a given time, then
commits; a second writer, already waiting, begins its own. "Late" is the time from the
first writer's commit to the second writer's ``BEGIN IMMEDIATE`` returning. Two cases:

* another process holds the lock (the housekeeping children, an operator's ``journal``
  command): SQLite's busy handler (``busy_timeout``, sleeping 1, 2, 5, 10 ... ms) against
  ``write_lock.begin`` (tries every 0.1 ms, then less often);
* another thread of this process holds it (in the daemon: a sender recording its position
  while the owner appends): the busy handler against the process's ``writer_lock``.

    python bench/write_lock_bench.py [--repeat 20] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.measuring import percentile  # noqa: E402
from controller.durability.journal import BUSY_TIMEOUT_MS, Journal, connect  # noqa: E402
from controller.durability.write_lock import begin, write_transaction, writer_lock  # noqa: E402
from testkit.journal_lock import HoldingProcess, HoldingThread  # noqa: E402

HOLDS_MS = (0.3, 1.2, 4.0, 12.0)

def sqlite_begin(conn) -> None:
    conn.execute("BEGIN IMMEDIATE")  # the connection's busy_timeout: SQLite's handler


def late_after_process(path: Path, hold_s: float, begin_with: Callable[[Any], None],
                       repeat: int) -> list[float]:
    holder = HoldingProcess(path)
    # write_lock.begin's tries are the whole wait only with SQLite's busy handler off
    conn = connect(path, busy_timeout_ms=0 if begin_with is begin else BUSY_TIMEOUT_MS)
    late = []
    try:
        for _ in range(repeat):
            holder.hold(hold_s)
            begin_with(conn)
            got = time.monotonic()
            conn.execute("COMMIT")
            late.append((got - holder.committed()) * 1000)
    finally:
        holder.close()
        conn.close()
    return late


def late_after_thread(path: Path, hold_s: float, with_lock: bool, repeat: int) -> list[float]:
    lock = writer_lock(path) if with_lock else None
    conn = connect(path)
    late = []
    try:
        for _ in range(repeat):
            first = HoldingThread(path, hold_s, lock)
            if lock is not None:
                with write_transaction(conn, lock=lock):
                    got = time.monotonic()
            else:
                sqlite_begin(conn)
                got = time.monotonic()
                conn.execute("COMMIT")
            first.join()
            late.append((got - first.committed) * 1000)
    finally:
        conn.close()
    return late


def measure(repeat: int = 20) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pdwl-") as work:
        path = Path(work) / "journal.sqlite"
        Journal(path).close()
        rows = []
        for hold_ms in HOLDS_MS:
            hold_s = hold_ms / 1000
            cases = {
                "process, SQLite's busy handler": late_after_process(path, hold_s, sqlite_begin,
                                                                     repeat),
                "process, write_lock.begin": late_after_process(path, hold_s, begin, repeat),
                "thread, SQLite's busy handler": late_after_thread(path, hold_s, False, repeat),
                "thread, writer_lock": late_after_thread(path, hold_s, True, repeat),
            }
            for case, late in cases.items():
                rows.append({"hold_ms": hold_ms, "case": case, "p50": percentile(late, 50),
                             "max": max(late)})
    return {"repeat": repeat, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="trials per hold and case")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    result = measure(args.repeat)
    print(f"late after the holder's commit, ms ({args.repeat} trials each): p50 / max")
    for row in result["rows"]:
        print(f"  hold {row['hold_ms']:5.1f} ms  {row['case']:<32} "
              f"{row['p50']:6.2f} / {row['max']:6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
