"""What a slow card waited on: the daemon's threads' scheduling and its I/O across each card.

Before each card the bench takes a snapshot of the daemon's process from /proc: per thread
the time spent waiting on a run queue (``/proc/<pid>/task/<tid>/schedstat``, second field,
ns), the time on a CPU (first field) and, where the kernel's delay accounting is on, the time
waiting for block I/O (``/proc/<pid>/task/<tid>/stat``, field 42), and the process's I/O
counters (``/proc/<pid>/io``:
bytes it had written and read through the block layer, its write and read calls; a write that
dirties a clean page-cache folio counts the whole folio, up to 512 KB on a kernel whose file
system keeps large folios, however little it wrote: a jump there with no more write calls is
no more I/O, docs/benchmarks.md). After the
card arrived it takes another; a card slower than the threshold gets one line in the trace
file, JSON, with the differences: which threads waited for a core and how long, what the
process wrote. A slow card whose threads neither waited for a core nor ran longer nor wrote
more than a quick one's spent its time asleep: on the disk, or on a lock. Cards under the
threshold cost the snapshot and nothing more.

Across the card, a sampler process also looks at each daemon thread every ``SAMPLE_S``
(``/proc/<pid>/task/<tid>/stat`` and ``wchan``): a thread asleep is counted under its state
and the kernel function it sleeps in, e.g. ``D jbd2_log_wait_commit`` (an fsync waiting for
the file system's journal), ``D blk_mq_get_tag``, ``S futex_wait_queue`` (a lock or the
interpreter's), ``S do_epoll_wait`` (idle); a thread on a CPU or waiting for one, as ``R``.
A slow card's line says where its time went by name, with or without delay accounting. The
broker the card goes through, where the bench runs one, is followed the same way under
``broker/<tid>``: a card that waited in the broker shows it busy (``R``) or asleep there.
The sampler costs the bench a share of a core while a card is in flight, the same for every
card of every run.

The snapshots are taken outside the timed window (before the frame is written, after the
event arrived), so they widen the window by the reading of a few small files, the same for
every card. With ``kernel.task_delayacct`` off, the bench run as root turns it on for its own
run and back off after (``delay_accounting_on``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

IO_FIELDS = ("read_bytes", "write_bytes", "syscr", "syscw", "cancelled_write_bytes")
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


#: how often the sampler looks at the daemon's threads while a card is in flight
SAMPLE_S = 0.0005
DELAYACCT = Path("/proc/sys/kernel/task_delayacct")


def delay_accounting() -> bool:
    """Whether the kernel counts the time a task waits for block I/O (off by default)."""
    try:
        return DELAYACCT.read_text().strip() == "1"
    except OSError:
        return False


@contextlib.contextmanager
def delay_accounting_on() -> Iterator[bool]:
    """Delay accounting on for the block: turned on where it is off and this is root (and
    back off after); yields whether it is on."""
    if delay_accounting():
        yield True
        return
    try:
        DELAYACCT.write_text("1")
    except OSError:
        yield False  # not root, or a kernel without it: scheduling and wait channels only
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            DELAYACCT.write_text("0")


class WaitSampler:
    """Counts, per daemon thread, the samples it spent asleep, by state and wait channel.

    The sampling runs in a process of its own (this file with ``--sample``): a thread of the
    bench's would take the interpreter from the bench's dealing and timing. It is told
    ``start PID`` before a card and ``stop`` after it, and answers the stop with a JSON line."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen([sys.executable, __file__, "--sample"], text=True,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def start(self, pid: int, others: dict[str, int]) -> None:
        """Sample the daemon at ``pid`` and the ``others`` (name: pid) from now on."""
        assert self._proc.stdin is not None
        named = "".join(f" {name}={other}" for name, other in others.items())
        self._proc.stdin.write(f"start {pid}{named}\n")
        self._proc.stdin.flush()

    def stop(self) -> dict[str, dict[str, float]]:
        """What each thread slept on since ``start``, in ms."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("stop\n")
        self._proc.stdin.flush()
        answer: dict[str, dict[str, float]] = json.loads(self._proc.stdout.readline() or "{}")
        return answer

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def sample_main() -> None:
    """The sampler process: ``start PID [NAME=PID ...]`` / ``stop`` lines in, a JSON line out
    per stop.
    Its input is read from the descriptor, not through a buffer that select() cannot see.
    Each sample stands for the time since the one before (a busy machine wakes the sampler
    late), so the figures are milliseconds, not counts."""
    slept: collections.Counter[tuple[str, str]] = collections.Counter()
    followed: dict[str, int] = {}   # "" (the daemon) or a name: its pid
    last = 0.0
    pending = b""
    while True:
        if b"\n" not in pending:
            ready, _, _ = select.select([0], [], [], SAMPLE_S if followed else None)
            if followed:
                now = time.monotonic()
                for name, pid in followed.items():
                    for key in states(pid, name):
                        slept[key] += now - last
                last = now
            if not ready:
                continue
            chunk = os.read(0, 4096)
            if not chunk:
                return
            pending += chunk
            continue
        line, pending = pending.split(b"\n", 1)
        if line.startswith(b"start "):
            daemon, *others = line.decode().split()[1:]
            followed = {"": int(daemon), **{name: int(pid) for name, _, pid in
                                            (other.partition("=") for other in others)}}
            slept, last = collections.Counter(), time.monotonic()
            continue
        found: dict[str, dict[str, float]] = {}
        for (thread, where), seconds in slept.most_common():
            found.setdefault(thread, {})[where] = round(seconds * 1000, 1)
        print(json.dumps(found), flush=True)
        followed = {}


def _stat_fields(task: Path) -> list[str]:
    """A thread's ``stat`` fields after its command's parenthesis (the command may hold
    spaces and parentheses): the state first."""
    return (task / "stat").read_text().rsplit(")", 1)[1].split()


def states(pid: int, name: str = "") -> list[tuple[str, str]]:
    """(thread, "state wait-channel") of each of ``pid``'s threads asleep right now, or
    (thread, "R") for one on a CPU or waiting for one; a thread is ``name/tid`` when named."""
    found = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            state = _stat_fields(task)[0]
            if state in ("Z", "X"):
                continue
            where = "" if state == "R" else " " + ((task / "wchan").read_text().strip() or "?")
        except (OSError, IndexError):
            continue
        found.append((f"{name}/{task.name}" if name else task.name, f"{state}{where}"))
    return found


def snapshot(pid: int) -> dict[str, Any]:
    """Per thread (by name and tid) on-CPU, run-queue and block-I/O-wait ns (the last only
    with delay accounting on: ``sysctl kernel.task_delayacct=1``); the process's I/O."""
    threads: dict[str, tuple[int, int, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, waited = (int(x) for x in (task / "schedstat").read_text().split()[:2])
            name = (task / "comm").read_text().strip()
            # field 42 of stat (40th after the command's parenthesis): block I/O delay, ticks
            blkio = int(_stat_fields(task)[39]) * TICK_NS
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
        self.others: dict[str, int] = {}
        self.label = ""
        self.traced = 0
        #: the traced cards' sleeps on the disk (state D), ms by wait channel, all threads
        self.disk_ms: collections.Counter[str] = collections.Counter()
        self._before: dict[str, Any] | None = None
        self._sampler = WaitSampler()

    def close(self) -> None:
        self._sampler.close()

    def disk_text(self) -> str:
        """``disk: submit_bio_wait 41 ms, folio_wait_bit 7 ms``: where the traced cards'
        threads waited on the disk, most first; "" when none did."""
        return ", ".join(f"{channel} {ms:.0f} ms" for channel, ms in self.disk_ms.most_common(4))

    def follow(self, pid: int, label: str, others: dict[str, int] | None = None) -> None:
        """From now on, the daemon at ``pid`` and the ``others`` it works with (``broker``:
        its pid); the lines say ``label`` (the run's name)."""
        self.pid, self.label, self._before = pid, label, None
        self.others = dict(others or {})

    def _snapshot(self) -> dict[str, Any]:
        """The daemon's snapshot with the others' threads beside its own (``broker/...``)."""
        taken = snapshot(self.pid)
        for name, pid in self.others.items():
            try:
                theirs = snapshot(pid)["threads"]
            except OSError:
                continue  # ended
            taken["threads"].update({f"{name}/{thread}": t for thread, t in theirs.items()})
        return taken

    def before(self) -> None:
        self._before = self._snapshot() if self.pid else None
        if self.pid:
            self._sampler.start(self.pid, self.others)

    def after(self, card: int, latencies_ms: dict[str, float]) -> None:
        slept = self._sampler.stop()
        if self._before is None or max(latencies_ms.values()) <= self.over_ms:
            return
        self.traced += 1
        for where in slept.values():
            for state_channel, ms in where.items():
                state, _, channel = state_channel.partition(" ")
                if state == "D":
                    self.disk_ms[channel] += ms
        self.out.write(json.dumps({"run": self.label, "card": card,
                                   "ms": {k: round(v, 2) for k, v in latencies_ms.items()},
                                   **difference(self._before, self._snapshot()),
                                   "asleep_ms": slept}) + "\n")
        self.out.flush()


if __name__ == "__main__" and sys.argv[1:] == ["--sample"]:
    sample_main()
