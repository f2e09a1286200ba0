"""Display benchmark: the daemon's footprint with the dealer display on, and how fast a page
hears of a change.

Runs ``pokdeng-table run`` as a real subprocess (simulated shoe on a pty, a serial line panel
on a pty, a file transport, the watchdog on) with ``display:`` configured and two Server-Sent
Events clients connected (two screens: the dealer's and a scoreboard), then measures:

- RSS (VmRSS, peak VmHWM) and CPU (utime+stime from /proc) over ``--seconds`` idle;
- button to page: a button line written on the panel's pty -> the ``status`` message with the
  new state read by a client, over ``--presses`` presses (new_shoe and end_shoe in turn),
  p50 and max. The path is the whole table's: driver, machine, journal (fsync), display.

Goals: idle RSS < 60 MB, idle CPU < 1 % of a core (as without the display), a page hears of
a change within 100 ms.

    python bench/display_bench.py [--seconds 20] [--presses 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.harness import free_port, notified_table, stop  # noqa: E402
from bench.measuring import idle_figures, idle_report, percentile  # noqa: E402

CLIENTS = 2


class StreamClient:
    """Reads a display's /events; notes when each status's state was first seen."""

    def __init__(self, port: int):
        self.states: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        # the address it listens on: any other Host is refused (display.allowed_hosts)
        self.sock.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        try:
            while chunk := self.sock.recv(65536):
                at = time.monotonic()
                buffer += chunk
                *whole, buffer = buffer.split(b"\n\n")
                for block in whole:
                    lines = block.decode(errors="replace").split("\n")
                    kind = next((x[7:] for x in lines if x.startswith("event: ")), "")
                    data = next((x[6:] for x in lines if x.startswith("data: ")), "")
                    if kind in ("status", "state") and data:
                        view = json.loads(data)
                        view = view.get("status", {}) if kind == "state" else view
                        with self.cond:
                            self.states.append((at, str(view.get("state"))))
                            self.cond.notify_all()
        except OSError:
            return

    def wait_state(self, state: str, after: int, timeout: float = 10.0) -> float:
        """When a status with ``state`` arrived among the messages from index ``after`` on."""
        with self.cond:
            if not self.cond.wait_for(lambda: any(s == state for _, s in self.states[after:]),
                                      timeout):
                raise RuntimeError(f"the display never said {state!r}")
            return next(at for at, s in self.states[after:] if s == state)

    def close(self) -> None:
        self.sock.close()


def measure(seconds: float = 20.0, presses: int = 20) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="pdd-", dir="/tmp"))
    port = free_port()
    clients: list[StreamClient] = []
    try:
        with notified_table(work, watchdog=True,
                            display={"listen": f"127.0.0.1:{port}"}) as table:
            proc = table.spawn()
            try:
                table.notify.wait_ready(proc)
                table.notify.drain()
                clients = [StreamClient(port) for _ in range(CLIENTS)]
                # the screen process starts after READY: on a busy machine, seconds after
                clients[0].wait_state("no_shoe", 0, timeout=60)
                # Button to page, first: it also shows the panel is connected before the idle
                # window.
                latencies = []
                for press in range(presses):
                    button, state = ("new_shoe", "awaiting_flip") if press % 2 == 0 else (
                        "end_shoe", "no_shoe")
                    marks = [len(c.states) for c in clients]
                    began = time.monotonic()
                    table.press(button)
                    arrived = [c.wait_state(state, mark) for c, mark in zip(clients, marks)]
                    latencies.append((max(arrived) - began) * 1000)
                    time.sleep(0.05)
                time.sleep(1.0)  # settle
                idle = idle_figures(proc.pid, seconds)
                heard = min(len(c.states) for c in clients)
            finally:
                for client in clients:
                    client.close()
                status = stop(proc, 20)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "clients": CLIENTS, **idle, "presses": presses,
        "press_to_page_p50_ms": percentile(latencies, 50),
        "press_to_page_max_ms": max(latencies), "statuses_heard": heard,
        "stop_exit_status": status,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="idle window (default 20)")
    parser.add_argument("--presses", type=int, default=20, help="buttons timed (default 20)")
    args = parser.parse_args()
    f = measure(args.seconds, args.presses)
    print(f"with the display on and {f['clients']} pages connected:")
    print(idle_report(f))
    print(f"button to page: p50 {f['press_to_page_p50_ms']:.1f} ms, max "
          f"{f['press_to_page_max_ms']:.1f} ms over {f['presses']} presses   (goal < 100 ms)")
    print(f"clean stop: exit status {f['stop_exit_status']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
