"""Daemon benchmark: time from start to READY, idle RSS and idle CPU.

Runs ``pokdeng-table run`` as a real subprocess against a simulated shoe (pty) and a serial
line panel (pty), with a file transport, a real NOTIFY_SOCKET and the watchdog on (as under
systemd), then measures:

- start → READY=1 (the datagram arriving on our notify socket), over ``--starts`` starts
  (the first on an empty journal, the rest recovering it);
- RSS (VmRSS, and the peak VmHWM) and CPU (utime+stime from /proc) over ``--seconds`` idle.

Goals (issue 6): READY < 2 s, idle RSS < 60 MB, idle CPU < 1 % of a core.

    python bench/daemon_bench.py [--seconds 60] [--starts 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.harness import notified_table, stop  # noqa: E402
from bench.measuring import idle_figures, idle_report  # noqa: E402


def measure(seconds: float = 60.0, starts: int = 5) -> dict[str, float]:
    """Start-to-READY times over ``starts`` starts, then idle RSS and CPU over ``seconds``."""
    work = Path(tempfile.mkdtemp(prefix="pdb-", dir="/tmp"))
    try:
        with notified_table(work, watchdog=True) as table:
            ready_times = []
            for start in range(starts):
                began = time.monotonic()
                proc = table.spawn()
                ready_times.append(table.notify.wait_ready(proc) - began)
                if start < starts - 1 and stop(proc, 20) != 0:
                    raise RuntimeError("the daemon did not stop cleanly")
            table.notify.drain()  # as systemd reads it: WATCHDOG=1, STATUS=
            time.sleep(1.0)  # let start-up settle (drivers connect, first status)
            idle = idle_figures(proc.pid, seconds)
            status = stop(proc, 20)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "starts": len(ready_times), "ready_first_s": ready_times[0],
        "ready_median_s": statistics.median(ready_times), "ready_max_s": max(ready_times),
        **idle, "stop_exit_status": status,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="idle measurement (default 60)")
    parser.add_argument("--starts", type=int, default=5, help="starts timed to READY (default 5)")
    args = parser.parse_args()
    f = measure(args.seconds, args.starts)
    print(f"start to READY: first (empty journal) {f['ready_first_s']:.3f} s, "
          f"median of {f['starts']} {f['ready_median_s']:.3f} s, "
          f"max {f['ready_max_s']:.3f} s   (goal < 2 s)")
    print(idle_report(f))
    print(f"clean stop: exit status {f['stop_exit_status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
