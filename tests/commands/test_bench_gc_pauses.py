"""bench/gc_pauses.py: every Python process a command starts reports its garbage collections
(through the hook on PYTHONPATH), children included, and the bench's daemons keep the hook
behind the repository measured. Real interpreters, real collections."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import harness

REPO = Path(__file__).resolve().parents[2]

# a parent that collects in full once, and a child it starts that collects its youngest once
PARENT = ("import gc, subprocess, sys; gc.collect(2); "
          "subprocess.run([sys.executable, '-c', 'import gc; gc.collect(0)'], check=True)")


def watched(*command: str, over: str = "0") -> str:
    done = subprocess.run([sys.executable, str(REPO / "bench" / "gc_pauses.py"), "--over", over,
                           "--", *command], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_command_and_the_processes_it_starts_report_their_collections() -> None:
    out = watched(sys.executable, "-c", PARENT)
    lines = out.splitlines()
    assert lines[0] == "garbage collections, per kind of process:"
    [both] = [line for line in lines if line.startswith(f"{Path(sys.executable).name} -c")]
    assert "(2 process(es))" in both  # the child inherited the hook
    assert "gen 0: " in both and "gen 2: " in both, both
    # --over 0 lists every collection of each process, with when it began
    assert sum(line.startswith("  process ") for line in lines) == 2, out


def test_a_collection_under_the_threshold_is_counted_but_not_listed() -> None:
    out = watched(sys.executable, "-c", "import gc; gc.collect(0)", over="1000")
    assert "gen 0: " in out and "  process " not in out, out


def test_a_process_started_without_the_watch_writes_nothing(tmp_path: Path) -> None:
    hook = REPO / "bench" / "gc_hook"
    subprocess.run([sys.executable, "-c", "import gc; gc.collect()"], check=True, timeout=60,
                   cwd=tmp_path, env={"PYTHONPATH": str(hook)})
    assert list(tmp_path.iterdir()) == []


def test_the_bench_daemon_finds_the_repository_measured_before_the_hook(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/hook")
    assert harness.daemon_path(Path("/older/checkout")).split(":") == ["/older/checkout", "/hook"]
    monkeypatch.delenv("PYTHONPATH")
    assert harness.daemon_path(Path("/older/checkout")) == "/older/checkout"
