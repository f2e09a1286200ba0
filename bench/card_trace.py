"""What a slow card waited on: the daemon's threads' scheduling and its I/O across each card.

Before each card the bench takes a snapshot of the daemon's process from /proc: per thread
the time spent waiting on a run queue (``/proc/<pid>/task/<tid>/schedstat``, second field,
ns) and the time on a CPU (first field), and the process's I/O counters (``/proc/<pid>/io``:
bytes it had written and read through the block layer, its write and read calls). After the
card arrived it takes another; a card slower than the threshold gets one line in the trace
file, JSON, with the differences: which threads waited for a core and how long, what the
process wrote. Cards under the threshold cost the snapshot and nothing more.

The snapshots are taken outside the timed window (before the frame is written, after the
event arrived), so they widen the window by the reading of a few small files, the same for
every card.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

IO_FIELDS = ("read_bytes", "write_bytes", "syscr", "syscw", "cancelled_write_bytes")


def snapshot(pid: int) -> dict[str, Any]:
    """Per thread (by name and tid) on-CPU and run-queue ns; the process's I/O counters."""
    threads: dict[str, tuple[int, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, waited = (int(x) for x in (task / "schedstat").read_text().split()[:2])
            name = (task / "comm").read_text().strip()
        except (OSError, ValueError):
            continue  # a thread that ended between the listing and the read
        threads[f"{name}/{task.name}"] = (on_cpu, waited)
    io: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in IO_FIELDS:
                io[key] = int(value)
    except OSError:
        pass  # /proc/<pid>/io needs the same user or root: scheduling alone then
    return {"threads": threads, "io": io}


def difference(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changed across a card: threads that waited or ran (µs), the I/O it did."""
    waited, ran = {}, {}
    for thread, (cpu1, wait1) in after["threads"].items():
        cpu0, wait0 = before["threads"].get(thread, (0, 0))
        if wait1 - wait0 > 0:
            waited[thread] = round((wait1 - wait0) / 1000)
        if cpu1 - cpu0 > 0:
            ran[thread] = round((cpu1 - cpu0) / 1000)
    io = {key: after["io"][key] - before["io"].get(key, 0) for key in after["io"]}
    return {"run_queue_us": waited, "on_cpu_us": ran, "io": io}


class CardTrace:
    """Writes a line per card slower than ``over_ms`` to ``out``; counts them."""

    def __init__(self, out: TextIO, over_ms: float) -> None:
        self.out, self.over_ms = out, over_ms
        self.pid = 0
        self.label = ""
        self.traced = 0
        self._before: dict[str, Any] | None = None

    def follow(self, pid: int, label: str) -> None:
        """From now on, the daemon at ``pid``; its lines say ``label`` (the run's name)."""
        self.pid, self.label, self._before = pid, label, None

    def before(self) -> None:
        self._before = snapshot(self.pid) if self.pid else None

    def after(self, card: int, latencies_ms: dict[str, float]) -> None:
        if self._before is None or max(latencies_ms.values()) <= self.over_ms:
            return
        self.traced += 1
        self.out.write(json.dumps({"run": self.label, "card": card,
                                   "ms": {k: round(v, 2) for k, v in latencies_ms.items()},
                                   **difference(self._before, snapshot(self.pid))}) + "\n")
        self.out.flush()
