"""Ctrl-C in the middle of ``pokdeng-table bench``: the bench stops its daemon, its broker and
its relays and removes its folders, as the terminal's SIGINT reaches the whole process group
(the command, bench/report.py and the part's script); the stress part's trace file, named
in a table that never comes, goes too. Real processes, a real mosquitto."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.harness import mosquitto_missing
from bench.report import PARTS

pytestmark = pytest.mark.skipif(bool(mosquitto_missing()), reason="needs mosquitto")


def processes_naming(folder: Path) -> list[str]:
    """Command lines of the processes that name ``folder`` (daemons, broker, relays)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(folder) in cmdline:
            found.append(cmdline)
    return found


@pytest.mark.parametrize("part", ["latency", "stress"])
def test_ctrl_c_leaves_no_daemon_broker_or_folder_behind(part: str, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    others = ",".join(name for name in PARTS if name != part)
    bench = subprocess.Popen(
        [sys.executable, "-m", "controller", "bench", "--skip", others,
         f"--{part}-rounds", "200", "--pairs", "1"],
        env={**os.environ, "TMPDIR": str(scratch)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        # interrupt once the part's daemon is up and dealing (its run folder and process)
        deadline = time.monotonic() + 60
        while not any("controller run" in cmd for cmd in processes_naming(scratch)):
            assert bench.poll() is None, bench.communicate()
            assert time.monotonic() < deadline, f"the {part} part never started its daemon"
            time.sleep(0.1)
        os.killpg(bench.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        out, err = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            os.killpg(bench.pid, signal.SIGKILL)
            bench.wait()
    assert bench.returncode == 130, err
    assert "Traceback" not in err, err
    assert processes_naming(scratch) == []
    assert sorted(p.name for p in scratch.iterdir()) == []
