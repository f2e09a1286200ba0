"""Housekeeping children run at idle priority, take their secret on stdin, and stop at once."""

from __future__ import annotations

import ctypes
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from controller.durability.idle_child import ChildFailed, IdleChild
from controller.durability.journal import Journal, connect
from controller.durability.write_lock import write_transaction

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def child_finds_support(monkeypatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [
        TESTS, os.path.dirname(TESTS), os.environ.get("PYTHONPATH")])))


def test_the_child_runs_at_idle_priority_with_its_secret_on_stdin_only() -> None:
    answer = IdleChild("support.child_priority").run(b"s3cret")
    assert answer["policy"] == os.SCHED_IDLE
    assert answer["nice"] == 19
    assert answer["stdin"] == "s3cret"
    assert answer["secret_outside_stdin"] is False


def test_stop_ends_a_running_child() -> None:
    child = IdleChild("support.child_priority", "sleep")
    failed: list[BaseException] = []

    def run() -> None:
        try:
            child.run(b"")
        except ChildFailed as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    started = time.monotonic()
    thread.start()
    time.sleep(0.5)
    child.stop()
    thread.join(30)
    assert not thread.is_alive() and time.monotonic() - started < 30
    assert failed and "exited with -9" in str(failed[0])
    with pytest.raises(ChildFailed, match="stopped"):
        child.run(b"")


IDLE, NORMAL = [os.SCHED_IDLE, 19], [os.SCHED_OTHER, 0]
PR_CAPBSET_DROP, CAP_SYS_NICE = 24, 23  # <linux/prctl.h>, <linux/capability.h>


def a_journal(tmp_path: Path) -> Path:
    path = tmp_path / "journal.sqlite"
    Journal(path).close()
    return path


def written(path: Path) -> bool:
    conn = connect(path)
    try:
        return conn.execute("SELECT 1 FROM meta WHERE key='written'").fetchone() is not None
    finally:
        conn.close()


def test_a_housekeeping_child_writes_at_the_normal_priority_and_goes_back(
        tmp_path: Path) -> None:
    # the daemon's children: idle priority, raised only while they hold the journal's lock,
    # so the table's next append never waits on a writer the PC keeps off the CPU
    if os.geteuid() != 0:
        pytest.skip("the kernel lets root go back to the normal priority; others need "
                    "the unit's LimitNICE=")
    path = a_journal(tmp_path)
    answer = IdleChild("support.child_writes", str(path)).run()
    assert answer == {"before": IDLE, "inside": NORMAL, "after": IDLE}
    assert written(path)


def run_unprivileged(path: Path, nice_limit: int) -> dict:
    """``support.child_writes --lower`` without CAP_SYS_NICE (dropped from the bounding set,
    so not even root has it after exec) and with RLIMIT_NICE ``nice_limit``: a child of a
    daemon run without its unit's ``LimitNICE=+0``."""
    def drop() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if os.geteuid() == 0 and libc.prctl(PR_CAPBSET_DROP, CAP_SYS_NICE, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_SYS_NICE)")
        resource.setrlimit(resource.RLIMIT_NICE, (nice_limit, nice_limit))

    done = subprocess.run([sys.executable, "-m", "support.child_writes", str(path), "--lower"],
                          input=b"", capture_output=True, timeout=60, preexec_fn=drop)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_without_limit_nice_the_child_still_writes_at_idle_priority(tmp_path: Path) -> None:
    path = a_journal(tmp_path)
    assert run_unprivileged(path, 0) == {"before": IDLE, "inside": IDLE, "after": IDLE}
    assert written(path)


def test_the_daemon_s_own_writers_keep_their_priority(tmp_path: Path) -> None:
    # a thread that was not lowered (the owner loop, a sender) is left as it is
    path = a_journal(tmp_path)
    conn = connect(path)
    before = [os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)]
    try:
        with write_transaction(conn):
            inside = [os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0)]
            conn.execute("INSERT INTO meta(key, value) VALUES ('written', 'here')")
    finally:
        conn.close()
    assert inside == before
    assert written(path)
