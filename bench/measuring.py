"""What the benchmark scripts share: a sink that timestamps what drivers post, percentiles, a
daemon's idle figures from /proc, waiting for a server to listen, and the scripts' ``--json``."""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path


def wait_listening(port: int, what: str, alive: Callable[[], bool] = lambda: True,
                   timeout: float = 10.0) -> None:
    """Return once 127.0.0.1:``port`` accepts a connection; SystemExit naming ``what`` when it
    does not within ``timeout`` or ``alive()`` turns false (its process ended)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline or not alive():
                raise SystemExit(f"{what} did not start") from None
            time.sleep(0.02)


def whole(low: int, high: int) -> Callable[[str], int]:
    """An option's type: a whole number from ``low`` to ``high``; argparse names the option
    in its error (0 pairs would judge nothing, 10**9 would run for ever)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a whole number, not {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{low} to {high}, not {value}")
        return value
    return parse


def span(low: float, high: float) -> Callable[[str], float]:
    """An option's type: a number from ``low`` to ``high`` (NaN and infinities refused)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a number, not {text!r}") from None
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"{low:g} to {high:g}, not {text}")
        return value
    return parse


def writable(text: str) -> str:
    """An option's type: a file to write at the end of a run, its folder checked now, so
    that a run of minutes does not end in a traceback instead of its figures."""
    folder = Path(text).resolve().parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"no folder {folder} to write {Path(text).name} in")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"folder {folder} is not writable")
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    return text


#: the bench's --pairs and --rounds: beyond these a part runs for hours
PAIRS, ROUNDS = whole(1, 50), whole(1, 200)


def save_json(path: str | None, figures: object) -> None:
    """A script's ``--json FILE``: its figures, indented, when a file was named."""
    if path:
        Path(path).write_text(json.dumps(figures, indent=2) + "\n")


def percentile(values: list[float], percent: float) -> float:
    """Nearest-rank percentile of ``values`` (any order), ``percent`` from 0 to 100."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    return ordered[min(len(ordered) - 1, max(0, round(percent / 100 * (len(ordered) - 1))))]


class TimedSink:
    """A driver sink that records when each input arrived, on ``clock``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.arrivals: list[tuple[float, object]] = []
        self.cond = threading.Condition()

    def __call__(self, inp: object) -> None:
        with self.cond:
            self.arrivals.append((self.clock(), inp))
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[object], bool], n: int,
                 timeout: float = 30.0) -> float:
        """Wait until ``n`` arrivals match ``predicate``; return when the n-th arrived."""
        def matching() -> list[float]:
            return [at for at, inp in self.arrivals if predicate(inp)]

        with self.cond:
            if not self.cond.wait_for(lambda: len(matching()) >= n, timeout):
                raise SystemExit(f"timed out after {timeout:g} s waiting for {n} inputs")
            return matching()[n - 1]


def proc_figures(pid: int) -> tuple[float, int, int]:
    """CPU seconds (user + system), VmRSS and VmHWM in kB of a process, from /proc."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(stat[11]) + int(stat[12])) / ticks
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()[0] if value.split() else ""
    return cpu, int(fields["VmRSS"]), int(fields["VmHWM"])


def idle_figures(pid: int, seconds: float) -> dict[str, float]:
    """A process left alone for ``seconds``: its CPU share and memory (RSS sampled each second,
    at the end, and its peak)."""
    cpu0, _, _ = proc_figures(pid)
    began = time.monotonic()
    rss_samples = []
    while time.monotonic() - began < seconds:
        time.sleep(min(1.0, seconds))
        rss_samples.append(proc_figures(pid)[1])
    cpu1, rss, hwm = proc_figures(pid)
    elapsed = time.monotonic() - began
    return {"idle_seconds": elapsed, "rss_mb": rss / 1024,
            "rss_max_sampled_mb": max(rss_samples) / 1024, "hwm_mb": hwm / 1024,
            "idle_cpu_pct": 100 * (cpu1 - cpu0) / elapsed}


def idle_report(figures: dict[str, float]) -> str:
    """``idle_figures`` as two lines with their goals."""
    return (f"idle RSS: {figures['rss_mb']:.1f} MB at the end, max sampled "
            f"{figures['rss_max_sampled_mb']:.1f} MB, peak VmHWM {figures['hwm_mb']:.1f} MB   "
            f"(goal < 60 MB)\n"
            f"idle CPU: {figures['idle_cpu_pct']:.2f} % of a core over "
            f"{figures['idle_seconds']:.0f} s   (goal < 1 %)")
