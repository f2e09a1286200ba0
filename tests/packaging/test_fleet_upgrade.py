"""packaging/fleet-upgrade's refusals, without tables: its arguments, and a table it cannot
reach (the roll stops there, before touching it or any table after it). The roll itself, over
booted tables: tests/packaging/test_fleet.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FLEET_UPGRADE = Path(__file__).resolve().parents[2] / "packaging" / "fleet-upgrade"


def roll(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(FLEET_UPGRADE), *args], capture_output=True,
                          text=True, timeout=60)


def test_a_table_it_cannot_reach_stops_the_roll_before_anything_is_touched() -> None:
    # `false` stands for a transport that fails (ssh to a PC that is down): a real command
    result = roll("--version", "0.2.0-1", "--via", "false {host}", "T01=table01", "T02")
    assert result.returncode == 1, result
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "fleet-upgrade: STOPPED at T01: cannot reach it with false table01: exit status 1",
        "fleet-upgrade: upgraded: none; not touched: T02 (they keep their version)"]


def test_bad_arguments_are_named_with_exit_2() -> None:
    no_version = roll("T01")
    assert no_version.returncode == 2 and "--version" in no_version.stderr
    no_place = roll("--version", "1", "--via", "ssh root@studio", "T01")
    assert no_place.returncode == 2
    assert "--via: the template names no {host} or {table}" in no_place.stderr
    twice = roll("--version", "1", "T01=a", "T01=b")
    assert twice.returncode == 2 and "a table is named twice" in twice.stderr
