"""An archive run SIGKILLed between its cuts: the real daemon starts again on the journal with
the same history and plays on; the archives and the live journal stay one chain."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.durability.archives.archive import export_with_archives, verify_with_archives
from controller.durability.delivery.anchors import strip_anchor
from controller.durability.journal import export_events


def demo(state: Path, sink: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "controller", "demo", "--speed", "200",
                           "--quiet", "--state-dir", str(state), "--events", str(sink),
                           "--seed", "5", *args], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]


def first_live_record(journal: Path) -> int | None:
    conn = sqlite3.connect(journal)
    try:
        return conn.execute("SELECT MIN(n) FROM records").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.slow
def test_the_daemon_restarts_with_the_same_history_after_a_killed_archive_run(tmp_path):
    state, sink = tmp_path / "state", tmp_path / "events.jsonl"
    demo(state, sink)                      # shoe 1, whole
    demo(state, sink)                      # shoe 2, whole
    journal, key_file = state / "journal.sqlite", state / "journal.key"
    history = [json.loads(line) for line in export_events(journal)]
    assert {e["shoe"] for e in history if e["type"] == "shoe_ended"} == {1, 2}

    # archive both shoes (a cut each); SIGKILL once the first cut has left the live journal
    run = subprocess.Popen([sys.executable, "-m", "controller", "journal", "archive",
                            str(journal), "--older-than", "0s", "--key-file", str(key_file)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while first_live_record(journal) == 1 and run.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.001)
    killed = run.poll() is None
    if killed:
        os.kill(run.pid, signal.SIGKILL)
    run.communicate(timeout=30)
    live = [json.loads(line) for line in export_events(journal)]
    assert 0 < len(live) < len(history), "the kill should leave shoe 2 in the live journal"
    assert [json.loads(b) for b in export_with_archives(journal)] == history

    demo(state, sink, "--rounds", "2")     # the real daemon starts on it and plays on
    delivered = [strip_anchor(json.loads(line)) for line in sink.read_text().splitlines()]
    assert [e["seq"] for e in delivered] == list(range(1, len(delivered) + 1))
    assert delivered[:len(history)] == history
    assert delivered[-1]["shoe"] == 3
    assert [json.loads(b) for b in export_with_archives(journal)] == delivered
    check = verify_with_archives(journal, key=key_file.read_bytes().rstrip(b"\n"))
    assert check.ok and check.events == len(delivered), check.describe()
    assert killed, "the run should still have been cutting when it was killed"
