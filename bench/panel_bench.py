"""Panel driver figures: press-to-input latency through pyusb and the emulated panel, stop and
reconnect latency, and parser throughput. Prints one line per figure.

    python bench/panel_bench.py [--presses N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the clone: bench.measuring

from bench.measuring import TimedSink, percentile
from controller.table.inputs import Button, DeviceStatus
from drivers.hid_panel import ReportLayout
from drivers.line_panel import LineSplitter, parse_panel_line
from drivers.sim.panel import SimPanel


def press_latency(debounce_ms: float, presses: int) -> None:
    sink = TimedSink()
    with SimPanel(sink, {"debounce_ms": debounce_ms}) as panel:
        panel.connected.wait(5)
        latencies = []
        for n in range(1, presses + 1):
            pressed_at = time.monotonic()
            panel.press("start_round", hold_s=debounce_ms / 1000 + 0.02)
            latencies.append(
                (sink.wait_for(lambda i: isinstance(i, Button), n) - pressed_at) * 1000)
            while not panel.hardware.idle():
                time.sleep(0.001)
            time.sleep(debounce_ms / 1000 + 0.005)
    print(f"press->Button latency, debounce {debounce_ms:g} ms, {presses} presses: "
          f"median {statistics.median(latencies):.2f} ms, p99 {percentile(latencies, 99):.2f} ms, "
          f"max {max(latencies):.2f} ms")


def stop_and_reconnect() -> None:
    sink = TimedSink()
    panel = SimPanel(sink, {"reconnect_seconds": 0.1})
    panel.start()
    panel.connected.wait(5)
    unplugged = time.monotonic()
    panel.unplug()
    lost = sink.wait_for(lambda i: isinstance(i, DeviceStatus), 2) - unplugged
    replugged = time.monotonic()
    panel.replug()
    back = sink.wait_for(lambda i: isinstance(i, DeviceStatus), 3) - replugged
    started = time.monotonic()
    panel.stop()
    stopped = time.monotonic() - started
    print(f"unplug->connected:false {lost * 1000:.1f} ms; "
          f"replug->connected:true {back * 1000:.1f} ms "
          f"(reconnect_seconds 0.1); stop {stopped * 1000:.1f} ms")


def throughput(name: str, fn, items: list) -> None:
    started = time.perf_counter()
    for item in items:
        fn(item)
    elapsed = time.perf_counter() - started
    print(f"{name}: {len(items) / elapsed:,.0f} per second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--presses", type=int, default=200)
    args = parser.parse_args()
    press_latency(0, args.presses)
    press_latency(20, args.presses)
    stop_and_reconnect()
    lines = [b"start_round", b"switch pause on", b"# comment", b"garbage line"] * 50_000
    throughput("parse_panel_line", lambda raw: _safe(parse_panel_line, raw), lines)
    splitter = LineSplitter()
    throughput("LineSplitter.feed (16-byte chunks)", splitter.feed,
               [b"start_round\nrev", b"eal\nswitch paus", b"e off\n"] * 50_000)
    layout = ReportLayout(buttons={"new_shoe": 0, "start_round": 1, "reveal": 2}, pause_bit=7)
    throughput("ReportLayout.decode", layout.decode, [bytes([n % 256]) for n in range(200_000)])


def _safe(fn, arg):
    try:
        return fn(arg)
    except ValueError:
        return None


if __name__ == "__main__":
    main()
