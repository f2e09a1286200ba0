"""The slow-card trace's wait sampler (bench/card_trace.py): real processes asleep where a test
puts them, seen from /proc by the sampler's own process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.card_trace import DELAYACCT, WaitSampler, delay_accounting, delay_accounting_on, states


@pytest.fixture
def reader() -> Iterator[subprocess.Popen[bytes]]:
    """A process blocked reading a pipe nobody writes to."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"],
                            stdin=subprocess.PIPE)
    time.sleep(0.3)  # past its start, into the read
    yield proc
    proc.kill()
    proc.wait()


def test_a_thread_blocked_on_a_pipe_is_seen_asleep_in_the_kernel_where_it_waits(
        reader: subprocess.Popen[bytes]) -> None:
    found = dict(states(reader.pid))
    assert str(reader.pid) in found
    state, _, channel = found[str(reader.pid)].partition(" ")
    assert state == "S" and "pipe" in channel, found


def test_a_process_on_a_cpu_is_counted_running_not_asleep() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        seen = [dict(states(spinner.pid, "broker")) for _ in range(50)]
        # a spinning process is on a CPU or waiting for one: mostly R, under its name
        running = sum(1 for s in seen if s == {f"broker/{spinner.pid}": "R"})
        assert running > 25, seen
    finally:
        spinner.kill()
        spinner.wait()


def test_the_sampler_adds_up_the_time_between_start_and_stop(
        reader: subprocess.Popen[bytes]) -> None:
    sampler = WaitSampler()
    try:
        time.sleep(0.3)  # the sampler's own start
        sampler.start(reader.pid, {})
        time.sleep(0.2)
        slept = sampler.stop()
        ms = sum(slept[str(reader.pid)].values())
        assert 100 <= ms <= 2000, slept  # about 200 ms, on a busy machine late either way
        # the next card starts from nothing, and a process gone is no error
        sampler.start(reader.pid, {})
        reader.kill()
        reader.wait()
        time.sleep(0.05)
        assert sum(sum(w.values()) for w in sampler.stop().values()) < 1000
        sampler.start(2 ** 22 + 12345, {})  # no such process
        time.sleep(0.02)
        assert sampler.stop() == {}
    finally:
        sampler.close()


def test_the_sampler_follows_another_process_beside_the_daemon_under_its_name(
        reader: subprocess.Popen[bytes]) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(1)"],
                             stdin=subprocess.PIPE)
    sampler = WaitSampler()
    try:
        time.sleep(0.3)
        sampler.start(reader.pid, {"broker": other.pid})
        time.sleep(0.2)
        slept = sampler.stop()
        assert str(reader.pid) in slept and f"broker/{other.pid}" in slept, slept
        assert list(slept[f"broker/{other.pid}"]) == [next(iter(slept[str(reader.pid)]))]
    finally:
        sampler.close()
        other.kill()
        other.wait()


@pytest.mark.skipif(os.geteuid() != 0 or not DELAYACCT.exists(),
                    reason="turning delay accounting on needs root and a kernel with it")
def test_delay_accounting_is_turned_on_for_the_run_and_left_as_it_was() -> None:
    before = DELAYACCT.read_text()
    try:
        DELAYACCT.write_text("0")
        with delay_accounting_on() as on:
            assert on and delay_accounting()
        assert not delay_accounting()
        DELAYACCT.write_text("1")
        with delay_accounting_on() as on:
            assert on
        assert delay_accounting()  # it was on: left on
    finally:
        Path(DELAYACCT).write_text(before)
