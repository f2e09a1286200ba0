"""What a slow card waited on: the daemon's threads' scheduling and its I/O across each card.

Before each card the bench takes a snapshot of the daemon's process from /proc: per thread
the time spent waiting on a run queue (``/proc/<pid>/task/<tid>/schedstat``, second field,
ns), the time on a CPU (first field) and, where the kernel's delay accounting is on, the time
waiting for block I/O (``/proc/<pid>/task/<tid>/stat``, field 42), and the process's I/O
counters (``/proc/<pid>/io``:
bytes it had written and read through the block layer, its write and read calls). After the
card arrived it takes another; a card slower than the threshold gets one line in the trace
file, JSON, with the differences: which threads waited for a core and how long, what the
process wrote. A slow card whose threads neither waited for a core nor ran longer nor wrote
more than a quick one's spent its time asleep: on the disk, or on a lock. Cards under the
threshold cost the snapshot and nothing more.

The snapshots are taken outside the timed window (before the frame is written, after the
event arrived), so they widen the window by the reading of a few small files, the same for
every card.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO

IO_FIELDS = ("read_bytes", "write_bytes", "syscr", "syscw", "cancelled_write_bytes")
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def delay_accounting() -> bool:
    """Whether the kernel counts the time a task waits for block I/O (off by default)."""
    try:
        return Path("/proc/sys/kernel/task_delayacct").read_text().strip() == "1"
    except OSError:
        return False


def snapshot(pid: int) -> dict[str, Any]:
    """Per thread (by name and tid) on-CPU, run-queue and block-I/O-wait ns (the last only
    with delay accounting on: ``sysctl kernel.task_delayacct=1``); the process's I/O."""
    threads: dict[str, tuple[int, int, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, waited = (int(x) for x in (task / "schedstat").read_text().split()[:2])
            name = (task / "comm").read_text().strip()
            # field 42 of stat (40th after the command's parenthesis): block I/O delay, ticks
            blkio = int((task / "stat").read_text().rsplit(")", 1)[1].split()[39]) * TICK_NS
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
        threads[f"{name}/{task.name}"] = (on_cpu, waited, blkio)
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
    """What changed across a card: threads that waited for a core, ran, or waited for block
    I/O (µs), the I/O the process did."""
    waited, ran, blocked = {}, {}, {}
    for thread, (cpu1, wait1, blkio1) in after["threads"].items():
        cpu0, wait0, blkio0 = before["threads"].get(thread, (0, 0, 0))
        for into, change in ((waited, wait1 - wait0), (ran, cpu1 - cpu0),
                             (blocked, blkio1 - blkio0)):
            if change > 0:
                into[thread] = round(change / 1000)
    io = {key: after["io"][key] - before["io"].get(key, 0) for key in after["io"]}
    return {"run_queue_us": waited, "on_cpu_us": ran, "block_io_wait_us": blocked, "io": io}


class CardTrace:
    """Writes a line per card slower than ``over_ms`` to ``out``; counts them."""

    def __init__(self, out: TextIO, over_ms: float) -> None:
        self.out, self.over_ms = out, over_ms
        self.block_io_counted = delay_accounting()  # else block_io_wait_us stays empty
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
