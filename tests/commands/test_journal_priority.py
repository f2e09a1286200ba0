"""A command that walks a whole journal on the table PC yields to the table: it runs at idle
CPU priority (SCHED_IDLE, nice 19) and in the idle I/O class, in a real process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.durability.journal import Journal
from support.journal_helpers import fill

REPORT = """
import os, subprocess, sys
from controller.commands.cli import main
status = main(sys.argv[2:])
ionice = subprocess.run(["ionice", "-p", str(os.getpid())], capture_output=True, text=True)
print(status, os.sched_getscheduler(0) == os.SCHED_IDLE, os.nice(0), ionice.stdout.strip(),
      file=open(sys.argv[1], "w"))
"""


@pytest.mark.parametrize("command", [("verify",), ("export",), ("compact",),
                                     ("archive", "--older-than", "7d")])
def test_journal_commands_run_at_idle_priority(tmp_path: Path, command: tuple[str, ...]) -> None:
    if shutil.which("ionice") is None:
        pytest.skip("ionice (util-linux) missing")
    journal = Journal(tmp_path / "journal.sqlite")
    fill(journal, 20)
    journal.close()
    report = tmp_path / "report"
    done = subprocess.run([sys.executable, "-c", REPORT, str(report), "journal", command[0],
                           str(tmp_path / "journal.sqlite"), *command[1:]],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    assert done.returncode == 0, done.stderr
    status, idle, nice, ionice = report.read_text().split(maxsplit=3)
    assert (idle, nice, ionice.strip()) == ("True", "19", "idle"), report.read_text()
