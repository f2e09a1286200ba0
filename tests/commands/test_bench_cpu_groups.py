"""The bench's CPU cgroups (bench/cpu_groups.py): each unit's processes in a group of its own
with the unit's weight, as systemd places them on a table PC, and nothing left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cpu_groups
from bench.harness import UnitPriority, unit_cpu_weight


def _group_of(pid: int) -> Path:
    """Where the process is in the CPU controller's hierarchy, as a path under its mount."""
    lines = [line.split(":", 2) for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()]
    v1 = [path for _, controllers, path in lines if "cpu" in controllers.split(",")]
    if v1:
        return cpu_groups.V1_CPU / v1[0].lstrip("/")
    return cpu_groups.V2_ROOT / next(path for _, c, path in lines if c == "").lstrip("/")


def test_the_table_weight_is_read_from_the_unit() -> None:
    unit = (Path(cpu_groups.__file__).parents[1] / "systemd" / "pokdeng-table.service")
    line = next(x for x in unit.read_text().splitlines() if x.startswith("CPUWeight="))
    assert unit_cpu_weight() == int(line.split("=")[1]) > cpu_groups.DEFAULT_WEIGHT


def test_each_unit_runs_in_its_own_group_with_its_weight_and_the_groups_go_after() -> None:
    with cpu_groups.unit_groups(cpu_groups.Weights(1000)) as groups:
        if isinstance(groups, str):  # no root or no CPU controller: it says why, runs as before
            assert groups.startswith("no CPU cgroups ("), groups
            pytest.skip(groups)
        assert "table 1000" in groups.description
        weights = {}
        for name in ("table", "broker", "load"):
            path = getattr(groups, name).path
            shares, weight = path / "cpu.shares", path / "cpu.weight"
            weights[name] = int(shares.read_text()) * 100 // 1024 if shares.exists() \
                else int(weight.read_text())
        # the broker stands for the studio's, on a machine of its own: the table's weight
        assert weights == {"table": 1000, "broker": 1000, "load": 100}
        # a process started as the broker's unit runs in the broker's group, and what it
        # starts stays there (a systemd service's children are the service's)
        child = subprocess.Popen(
            [sys.executable, "-c", "import subprocess, sys; "
             "p = subprocess.Popen(['sleep', '30']); print(p.pid, flush=True); "
             "sys.stdin.readline(); p.kill(); p.wait()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            preexec_fn=UnitPriority(cpu_group=groups.broker).apply)
        try:
            assert child.stdout is not None and child.stdin is not None
            grandchild = int(child.stdout.readline())
            assert _group_of(child.pid) == groups.broker.path
            assert _group_of(grandchild) == groups.broker.path
            child.stdin.write("done\n")  # it reaps its own: nothing left to the machine's init
            child.stdin.flush()
            child.wait(10)
        finally:
            child.kill()
            child.wait()
        base = groups.table.path.parent
    assert not base.exists(), "the bench's groups are removed when it ends"


def test_the_table_group_lets_the_daemon_take_its_real_time_priority() -> None:
    if os.geteuid() != 0:
        pytest.skip("a real-time priority needs root")
    with cpu_groups.unit_groups(cpu_groups.Weights(1000)) as groups:
        if isinstance(groups, str):
            pytest.skip(groups)
        script = ("import os; os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(10)); "
                  "print(os.sched_getscheduler(0) == os.SCHED_RR)")
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              preexec_fn=UnitPriority(cpu_group=groups.table).apply)
        assert done.stdout.strip() == "True", done.stderr
