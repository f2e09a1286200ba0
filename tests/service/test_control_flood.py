"""The control socket cannot be exhausted: thousands of idle and bursting connections from an
unprivileged account, and a daemon out of file descriptors, against the real daemon. The
supervisor still pauses the table, the log stays small, threads and memory stay bounded.

Run with ``-s`` to see the figures each test measured."""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from controller.service.control.client import ControlClient, ControlError
from drivers.sim.shoe import ShoeSimulator
from support.control_helpers import NOBODY, Flood, process_figures
from support.daemon_helpers import (
    LinePanelPty,
    NotifyListener,
    daemon_config,
    edited_config,
    start_daemon,
    stop_daemon,
)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")


def start(short_dir: Path, panel: LinePanelPty) -> tuple:
    short_dir.chmod(0o755)  # the flooding account reaches the socket through it
    # The socket's group is nogroup: the flooding account may open it, as a dealer may.
    config = daemon_config(short_dir, short_dir / "shoe", panel.path, group="nogroup")
    # No journal archiving: its thread is not what these tests are about.
    with edited_config(config) as data:
        data["journal"] = {"archive": False}
    notify = NotifyListener(short_dir / "notify")
    log = short_dir / "daemon.log"
    proc = start_daemon(config, notify.path, log)
    notify.wait_for("READY", "1")
    panel.wait_connected()
    return proc, notify, log, str(short_dir / "control.sock")


def timed_pause(sock: str) -> tuple[dict, float]:
    started = time.monotonic()
    answer = ControlClient(sock).supervisor("pause")
    return answer, time.monotonic() - started


def measured(title: str, log: Path, since: int, **figures: Any) -> list[dict]:
    """Print what a test measured (run with -s); the log lines (JSON objects) written since
    byte ``since``, anything else as ``{"event": text}``."""
    with log.open("rb") as handle:
        handle.seek(since)
        lines = [json.loads(line) if line.startswith(b"{") else {"event": line.decode()}
                 for line in handle.read().splitlines()]
    print(f"\n{title}: " + "; ".join(f"{name}: {value}" for name, value in figures.items())
          + f"; log: {log.stat().st_size - since} bytes, {len(lines)} lines")
    return lines


def assert_paused_and_quiet(answer: dict, status: dict, lines: list[dict]) -> None:
    """The supervisor's pause went through, and the flood left a few log lines, no errors."""
    assert answer == {"ok": True, "events": ["paused"]} and status["paused"] is True
    failures = [line for line in lines if "logger" not in line  # printed past the log: a crash
                or line.get("logger") == "pokdeng.control"
                and ("exception" in line or line.get("level") in ("error", "critical"))]
    assert len(lines) <= 40 and not failures, failures


@pytest.mark.slow
def test_thousands_of_idle_and_bursting_readers_leave_the_supervisor_room(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    _, panel = devices
    proc, notify, log, sock = start(short_dir, panel)
    flood = Flood(NOBODY.pw_uid, NOBODY.pw_gid, sock, idle=3000, bursts=[2000, 2000])
    try:
        before, log_start = process_figures(proc.pid), log.stat().st_size
        idle = flood.idle_open()
        answer, pause_s = timed_pause(sock)  # while the bursts are coming
        during = process_figures(proc.pid)
        bursts = flood.bursts()
        after = process_figures(proc.pid)
        status = ControlClient(sock).status()
    finally:
        said = flood.stop()
        stop_daemon(proc, signal.SIGTERM)
        notify.close()
    lines = measured("flood", log, log_start, idle_connected=idle, bursts=bursts,
                     held_connections_ended=said, pause_answered_s=round(pause_s, 3),
                     daemon_before=before, during=during, after=after)
    assert_paused_and_quiet(answer, status, lines)
    assert idle >= 1000  # the backlog took at least that many at once
    # Each burst connection the backlog took was answered or told "busy", none left hanging.
    assert all(b["no_answer"] == 0 for b in bursts)
    assert sum(b["answered"] + b["busy"] for b in bursts) >= 1000
    # No thread per connection, no memory per connection, no line per connection.
    assert max(during["threads"], after["threads"]) <= before["threads"] + 2
    assert max(during["rss_kb"], after["rss_kb"]) <= before["rss_kb"] + 20_000
    assert during["fds"] <= before["fds"] + 20


def limit_leaving_room(pid: int, room: int) -> int:
    """A descriptor limit for ``pid`` with at least ``room`` numbers free below it. Counting
    its descriptors is not enough: one closed earlier leaves a gap, and a descriptor numbered
    above a limit set from the count stays open past it."""
    numbers = [int(name) for name in os.listdir(f"/proc/{pid}/fd")]
    return max(max(numbers) + 1, len(numbers) + room)


@pytest.mark.slow
def test_out_of_descriptors_the_daemon_sheds_logs_little_and_lets_the_supervisor_in(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    _, panel = devices
    proc, notify, log, sock = start(short_dir, panel)
    flood = None
    try:
        ControlClient(sock).status()  # the outbox opens what it reads the backlog with
        # Room for four more descriptors: the control socket runs out long before its slots do.
        limit = limit_leaving_room(proc.pid, 4)
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (limit, limit))
        log_start = log.stat().st_size
        flood = Flood(NOBODY.pw_uid, NOBODY.pw_gid, sock, idle=1000, bursts=[1000] * 3)
        idle = flood.idle_open()
        answer, pause_s = timed_pause(sock)
        bursts = flood.bursts()
        status = ControlClient(sock).status()
        figures = process_figures(proc.pid)
        said = flood.stop()
        flood = None
        assert stop_daemon(proc, signal.SIGTERM) == 0
    finally:
        if flood is not None:
            flood.stop()
        stop_daemon(proc, signal.SIGKILL)
        notify.close()
    lines = measured("out of descriptors", log, log_start, limit=limit, idle_connected=idle,
                     bursts=bursts, held_connections_ended=said,
                     pause_answered_s=round(pause_s, 3), daemon=figures)
    assert_paused_and_quiet(answer, status, lines)
    assert figures["fds"] <= limit
    shed = [line["event"] for line in lines if "cannot accept connections" in line["event"]]
    assert shed and "Too many open files" in shed[0]
    assert sum(b["busy"] for b in bursts) > 0  # turned away with an answer, not dropped


@pytest.mark.slow
def test_a_burst_of_clients_all_get_their_answer(
        short_dir: Path, devices: tuple[ShoeSimulator, LinePanelPty]) -> None:
    _, panel = devices
    proc, notify, log, sock = start(short_dir, panel)

    def status(_: int) -> str:
        # The behaviour under test is the retry, not the machine's speed: the command line's
        # 3 s of retries once ran out for 147 calls on a CI machine busy with another worker
        # (the burst took 3.99 s there; 0.75-1.2 s here under three CPU hogs).
        try:
            return ControlClient(sock, retry_s=30.0).status()["state"]
        except ControlError as exc:
            return str(exc)

    try:
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=200) as pool:
            states = list(pool.map(status, range(2000)))
        seconds = time.monotonic() - started
    finally:
        stop_daemon(proc, signal.SIGTERM)
        notify.close()
    failed = [state for state in states if state != "no_shoe"]
    print(f"\nburst: 2000 status calls from 200 threads in {seconds:.2f} s, "
          f"{len(failed)} failed")
    assert failed == []  # a full socket is tried again, not given up on
