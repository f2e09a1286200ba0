"""A log line for a recurring problem at most once per interval: a babbling device (the panel
drivers) or a flooding peer (resend requests, control clients) cannot flood the journal."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any


class RateLimitedLog:
    """Logs a recurring device problem (or a peer's request) at most once per ``interval_s``
    per key, with the count of occurrences since the last line, so a babbling device or a
    flooding client cannot flood the journal."""

    def __init__(self, logger: logging.Logger, interval_s: float = 5.0,
                 monotonic: Callable[[], float] = time.monotonic):
        self._logger = logger
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, key: str, message: str, *args: Any) -> None:
        self.log(logging.WARNING, key, message, *args)

    def info(self, key: str, message: str, *args: Any) -> None:
        self.log(logging.INFO, key, message, *args)

    def log(self, level: int, key: str, message: str, *args: Any) -> None:
        now = self._monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        suppressed = self._suppressed.pop(key, 0)
        if suppressed:
            message += f" ({suppressed} more like this since the last report)"
        self._logger.log(level, message, *args)
