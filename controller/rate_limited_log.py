"""A log line for a recurring problem at most once per interval: a babbling device (the shoe
and panel drivers) or a flooding peer (resend requests, control and display clients) cannot
flood the journal.

The one limiter of the drivers and the daemon: here, in the package's bottom wing, so that
``drivers`` may import it without importing any of the daemon (tests/test_layering.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any


class RateLimitedLog:
    """At most one line per ``key`` per ``interval_s``; the next line of that key says how
    many were held back since the last one, so nothing is hidden, only summarised. The caller
    chooses what counts as one problem: a shoe's problem code, a panel's kind of bad input,
    or one key for every display client that breaks off."""

    def __init__(self, logger: logging.Logger, interval_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic):
        self.logger = logger
        self.interval_s = interval_s
        self._monotonic = monotonic
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, key: str, message: str, *args: Any) -> None:
        self.log(logging.WARNING, key, message, *args)

    def info(self, key: str, message: str, *args: Any) -> None:
        self.log(logging.INFO, key, message, *args)

    def log(self, level: int, key: str, message: str, *args: Any) -> None:
        now = self._monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            self._held[key] = self._held.get(key, 0) + 1
            return
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            message += f" (+{held} more like this since the last line)"
        self.logger.log(level, message, *args)
