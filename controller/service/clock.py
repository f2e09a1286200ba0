"""The table's clock: the wall clock, or a faster one for the demo and soak runs."""

from __future__ import annotations

import time


class TableClock:
    """The table's clock in Unix seconds; ``speed`` > 1 runs table time faster (the demo).

    At speed 1 it is the wall clock. Otherwise table time advances ``speed`` table seconds per
    real (monotonic) second from ``start``.
    """

    speed: float

    def __init__(self, speed: float = 1.0, start: float | None = None):
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = speed
        self._start: float = time.time() if start is None else start
        self._mono: float = time.monotonic()

    def __call__(self) -> float:
        return self.now()

    def now(self) -> float:
        if self.speed == 1.0:
            return time.time()
        return self._start + (time.monotonic() - self._mono) * self.speed

    def catch_up(self, table_time: float) -> None:
        """A fast clock restarted after a stop resumes from where the table was (demo)."""
        if self.speed != 1.0 and self.now() < table_time:
            self._start, self._mono = table_time, time.monotonic()

    def real_seconds(self, table_seconds: float) -> float:
        """Real seconds until ``table_seconds`` of table time have passed."""
        return table_seconds / self.speed
