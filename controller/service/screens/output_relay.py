"""What the screen process writes (its stdout and stderr), relayed into the daemon's log as
the screen process's own.

The screen process answers the network, so nothing it writes may pass for the daemon's: a
line it writes is never copied into the daemon's log stream as it is. Each one is read here
and logged again under ``pokdeng.screens``, its pid beside it; a JSON line's fields (its
event, level, and the rest) are kept under ``screen``, never at the top where they could
name another logger or forge the daemon's own fields. A process that floods its output
costs the journal a few lines a second, with a count of what was held back: never the
daemon's own lines (journald's rate limit is the unit's, the daemon's lines included). Nor
does it cost the daemon a core: its pipe is read at a pace (``READS_PER_S``), and beyond it
the flooding process waits on its own full pipe.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

log = structlog.get_logger("pokdeng.screens")

#: the longest line relayed whole; the rest of a longer one is cut (and said so)
MAX_LINE = 4096
MAX_DEPTH = 16  # a JSON line nested deeper is relayed as text
#: lines relayed a second, on average, and at once after a quiet spell
LINES_PER_S = 20.0
BURST = 100
#: how often the count of lines held back is said, at most
HELD_BACK_SAY_S = 5.0
#: the pipe is read this much at a time, at most this often on average and at once: beyond
#: that a flooding process waits on its own full pipe
READ_BYTES = 4096
READS_PER_S = 50.0
READS_BURST = 50
#: how long the output of a process that ended is still read once the next one started
DRAIN_S = 2.0
#: how often the relay looks whether a next pipe came, while the current one says nothing
POLL_S = 0.25
#: control characters in what is relayed as text, shown as U+FFFD: an escape sequence would
#: otherwise reach the terminal of whoever reads the log in its console format
#: (C0 but the tab, DEL, C1, the line and paragraph separators, the bidirectional controls)
CONTROLS_SHOWN = {code: "\ufffd" for code in [*range(0x20), *range(0x7f, 0xa0), 0x2028, 0x2029,
                                              *range(0x202a, 0x202f), *range(0x2066, 0x206a),
                                              0x200e, 0x200f, 0x061c] if code != 0x09}
_LEVELS = {"debug": "debug", "info": "info", "warning": "warning", "error": "error",
           "critical": "error", "exception": "error"}


class LineBudget:
    """A token bucket: ``take()`` is True for a line that may be relayed now."""

    def __init__(self, rate: float = LINES_PER_S, burst: int = BURST,
                 monotonic: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self._monotonic = rate, burst, monotonic
        self._tokens, self._at = float(burst), monotonic()

    def wait(self) -> None:
        """Until a token is there; then takes it (a pace, not a filter)."""
        while not self.take():
            time.sleep((1.0 - self._tokens) / self.rate)

    def available(self) -> bool:
        """Whether ``take()`` would be True now (nothing taken)."""
        now = self._monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        return self._tokens >= 1

    def take(self) -> bool:
        if not self.available():
            return False
        self._tokens -= 1
        return True


def relayed_fields(line: bytes) -> tuple[str, str, dict[str, Any]]:
    """(level, event, fields) of one line of the screen process's output: a JSON object's
    own event and level, the rest of it kept whole under ``screen``; any other line as text."""
    cut = len(line) > MAX_LINE
    text = line[:MAX_LINE].decode("utf-8", "replace").rstrip("\r\n").translate(CONTROLS_SHOWN)
    fields: dict[str, Any] = {"cut": True} if cut else {}
    try:
        # NaN, Infinity and 1e999 are no JSON: the daemon's own JSON line would not be either
        record = None if cut else json.loads(text, parse_constant=_no_constant,
                                             parse_float=_finite)
    except (ValueError, RecursionError):  # "[[[[…": deeper than the parser's stack
        record = None
    if not isinstance(record, dict) or _deeper_than(record, MAX_DEPTH):
        return "info", "screens: a line of its output", {**fields, "text": text}
    # JSON's \u escapes bring back what the text had shown as U+FFFD (an escape sequence)
    # and lone surrogates no encoder writes: the decoded strings are shown again
    record = _shown(record)
    level = _LEVELS.get(str(record.pop("level", "info")).lower(), "info")
    event = str(record.pop("event", ""))[:200]
    for own in ("timestamp", "table"):  # the daemon's log line says them itself
        record.pop(own, None)
    return level, f"screens: {event}" if event else "screens: a line of its output", \
        {**fields, "screen": record}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no JSON number")


def _finite(number: str) -> float:
    value = float(number)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{number} is beyond a double")
    return value


def _shown(value: Any) -> Any:
    """``value`` with every string in it, keys included, as a log may show it: no lone
    surrogate, no control character (``value`` nests at most ``MAX_DEPTH`` deep)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8").translate(CONTROLS_SHOWN)
    if isinstance(value, dict):
        return {_shown(key): _shown(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_shown(inner) for inner in value]
    return value


def _deeper_than(value: Any, depth: int) -> bool:
    """Whether ``value`` nests lists and objects more than ``depth`` deep (without recursion:
    the log's renderer would recurse through it, and a line can nest as deep as it is long)."""
    level: list[Any] = [value]
    for _ in range(depth + 1):
        level = [inner for outer in level if isinstance(outer, (dict, list))
                 for inner in (outer.values() if isinstance(outer, dict) else outer)]
        if not level:
            return False
    return True


class PipeLines:
    """The lines of one pipe, read at most ``READ_BYTES`` at a time and each read only when
    ``pace`` allows: a process that writes without end costs the daemon a few reads a second,
    never a core (the relay's thread is the daemon's, at its priority). The first
    ``MAX_LINE`` bytes of a longer line come as one line (longer than ``MAX_LINE``: it was
    cut), its rest is read past."""

    def __init__(self, fd: int, pace: LineBudget):
        self.fd, self._pace = fd, pace
        self._buffer = bytearray()
        self._skipping = False  # the rest of a line already cut
        self.ended = False

    def next_line(self, timeout_s: float) -> bytes | None:
        """The next line; None when none came within ``timeout_s`` or the pipe ended."""
        deadline = time.monotonic() + timeout_s
        while True:
            line = self._take_line()
            if line is not None:
                return line
            left = deadline - time.monotonic()
            # past the deadline even while bytes keep coming (the rest of a cut line without
            # end): the relay must still look whether the next pipe came
            if self.ended or left <= 0 or not self._readable(left):
                return None
            self._pace.wait()
            data = os.read(self.fd, READ_BYTES)
            if not data:  # the end: a last line without its newline is still a line
                self.ended = True
                rest, cut = bytes(self._buffer), self._skipping
                self._buffer.clear()
                return rest if rest and not cut else None
            self._buffer += data

    def drop_whole_lines(self) -> int:
        """Drops every whole line read so far, at once; returns how many (a flood of empty
        lines is counted in C, not line by line)."""
        last = self._buffer.rfind(b"\n")
        if last < 0:
            return 0
        dropped = self._buffer.count(b"\n", 0, last + 1) - (1 if self._skipping else 0)
        del self._buffer[:last + 1]
        self._skipping = False
        return dropped

    def _take_line(self) -> bytes | None:
        newline = self._buffer.find(b"\n")
        if self._skipping:
            if newline < 0:
                self._buffer.clear()
                return None
            del self._buffer[:newline + 1]
            self._skipping = False
            newline = self._buffer.find(b"\n")
        if 0 <= newline <= MAX_LINE:
            line = bytes(self._buffer[:newline + 1])
            del self._buffer[:newline + 1]
            return line
        if len(self._buffer) > MAX_LINE:  # cut: its first MAX_LINE bytes and one more
            line = bytes(self._buffer[:MAX_LINE + 1])
            del self._buffer[:MAX_LINE + 1]
            self._skipping = True
            return line
        return None

    def _readable(self, timeout_s: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], max(timeout_s, 0.0))
        return bool(ready)


class OutputRelay:
    """The screen processes' output, on one thread of the daemon's started with the link
    (never a thread a screen process: the daemon's threads are counted when it raises them to
    real time, realtime.py). ``follow(fd, pid)`` hands it the read end of a new process's
    output. The one before is read to its end first (the kernel closes a process's pipe when
    it ends, and a new process is started only after the old one ended), but for
    ``DRAIN_S`` at most once the next one is there: a process the old one started may keep
    that pipe open for ever, and the pipes after it would wait unread, one more open
    descriptor at each restart."""

    def __init__(self, budget: LineBudget | None = None, pace: LineBudget | None = None):
        self._budget = budget or LineBudget()
        self._pace = pace or LineBudget(READS_PER_S, READS_BURST)
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
        """Ends once the pipes handed over are read to their ends (or left after
        ``DRAIN_S``)."""
        self._pipes.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        pipe = self._pipes.get()
        while pipe is not None:
            try:
                pipe = self._relay_until_replaced(*pipe)
            except Exception:  # never the relay's end: later processes' pipes would pile up
                log.exception("screens: relaying a screen process's output failed; on to the "
                              "next one")
                pipe = self._pipes.get()

    def _relay_until_replaced(self, read_fd: int, pid: int) -> tuple[int, int] | None:
        """Relays ``read_fd`` to its end, or until ``DRAIN_S`` after the next pipe (or the
        close) came; returns that next one."""
        self._pid = pid
        lines = PipeLines(read_fd, self._pace)
        following: tuple[int, int] | None = None
        next_since: float | None = None
        try:
            while not lines.ended:
                if next_since is None:
                    with contextlib.suppress(queue.Empty):
                        following, next_since = self._pipes.get_nowait(), time.monotonic()
                elif time.monotonic() - next_since > DRAIN_S:
                    log.warning("screens: the output of a screen process that ended is left "
                                "unread: something it started still holds it", pid=pid)
                    break
                if not self._budget.available():  # held back: counted, not handled
                    self.held_back += lines.drop_whole_lines()
                line = lines.next_line(POLL_S)
                if line is not None:
                    self._relay(line)
        except OSError as exc:
            log.warning("screens: its output cannot be read", pid=pid, error=exc.strerror)
        finally:
            os.close(read_fd)
            self._say_held_back(force=True)
        return following if next_since is not None else self._pipes.get()

    def _relay(self, line: bytes) -> None:
        if not self._budget.take():
            self.held_back += 1
            self._say_held_back()
            return
        try:
            level, event, fields = relayed_fields(line)
            getattr(log, level)(event, screen_pid=self._pid, **fields)
        except Exception as exc:  # whatever the line, the relay goes on
            log.warning("screens: a line of its output could not be logged",
                        screen_pid=self._pid, error=type(exc).__name__)

    def _say_held_back(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.held_back and (force or now - self._said_at >= HELD_BACK_SAY_S):
            log.warning("screens: lines of the screen process held back (it writes too much)",
                        pid=self._pid, lines=self.held_back)
            self.held_back, self._said_at = 0, now
