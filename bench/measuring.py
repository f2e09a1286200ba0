"""What the benchmark scripts share: a sink that timestamps what drivers post, percentiles."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


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
