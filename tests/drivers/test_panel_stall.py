"""Panel presses through a stalled reader: every press counted once, every glitch dropped.

The panels' inputs happen on their own schedule (the emulated USB panel's timed inputs, the
firmware's lines on a real pty) while the reading process is held up: a lock the reader needs
held by the test, a CPU hog that keeps the interpreter from the reader, the whole process
frozen with SIGSTOP. The reader then meets a backlog of reports or lines read all at once; a
press is decided from what the panel reported and when it says it saw it, not from when the
backlog was read.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.table.inputs import Button
from drivers.line_panel import LinePanel
from drivers.sim.panel import SimPanel
from drivers.sim.usb_emulation import EmulatedHidPanel
from support.panel_helpers import Collector, PtyPanel, wait_until

BUTTONS = {"new_shoe": 0, "start_round": 1, "reveal": 2, "cancel_round": 3, "end_shoe": 4}
DEBOUNCE_MS = 30
STALL_S = 2.0  # longer than the whole script below: all of it is read as one backlog


def bit(name: str) -> int:
    return 1 << BUTTONS[name]


# What the dealer's hand does on the panel, (delay after the previous step, input bits):
SCRIPT = [
    (0.0, bit("start_round")), (0.003, 0), (0.002, bit("start_round")),  # bouncing contact
    (0.1, 0),                                    # released: one start_round
    (0.1, bit("cancel_round")), (0.008, 0),      # an 8 ms glitch: nothing
    (0.1, bit("reveal")), (0.1, 0),              # reveal ...
    (0.01, bit("reveal")), (0.1, 0),             # ... bouncing on release: still one reveal
    (0.1, bit("reveal")), (0.1, 0),              # a second reveal, released long enough before
    (0.1, bit("new_shoe")), (0.005, 0),          # a 5 ms glitch: nothing
]
PRESSED = ["start_round", "reveal", "reveal"]
SCRIPT_S = sum(delay for delay, _ in SCRIPT)
MARKER = "end_shoe"  # pressed after the stall, live: everything before it has been decided


pytestmark = pytest.mark.usefixtures("no_leaked_driver_threads")


@pytest.fixture
def sim_panel() -> Iterator[tuple[SimPanel, Collector]]:
    sink = Collector()
    panel = SimPanel(sink, {"debounce_ms": DEBOUNCE_MS, "reconnect_seconds": 0.05})
    panel.start()
    assert panel.connected.wait(5)
    yield panel, sink
    panel.stop()


def presses_then_marker(panel: SimPanel, sink: Collector) -> list[str]:
    """The buttons posted up to a live marker press made once the script has played."""
    wait_until(panel.hardware.idle, 10, "the script to play")
    panel.press(MARKER, hold_s=0.1)
    sink.wait_for(lambda items: any(isinstance(i, Button) and i.name == MARKER for i in items),
                  10, "the marker press")
    return [b.name for b in sink.of(Button)]


def test_hid_reader_blocked_on_a_held_lock(sim_panel):
    """The reader waits for the USB backend's lock (held here) while the whole script happens."""
    panel, sink = sim_panel
    with panel.bus.cond:
        panel.hardware.queue_inputs(SCRIPT)
        time.sleep(STALL_S)  # the reader is blocked: nothing is read until the lock goes
    assert presses_then_marker(panel, sink) == PRESSED + [MARKER]


def test_hid_reader_starved_by_a_cpu_hog(sim_panel):
    """A busy thread holds the interpreter in 0.3 s slices: the reader runs now and then and
    finds reports piled up, a press together with its release."""
    panel, sink = sim_panel
    done = threading.Event()

    def hog() -> None:
        while not done.is_set():
            sum(range(1000))

    switch = sys.getswitchinterval()
    hogs = [threading.Thread(target=hog, daemon=True) for _ in range(2)]
    sys.setswitchinterval(0.3)
    try:
        for thread in hogs:
            thread.start()
        panel.hardware.queue_inputs(SCRIPT)
        time.sleep(SCRIPT_S + 0.5)
    finally:
        done.set()
        for thread in hogs:
            thread.join()
        sys.setswitchinterval(switch)
    assert presses_then_marker(panel, sink) == PRESSED + [MARKER]


def test_hid_panel_counter_wrapping_during_a_stall():
    """The panel's 32-bit millisecond counter wraps in the middle of the backlog."""
    sink = Collector()
    hardware = EmulatedHidPanel(timestamped=True, clock_start_ms=2**32 - 400, serial="SIM-PANEL")
    with SimPanel(sink, {"debounce_ms": DEBOUNCE_MS, "reconnect_seconds": 0.05},
                  hardware=hardware) as panel:
        assert panel.connected.wait(5)
        with panel.bus.cond:
            panel.hardware.queue_inputs(SCRIPT)
            time.sleep(STALL_S)
        assert presses_then_marker(panel, sink) == PRESSED + [MARKER]


# -- the whole process frozen: SIGSTOP, then SIGCONT ------------------------------------------

SIM_PANEL_PROCESS = """
import json, sys
from controller.table.inputs import Button
from drivers.sim.panel import SimPanel

def post(inp):
    if isinstance(inp, Button):
        print(inp.name, flush=True)

panel = SimPanel(post, {"debounce_ms": int(sys.argv[2]), "reconnect_seconds": 0.05})
panel.start()
assert panel.connected.wait(10)
panel.hardware.queue_inputs([(0.3, 0)] + json.loads(sys.argv[1]))  # from 0.3 s on
print("ready", flush=True)
for line in sys.stdin:  # a button name: press it
    panel.press(line.strip(), hold_s=0.1)
panel.stop()
"""


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


def read_until(proc: subprocess.Popen, last: str, timeout: float = 20) -> list[str]:
    """Lines the process prints up to and including ``last`` (or fail after ``timeout``)."""
    lines: list[str] = []
    timer = threading.Timer(timeout, proc.kill)  # a hung child fails the test, not the run
    timer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.append(raw.strip())
            if lines[-1] == last:
                return lines
    finally:
        timer.cancel()
    raise AssertionError(f"{last!r} never came; got {lines}")


def test_hid_reader_process_stopped_and_continued():
    proc = subprocess.Popen([sys.executable, "-c", SIM_PANEL_PROCESS, json.dumps(SCRIPT),
                             str(DEBOUNCE_MS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=child_env())
    try:
        assert read_until(proc, "ready") == ["ready"]
        proc.send_signal(signal.SIGSTOP)  # the script plays while the process is frozen
        time.sleep(0.3 + SCRIPT_S + 0.5)
        proc.send_signal(signal.SIGCONT)
        assert proc.stdin is not None
        proc.stdin.write(MARKER + "\n")
        proc.stdin.flush()
        assert read_until(proc, MARKER) == PRESSED + [MARKER]
    finally:
        proc.kill()
        proc.wait(10)


# -- the serial line panel on a real pty ----------------------------------------------------------

LINE_DEBOUNCE_MS = 50
# the firmware's lines, stamped with its millisecond counter (the last one wraps past 2**32)
LINES = [
    b"start_round @1000\n",
    b"start_round @1010\n",          # a repeat 10 ms later: dropped
    b"reveal @1400\n",
    b"reveal @1430\n",                # 30 ms after the reveal: dropped
    b"start_round @1500\n",          # a second start_round, 500 ms after the first: counted
    b"cancel_round @4294967290\n",   # (the counter wraps between here ...)
    b"cancel_round @20\n",           # ... and here: 26 ms later, a repeat: dropped
    b"cancel_round @900\n",          # 906 ms later: counted
]
LINE_PRESSED = ["start_round", "reveal", "start_round", "cancel_round", "cancel_round"]


@pytest.fixture
def line(tmp_path: Path) -> Iterator[PtyPanel]:
    panel = PtyPanel(tmp_path / "panel")
    panel.plug()
    yield panel
    panel.unplug()


class GatedSink(Collector):
    """A sink the test can hold shut: the driver thread blocks in its post, as behind a
    daemon that takes its time."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Lock()

    def __call__(self, inp) -> None:
        with self.gate:
            super().__call__(inp)


def test_line_reader_blocked_on_a_held_lock(line):
    sink = GatedSink()
    with LinePanel(sink, {"url": str(line.path), "reconnect_seconds": 0.05,
                          "debounce_ms": LINE_DEBOUNCE_MS}) as driver:
        line.expect(b"status?\n")
        line.send(b"switch pause off\n")
        sink.wait_for(lambda items: len(items) >= 2, what="connected and the switch")
        with sink.gate:  # the driver thread stalls posting the first press
            for data in LINES:
                line.send(data)
                time.sleep(0.05)  # the firmware's lines come apart; the reader is stuck
            time.sleep(STALL_S / 2)
        line.send(b"end_shoe @5000\n")
        buttons = sink.wait_count(Button, len(LINE_PRESSED) + 1)
        assert [b.name for b in buttons] == LINE_PRESSED + ["end_shoe"]
        assert driver.counters["ignored_repeats"] == 3


LINE_PANEL_PROCESS = """
import sys
from controller.table.inputs import Button
from drivers.line_panel import LinePanel

def post(inp):
    if isinstance(inp, Button):
        print(inp.name, flush=True)

with LinePanel(post, {"url": sys.argv[1], "reconnect_seconds": 0.05,
                      "debounce_ms": int(sys.argv[2])}):
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes it
"""


def test_line_reader_process_stopped_and_continued(line):
    proc = subprocess.Popen([sys.executable, "-c", LINE_PANEL_PROCESS, str(line.path),
                             str(LINE_DEBOUNCE_MS)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=child_env())
    try:
        assert read_until(proc, "ready") == ["ready"]
        line.expect(b"status?\n")  # the port is open: what we send now waits in the pty
        proc.send_signal(signal.SIGSTOP)
        for data in LINES:
            line.send(data)
            time.sleep(0.05)
        proc.send_signal(signal.SIGCONT)
        line.send(b"end_shoe @5000\n")
        assert read_until(proc, "end_shoe") == LINE_PRESSED + ["end_shoe"]
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(10)
        finally:
            proc.kill()
