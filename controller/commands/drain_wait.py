"""``supervisor drain --wait``: follow the table until the open round has finished.

Reads the watch stream (sealed status snapshots, heartbeats at least every second), so it
notices the moment the last round's result is in, prints where it is, and ends with
"drained: safe to stop" (exit 0) — or exit 1 when the drain was released, the daemon went
away or the time ran out first.
"""

from __future__ import annotations

import sys
import time

from controller.service.control.client import ControlClient, ControlError


def wait_drained(client: ControlClient, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    told_round = None
    try:
        for status in client.watch():
            if status.get("drained"):
                print("drained: safe to stop", flush=True)
                return 0
            if not status.get("draining"):
                print("the drain was released (supervisor resume) before the table drained",
                      file=sys.stderr)
                return 1
            if status.get("round") != told_round:
                told_round = status.get("round")
                print(f"draining: waiting for round {told_round} of shoe {status.get('shoe')} "
                      f"to finish ({status.get('state')})", flush=True)
            if time.monotonic() >= deadline:
                print(f"not drained within {timeout:g} s: round {told_round} is still open",
                      file=sys.stderr)
                return 1
    except (ControlError, OSError, ValueError) as exc:
        print(f"lost the daemon while waiting for the drain: {exc}", file=sys.stderr)
        return 1
    print("the daemon stopped before the table drained", file=sys.stderr)
    return 1
