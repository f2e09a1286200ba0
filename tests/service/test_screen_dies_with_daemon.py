"""A screen process hung where it never sees its feed end (not stopped: busy, or wedged) dies
with its daemon all the same, so the display's port is free for the next daemon: the kernel
kills it (controller/service/screens/child.py, ``die_with_the_daemon``). Real processes: a
parent standing for the daemon, SIGKILLed, and a child that asked, then ignores its stdin."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]

HUNG_CHILD = textwrap.dedent("""
    import time
    from controller.service.screens.child import die_with_the_daemon
    {ask}
    print("asked", flush=True)
    while True:  # hung: never reads its feed, never ends by itself
        time.sleep(0.05)
""")

PARENT = textwrap.dedent("""
    import subprocess, sys
    child = subprocess.Popen([sys.executable, "-P", "-c", sys.argv[1]], stdout=subprocess.PIPE,
                             stdin=subprocess.PIPE)
    assert child.stdout.readline() == b"asked\\n"
    print(child.pid, flush=True)
    child.wait()
""")


def orphan_after_parent_killed(ask: str) -> int:
    """The hung child's pid, once its parent was SIGKILLed."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, HUNG_CHILD.format(ask=ask)],
                              stdout=subprocess.PIPE, cwd=REPO, start_new_session=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    return child


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_hung_screen_process_dies_with_its_daemon() -> None:
    child = orphan_after_parent_killed("die_with_the_daemon()")
    wait_until(lambda: not alive(child), 10, "the hung child to end with its parent")


def test_without_asking_it_would_have_outlived_the_daemon() -> None:
    """What the test above guards against is real: the same child, not asking, lives on."""
    child = orphan_after_parent_killed("pass")
    try:
        time.sleep(1.0)
        assert alive(child)
    finally:
        os.kill(child, signal.SIGKILL)
