"""systemd's sd_notify protocol: one datagram of ``KEY=value`` lines to ``$NOTIFY_SOCKET``.

The protocol is small enough to write here rather than pull in a dependency: an AF_UNIX
datagram socket whose address is the variable's value, where a leading ``@`` names an
abstract-namespace socket (sent with a leading NUL byte). Outside systemd the variable is unset
and every call is a no-op, so the daemon runs the same under a terminal.

The watchdog is pinged by the owning loop itself (STYLE.md): ``watchdog_interval()`` tells the
loop how often (half of ``$WATCHDOG_USEC``), only when ``$WATCHDOG_PID`` is unset or ours.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

import structlog

log = structlog.get_logger("pokdeng.notify")


def _address(value: str) -> str | bytes:
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


class Notifier:
    """Sends state to the service manager; silent when not run by one."""

    def __init__(self, environ: Mapping[str, str] = os.environ):
        self._address = environ.get("NOTIFY_SOCKET") or None
        self._environ = environ
        self._sock: socket.socket | None = None
        self._last_status: str | None = None
        self._warned = False

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def send(self, *assignments: str) -> bool:
        """Send ``KEY=value`` lines in one datagram; return whether it was delivered."""
        if self._address is None:
            return False
        message = "\n".join(assignments).encode()
        try:
            if self._sock is None:
                # Non-blocking: a service manager that does not read must never stall the
                # table loop (a full datagram queue would block a plain send).
                self._sock = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
            self._sock.sendto(message, _address(self._address))
            return True
        except OSError as exc:
            if not self._warned:  # once: a broken notify socket must not flood the log
                log.warning("cannot notify the service manager", socket=self._address,
                            error=str(exc))
                self._warned = True
            return False

    def ready(self, status: str | None = None) -> bool:
        lines = ["READY=1"]
        if status is not None:
            lines.append(f"STATUS={status}")
            self._last_status = status
        return self.send(*lines)

    def status(self, text: str) -> bool:
        """STATUS=…, sent only when it changed."""
        if text == self._last_status:
            return False
        self._last_status = text
        return self.send(f"STATUS={text}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def extend_timeout(self, seconds: float, status: str | None = None) -> bool:
        """EXTEND_TIMEOUT_USEC=: still starting (a long replay), give us ``seconds`` more."""
        lines = [f"EXTEND_TIMEOUT_USEC={max(1, int(seconds * 1_000_000))}"]
        if status is not None:
            lines.append(f"STATUS={status}")
            self._last_status = status
        return self.send(*lines)

    def stopping(self, status: str | None = None) -> bool:
        lines = ["STOPPING=1"]
        if status is not None:
            lines.append(f"STATUS={status}")
        return self.send(*lines)

    def watchdog_interval(self) -> float | None:
        """Seconds between pings (half the unit's WatchdogSec), or None when not asked for."""
        usec = self._environ.get("WATCHDOG_USEC")
        pid = self._environ.get("WATCHDOG_PID")
        if not usec or (pid and pid.isdigit() and int(pid) != os.getpid()):
            return None
        try:
            value = int(usec)
        except ValueError:
            return None
        return value / 1_000_000 / 2 if value > 0 else None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
