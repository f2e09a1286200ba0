"""``pokdeng-table bench``: finds the clone's bench/ folder and prints one table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def bench(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # Run from elsewhere: the command must find bench/ through the installed package.
    return subprocess.run([sys.executable, "-m", "controller", "bench", *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.slow
def test_bench_prints_one_table_of_the_parts_asked_for(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = bench("--skip", "latency,catchup,fleet,stress,daemon,display,start,cli,soak",
                 "--replay-shoes", "2",
                 "--journal-shoes", "1", "--json", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].split()[:2] == ["figure", "value"]
    figures = {row["figure"]: row for row in json.loads(out.read_text())}
    assert set(figures) == {"exact RTP, whole process", "replay rounds/s (machine)",
                            "replay rounds/s (+ JSON lines)", "replay one shoe",
                            "journal appends/s (fsync each)", "journal append p50 / p99",
                            "journal verify", "journal write lock, late after 4 ms held",
                            "burst of 13 frames -> last journaled"}
    for figure, row in figures.items():
        assert figure in done.stdout
        assert row["value"] not in ("FAILED", "?", "")
    assert float(figures["replay rounds/s (machine)"]["value"].replace(",", "")) > 0
    lock = figures["journal write lock, late after 4 ms held"]
    assert lock["value"].endswith(" ms") and "SQLite's busy handler" in lock["note"]
    burst = figures["burst of 13 frames -> last journaled"]["note"]
    assert "group commit, 1 commit(s); one by one" in burst and burst.endswith("13 commits")
    for figure, unit in (("exact RTP, whole process", "s"), ("replay one shoe", "ms")):
        low, middle, high = figures[figure]["value"].removesuffix(f" {unit}").split(" / ")
        assert 0 < float(low) <= float(middle) <= float(high)  # min / median / max of runs


def test_bench_rejects_an_unknown_part(tmp_path: Path) -> None:
    done = bench("--skip", "latency,bogus", cwd=tmp_path)
    assert done.returncode == 2
    assert "bogus" in done.stderr and "rtp, replay" in done.stderr


@pytest.mark.slow
def test_bench_times_start_and_verify_by_journal_size(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = bench("--skip", "rtp,replay,journal,latency,burst,catchup,fleet,stress,daemon,display,"
                 "cli,soak",
                 "--start-shoes", "1,3",
                 "--json", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    figures = {row["figure"]: row for row in json.loads(out.read_text())}
    assert set(figures) == {"start to READY, 1 shoes", "journal verify, 1 shoes",
                            "start to READY, 3 shoes", "journal verify, 3 shoes"}
    for row in figures.values():
        assert row["value"].endswith(" s") and float(row["value"][:-2]) > 0
