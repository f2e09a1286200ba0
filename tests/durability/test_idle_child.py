"""Housekeeping children run at idle priority, take their secret on stdin, and stop at once."""

from __future__ import annotations

import os
import threading
import time

import pytest

from controller.durability.idle_child import ChildFailed, IdleChild

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
