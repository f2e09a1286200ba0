"""What the field-engineer commands (``read-shoe``, ``read-panel``) share: print a driver's
inputs as table-script lines and run it until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from controller.table.inputs import Input, to_json

if TYPE_CHECKING:
    from drivers.base import Driver

#: one lock for stdout and stderr lines, so a driver thread's output never interleaves
output_lock = threading.Lock()


def print_input(inp: Input) -> None:
    """Print one input as a table-script JSON line on stdout, at once."""
    with output_lock:
        sys.stdout.write(to_json(inp) + "\n")
        sys.stdout.flush()


def print_problem(prog: str, text: str) -> None:
    with output_lock:
        print(f"{prog}: {text}", file=sys.stderr, flush=True)


def run_until_signal(driver: Driver, prog: str, what: str,
                     counts: Callable[[], Mapping[str, int]]) -> int:
    """Start ``driver``, wait for SIGINT/SIGTERM, stop it, print what it received.

    Returns 0 on a signal, 1 when the driver's thread ended by itself (said on stderr, so the
    command never hangs on a dead driver).
    """
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda signum, frame: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        driver.start()
        while not stop.wait(0.5):
            if not driver.running:
                print_problem(prog, f"the {what} driver stopped")
                return 1
    finally:
        driver.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    summary = ", ".join(f"{key} {value}" for key, value in sorted(counts().items())) or "nothing"
    print_problem(prog, f"stopped; received {summary}")
    return 0
