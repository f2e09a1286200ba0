"""The bench's processes in CPU cgroups, as systemd places the units on a table PC.

On a table PC each service is a cgroup of its own: the table (``pokdeng-table.service``, and
the screen process it starts, with ``CPUWeight=1000``), the broker (``mosquitto.service``,
the default weight 100), an operator's shell (``user.slice``, 100). A unit that sets a weight
turns the kernel's CPU controller on, and the scheduler then shares the cores between those
groups by weight before it looks at a process's niceness.

A bench that starts everything from one shell gets none of that. Where the kernel groups by
session instead (``kernel.sched_autogroup_enabled``, on in most distributions' kernels, for
processes outside any CPU cgroup), the bench's session holds the daemon, the broker and the
bench itself as one group, and the stress load's session another: the broker then shared
one session's share with the daemon and waited behind the load's clients for a core (35 ms
runnable with 0.2 ms on a CPU, docs/benchmarks.md). So, where it may (root, and a CPU
controller it can write), the bench makes one cgroup per unit under
``pokdeng-bench-<pid>`` with the units' weights and starts each process in its own; where it
may not, it says so and runs as before.

cgroup v1 (``cpu.shares``: weight × 1024 / 100, as systemd converts it; a group whose
processes take a real-time priority needs a real-time budget of its own,
``cpu.rt_runtime_us``, where the kernel groups real-time time too) and v2 (``cpu.weight``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

V1_CPU = Path("/sys/fs/cgroup/cpu")
V2_ROOT = Path("/sys/fs/cgroup")
#: systemd's default CPUWeight (the broker's, an operator's session's)
DEFAULT_WEIGHT = 100
#: the real-time budgets tried for the table's group, largest first (µs a second; the kernel
#: gives all groups together 950000, and another bench's groups may hold some of it): the
#: daemon's card path runs at a real-time priority
TABLE_RT_RUNTIME_US = (900_000, 450_000, 200_000)
RT_BUDGET_TRIES = 30


@dataclass(frozen=True)
class CpuGroup:
    """One unit's cgroup; ``join`` moves the calling process (and what it starts) into it."""
    path: Path

    def join(self) -> None:
        (self.path / "cgroup.procs").write_text(f"{os.getpid()}\n")


@dataclass(frozen=True)
class CpuGroups:
    """The table's group, the broker's and the load's (the PC's other work)."""
    table: CpuGroup
    broker: CpuGroup
    load: CpuGroup
    description: str


def _write(path: Path, value: str) -> None:
    path.write_text(value + "\n")


@dataclass(frozen=True)
class Weights:
    """Each group's weight. The broker stands for the studio's, which has a machine of its
    own (docs/backend.md): at the default weight the bench's load took the cores from it
    (38 ms runnable for one card), which no table PC's load can do to a broker elsewhere; by
    default it is given the table's weight: served like the table, still sharing the cores
    (``broker=100``: a broker on the table PC)."""
    table: int
    broker: int | None = None   # None: the table's
    load: int = DEFAULT_WEIGHT

    def each(self) -> tuple[tuple[str, int], ...]:
        return (("table", self.table), ("broker", self.broker or self.table),
                ("load", self.load))


def _make(base: Path, weights: Weights, version: int) -> CpuGroups:
    """The groups under ``base``: v1 weighs by ``cpu.shares`` and gives the table's group a
    real-time budget where the kernel groups real-time time too; v2 weighs by ``cpu.weight``
    once the parent hands its children the CPU controller."""
    base.mkdir()
    rt = version == 1 and (base / "cpu.rt_runtime_us").exists()
    budget = _rt_budget(base) if rt else 0
    if version == 2:
        _write(base / "cgroup.subtree_control", "+cpu")
    groups = {}
    for name, weight in weights.each():
        group = base / name
        group.mkdir()
        if version == 1:
            _write(group / "cpu.shares", str(weight * 1024 // 100))
        else:
            _write(group / "cpu.weight", str(weight))
        if rt and name == "table":
            _write(group / "cpu.rt_runtime_us", str(budget))
        groups[name] = CpuGroup(group)
    return CpuGroups(**groups, description=_description(weights, f"cgroup v{version}"))


def _rt_budget(base: Path) -> int:
    """The largest of TABLE_RT_RUNTIME_US the kernel grants ``base`` (EINVAL: taken). A
    group removed a moment ago gives its budget back a little later: a few tries."""
    for _ in range(RT_BUDGET_TRIES):
        for budget in TABLE_RT_RUNTIME_US:
            try:
                _write(base / "cpu.rt_runtime_us", str(budget))
                return budget
            except OSError:
                continue
        time.sleep(0.1)
    raise OSError(errno.EBUSY, "no real-time budget left for the table's group")


def _description(weights: Weights, version: str) -> str:
    return f"each in a CPU cgroup of its own ({version}), weights " + ", ".join(
        f"{name} {weight}" for name, weight in weights.each())


def _remove(base: Path) -> None:
    """The groups, once their processes are gone (a process killed a moment ago may still be
    leaving: a few tries)."""
    for _ in range(50):
        leftover = [group for group in base.iterdir() if group.is_dir()] \
            if base.exists() else []
        for group in leftover:
            with contextlib.suppress(OSError):
                group.rmdir()
        with contextlib.suppress(OSError):
            base.rmdir()
        if not base.exists():
            return
        time.sleep(0.1)


@contextlib.contextmanager
def unit_groups(weights: Weights) -> Iterator[CpuGroups | str]:
    """The units' CPU groups for as long as the block, or why there are none (a sentence)."""
    if os.geteuid() != 0:
        yield "no CPU cgroups (not root): the kernel's own grouping, by session"
        return
    v2_controllers = V2_ROOT / "cgroup.controllers"
    if (V1_CPU / "cpu.shares").exists():
        version, base = 1, V1_CPU / f"pokdeng-bench-{os.getpid()}"
    elif v2_controllers.exists() and "cpu" in v2_controllers.read_text().split():
        version, base = 2, V2_ROOT / f"pokdeng-bench-{os.getpid()}"
    else:
        yield "no CPU cgroups (no CPU controller): the kernel's own grouping, by session"
        return
    try:
        groups: CpuGroups | str = _make(base, weights, version)
    except OSError as exc:
        _remove(base)
        groups = f"no CPU cgroups ({base}: {exc.strerror}): the kernel's own grouping"
    try:
        yield groups
    finally:
        if isinstance(groups, CpuGroups):
            _remove(base)
