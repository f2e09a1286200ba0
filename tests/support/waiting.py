"""The one way the tests wait: poll a predicate until it holds, or fail naming what never came.

``wait_until(predicate, timeout, what)`` returns the predicate's first truthy value. Given a
``condition`` (a ``threading.Condition`` the producer notifies) it waits on that instead of
sleeping, re-checking at least every ``interval`` for state that changes without a notify.
Specialised waits (a collector's inputs, a notify socket's messages, a subscriber's events) are
thin wrappers over this one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, what: str = "condition", *,
               condition: threading.Condition | None = None, interval: float = 0.01,
               details: Callable[[], object] | None = None) -> T:
    deadline = time.monotonic() + timeout
    if condition is not None:
        with condition:
            return _poll(predicate, deadline, timeout, what, details,
                         lambda left: condition.wait(min(left, max(interval, 0.05))))
    return _poll(predicate, deadline, timeout, what, details,
                 lambda left: time.sleep(min(left, interval)))


def _poll(predicate: Callable[[], T], deadline: float, timeout: float, what: str,
          details: Callable[[], object] | None, pause: Callable[[float], object]) -> T:
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            extra = f"; {details()}" if details is not None else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{extra}")
        pause(left)
