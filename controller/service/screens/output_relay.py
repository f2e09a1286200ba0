"""What the screen process writes (its stdout and stderr), relayed into the daemon's log as
the screen process's own.

The screen process answers the network, so nothing it writes may pass for the daemon's: a
line it writes is never copied into the daemon's log stream as it is. Each one is read here
and logged again under ``pokdeng.screens``, its pid beside it; a JSON line's fields (its
event, level, and the rest) are kept under ``screen``, never at the top where they could
name another logger or forge the daemon's own fields. A process that floods its output
costs the journal a few lines a second, with a count of what was held back: never the
daemon's own lines (journald's rate limit is the unit's, the daemon's lines included).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("pokdeng.screens")

#: the longest line relayed whole; the rest of a longer one is cut (and said so)
MAX_LINE = 4096
#: lines relayed a second, on average, and at once after a quiet spell
LINES_PER_S = 20.0
BURST = 100
#: how often the count of lines held back is said, at most
HELD_BACK_SAY_S = 5.0
_LEVELS = {"debug": "debug", "info": "info", "warning": "warning", "error": "error",
           "critical": "error", "exception": "error"}


class LineBudget:
    """A token bucket: ``take()`` is True for a line that may be relayed now."""

    def __init__(self, rate: float = LINES_PER_S, burst: int = BURST,
                 monotonic: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self._monotonic = rate, burst, monotonic
        self._tokens, self._at = float(burst), monotonic()

    def take(self) -> bool:
        now = self._monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


def relayed_fields(line: bytes) -> tuple[str, str, dict[str, Any]]:
    """(level, event, fields) of one line of the screen process's output: a JSON object's
    own event and level, the rest of it kept whole under ``screen``; any other line as text."""
    cut = len(line) > MAX_LINE
    text = line[:MAX_LINE].decode("utf-8", "replace").rstrip("\r\n")
    fields: dict[str, Any] = {"cut": True} if cut else {}
    try:
        record = None if cut else json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        return "info", "screens: a line of its output", {**fields, "text": text}
    level = _LEVELS.get(str(record.pop("level", "info")).lower(), "info")
    event = str(record.pop("event", ""))[:200]
    for own in ("timestamp", "table"):  # the daemon's log line says them itself
        record.pop(own, None)
    return level, f"screens: {event}" if event else "screens: a line of its output", \
        {**fields, "screen": record}


def skip_rest_of_line(stream: Any) -> None:
    """Read past the rest of an overlong line, a bounded piece at a time."""
    while (piece := stream.readline(MAX_LINE)) and not piece.endswith(b"\n"):
        pass


class OutputRelay:
    """The screen processes' output, one after the other, on one thread of the daemon's
    started with the link (never a thread a screen process: the daemon's threads are counted
    when it raises them to real time, realtime.py). ``follow(fd, pid)`` hands it the read
    end of a new process's output; it reads the one before to its end first (the kernel
    closes a process's pipe when it ends, and a new process is started only after the old
    one ended)."""

    def __init__(self, budget: LineBudget | None = None):
        self._budget = budget or LineBudget()
        self._pipes: queue.Queue[tuple[int, int] | None] = queue.Queue()
        self.held_back = 0
        self._said_at = 0.0
        self._pid = 0
        self._thread = threading.Thread(target=self._run, name="screen-output", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def follow(self, read_fd: int, pid: int) -> None:
        self._pipes.put((read_fd, pid))

    def close(self, timeout: float) -> None:
        """Ends once the pipes handed over are read to their ends."""
        self._pipes.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (pipe := self._pipes.get()) is not None:
            read_fd, self._pid = pipe
            try:
                with os.fdopen(read_fd, "rb", buffering=64 * 1024) as stream:
                    while line := stream.readline(MAX_LINE + 1):
                        if len(line) > MAX_LINE and not line.endswith(b"\n"):
                            skip_rest_of_line(stream)
                        self._relay(line)
            except OSError as exc:
                log.warning("screens: its output cannot be read", pid=self._pid,
                            error=exc.strerror)
            self._say_held_back(force=True)

    def _relay(self, line: bytes) -> None:
        if not self._budget.take():
            self.held_back += 1
            self._say_held_back()
            return
        level, event, fields = relayed_fields(line)
        getattr(log, level)(event, screen_pid=self._pid, **fields)

    def _say_held_back(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.held_back and (force or now - self._said_at >= HELD_BACK_SAY_S):
            log.warning("screens: lines of the screen process held back (it writes too much)",
                        pid=self._pid, lines=self.held_back)
            self.held_back, self._said_at = 0, now
