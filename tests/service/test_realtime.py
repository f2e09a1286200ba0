"""The card path's real-time priority: taken from READY on when the config asks for one
(``realtime_priority``), by the threads a card passes through and by no other; nothing when it
does not; a refusal logged, never fatal. Real daemon processes (root: allowed by CAP_SYS_NICE,
as the unit's LimitRTPRIO= allows the daemon's own user); the policies read from /proc."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from controller.service import realtime
from controller.service.control.client import ControlClient
from drivers.sim.shoe import ShoeSimulator
from support.daemon_helpers import (
    LinePanelPty,
    daemon_config,
    edited_config,
    log_records,
    running_daemon,
    wait_status,
)
from support.display_helpers import SCREENS_S, SseReader, free_port
from support.waiting import wait_until

SCHED_OTHER, SCHED_RR = 0, 2
SCHED_RR_RESET_ON_FORK = SCHED_RR | os.SCHED_RESET_ON_FORK
GRANT = 10
PYTHON_SWITCH_INTERVAL_S = 0.005  # sys.getswitchinterval() in a fresh interpreter


def policies(pid: int) -> dict[int, tuple[int, int]]:
    """Each thread of ``pid``: (policy, real-time priority), from /proc/<pid>/task/*/stat."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue  # a thread that ended meanwhile
        found[int(task.name)] = (int(fields[38]), int(fields[37]))  # policy, rt_priority
    return found


def realtime_allowed() -> bool:
    """Whether this machine lets this process put a thread in SCHED_RR at all."""
    outcome: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))
            outcome.append(True)
        except OSError:
            outcome.append(False)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return outcome[0]


@contextlib.contextmanager
def ready_daemon(short_dir: Path, panel: LinePanelPty,
                 **settings: Any) -> Iterator[tuple[subprocess.Popen, Path]]:
    """A real daemon on the test's devices, its config's top level updated with ``settings``,
    at READY with its panel connected: the process and its log."""
    config = daemon_config(short_dir, short_dir / "shoe", panel.path)
    with edited_config(config) as data:
        data.update(settings)
    with running_daemon(config, short_dir, panel) as (proc, log):
        yield proc, log


@pytest.mark.slow
@pytest.mark.mosquitto
def test_the_card_path_takes_the_granted_priority_and_the_rest_of_the_daemon_the_lowest(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty], mosquitto) -> None:
    if not realtime_allowed():
        pytest.skip("this machine refuses SCHED_RR to root (no real-time budget)")
    transports = {"file": {"path": str(short_dir / "events.jsonl")},
                  # a second transport, with a network thread of its own
                  "mqtt": {"host": "127.0.0.1", "port": mosquitto.port}}
    port = free_port()
    with ready_daemon(short_dir, devices[1], realtime_priority=GRANT, transports=transports,
                      display={"listen": f"127.0.0.1:{port}"}) as (proc, log):
        # the check after READY runs on a thread the owner loop started, so at the normal
        # priority (its child goes to idle priority): wait until it is over
        wait_status(ControlClient(str(short_dir / "control.sock")),
                    lambda s: s.get("journal_check", {}).get("state") == "ok")
        raised = log_records(log, "card path at real-time priority")
        assert len(raised) == 1 and raised[0]["priority"] == GRANT
        roles = raised[0]["threads"]
        assert roles[0] == "owner loop"
        assert {"driver shoe", "driver panel", "delivery file", "delivery mqtt",
                "network mqtt"} <= set(roles), roles
        threads = policies(proc.pid)
        card_path = {tid for tid, (_, priority) in threads.items() if priority == GRANT}
        assert proc.pid in card_path  # the owner loop is the main thread
        assert len(card_path) == len(roles)
        assert all(threads[tid] == (SCHED_RR, GRANT) for tid in card_path)
        # never handed down (the flag is not in /proc's policy field)
        assert {os.sched_getscheduler(tid) for tid in card_path} == {SCHED_RR_RESET_ON_FORK}
        # the display, the control socket, the checkpoints, the history guard...: every other
        # thread at the lowest real-time priority, handed down to what they start
        rest = {tid: threads[tid] for tid in threads if tid not in card_path}
        # a thread started after the raise (a journal check, a transport's reconnect) is one
        # more of the rest: it inherits the lowest priority, as the next line checks of each
        assert len(rest) >= raised[0]["rest_of_daemon"]
        assert set(rest.values()) == {(SCHED_RR, realtime.REST_PRIORITY)}, rest
        assert {os.sched_getscheduler(tid) for tid in rest} == {SCHED_RR}
        # a page that connects after READY is served by the screen process, at the normal
        # policy (tests/service/test_screen_process.py): the daemon starts no thread for it
        page = SseReader(port)
        try:
            wait_until(lambda: page.messages, SCREENS_S, "the page's first message")
            now = policies(proc.pid)
            assert not [tid for tid in now if tid not in threads]
            [screens] = [r["pid"] for r in log_records(log, "screens: screen process started")]
            assert {policy for policy, _ in policies(screens).values()} == {SCHED_OTHER}
        finally:
            page.close()


@pytest.mark.slow
def test_not_asked_every_thread_keeps_the_normal_priority(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    with ready_daemon(short_dir, devices[1]) as (proc, log):
        assert {policy for policy, _ in policies(proc.pid).values()} == {SCHED_OTHER}
        assert not log_records(log, "card path at real-time priority")
        # the interpreter lock changes hands sooner all the same: no priority needed for that
        [ready] = log_records(log, "ready")
        assert ready["switch_interval_ms"] == realtime.SWITCH_INTERVAL_S * 1000 == 1


def test_a_waiting_thread_is_handed_the_interpreter_lock_sooner() -> None:
    """What the shorter switch interval buys: while one thread runs Python without pause,
    another that wants the lock gets it more often (counted in the same 0.2 s, side by side
    with Python's default; a ratio, not a time)."""
    def handovers(interval: float) -> int:
        before = sys.getswitchinterval()
        sys.setswitchinterval(interval)
        try:
            stop, turns = threading.Event(), [0]

            def waiter() -> None:
                while not stop.is_set():
                    turns[0] += 1
                    time.sleep(0)  # lets go of the lock: each turn is one hand-over back

            other = threading.Thread(target=waiter)
            other.start()
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline:  # the holder: never waits for anything
                pass
            stop.set()
            other.join()
            return turns[0]
        finally:
            sys.setswitchinterval(before)

    # Python's own interval, named: an in-process daemon earlier in this process set the
    # shorter one for good
    default = handovers(PYTHON_SWITCH_INTERVAL_S)
    before = sys.getswitchinterval()
    try:
        assert realtime.shorten_lock_handover() == realtime.SWITCH_INTERVAL_S
        shortened = handovers(realtime.SWITCH_INTERVAL_S)
    finally:
        sys.setswitchinterval(before)
    # 5x shorter: 4-5x the turns on an idle core; 2x leaves room for a busy machine
    assert shortened >= 2 * max(default, 1), (default, shortened)


def test_a_refusal_is_logged_and_the_rest_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread the kernel will not raise (here: one that has ended, so its id is gone)
    is named in one warning; the others are raised all the same, the card path's never
    handed down, the rest's handed down."""
    if not realtime_allowed():
        pytest.skip("this machine refuses SCHED_RR to root (no real-time budget)")
    # a logger not yet bound: a daemon configured earlier in this process would keep it
    # writing past capture_logs (cache_logger_on_first_use)
    monkeypatch.setattr(realtime, "log", structlog.get_logger("pokdeng.realtime"))
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    stop = threading.Event()
    alive, other = (threading.Thread(target=stop.wait) for _ in range(2))
    alive.start()
    other.start()
    try:
        with capture_logs() as logs:
            raised = realtime.raise_card_path(
                [realtime.CardPathThread("gone", ended.native_id),
                 realtime.CardPathThread("alive", alive.native_id),
                 realtime.CardPathThread("not started", None)], 1,
                others=[other.native_id, ended.native_id])  # never the test's own threads
        assert raised == ["alive"]
        assert os.sched_getscheduler(alive.native_id) == SCHED_RR_RESET_ON_FORK
        assert os.sched_getscheduler(other.native_id) == SCHED_RR
        assert os.sched_getparam(other.native_id).sched_priority == realtime.REST_PRIORITY
        [refused] = [entry for entry in logs if entry["log_level"] == "warning"]
        assert refused["event"].startswith("real-time priority refused")
        assert [line.split(":")[0] for line in refused["refused"]] == ["gone"]
        [info] = [entry for entry in logs if entry["log_level"] == "info"]
        assert info["threads"] == ["alive"] and info["rest_of_daemon"] == 1
    finally:
        stop.set()
        alive.join()
        other.join()
